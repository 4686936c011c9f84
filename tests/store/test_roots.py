"""Named roots (ledger.store.roots): where ROOT:PATH is on this machine, and how a path
is written.  Real files in tmp_path; the environment is passed in, never patched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.errors import ConfigError
from ledger.errors import LedgerError
from ledger.errors import Refused
from ledger.store.roots import RootError
from ledger.store.workspace import Workspace
from ledger.store.workspace import load_roots

LEDGER = """\
version: 1
roots:
  deploy: /nonexistent/team-default
  engine: ../engine
  scratch:
engine_repo: 'engine:'
targets:
  decode:
    path: deploy:serve.sh
    format: bash
"""


def _ws(tmp_path: Path, text: str = LEDGER, local: str | None = None) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "ledger.yaml").write_text(text)
    (root / "entries.jsonl").write_text("")
    if local is not None:
        (root / "ledger.local.yaml").write_text(local)
    return Workspace(root)


def _roots(ws: Workspace, env: dict[str, str]):
    r = load_roots(ws.root, ws.config, ws.config_path, ws.local_config_path)
    r.env = env
    return r


def test_env_beats_local_beats_default_and_each_says_where(tmp_path):
    for d in ("team", "mine", "shell"):
        (tmp_path / d).mkdir()
    text = LEDGER.replace("/nonexistent/team-default", str(tmp_path / "team"))
    ws = _ws(tmp_path, text, local=f"roots:\n  deploy: {tmp_path / 'mine'}\n")
    assert _roots(ws, {"LEDGER_ROOT_DEPLOY": str(tmp_path / "shell")}).directory("deploy") \
        == tmp_path / "shell"
    r = _roots(ws, {"LEDGER_ROOT_DEPLOY": ""})  # empty = unset
    assert r.directory("deploy") == tmp_path / "mine"
    assert r.setting("deploy").source == "ledger.local.yaml:2"
    (ws.root / "ledger.local.yaml").unlink()
    ws.reload()
    r = _roots(ws, {})
    assert r.directory("deploy") == tmp_path / "team"
    assert r.setting("deploy").source == "ledger.yaml:3"
    assert r.path_of("deploy:serve.sh") == tmp_path / "team" / "serve.sh"


def test_tilde_is_the_home_and_relative_dirs_are_the_workspaces(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "src").mkdir(parents=True)
    (tmp_path / "engine").mkdir()
    monkeypatch.setenv("HOME", str(home))  # what ~ means for os.path.expanduser
    ws = _ws(tmp_path, local="roots:\n  deploy: ~/src\n")
    r = _roots(ws, {})
    assert r.directory("deploy") == home / "src"
    assert r.directory("engine") == tmp_path / "engine"  # ../engine from the workspace
    ws._roots = r
    assert ws.engine_repo_path == tmp_path / "engine"


def test_missing_directories_name_the_line_or_the_variable(tmp_path):
    ws = _ws(tmp_path)
    with pytest.raises(RootError) as e:
        _roots(ws, {}).directory("deploy")
    assert "ledger.yaml:3" in str(e.value) and "/nonexistent/team-default" in str(e.value)
    assert "ledger root add deploy DIR --local" in str(e.value)
    with pytest.raises(RootError) as e:
        _roots(ws, {"LEDGER_ROOT_DEPLOY": "/nonexistent/shell"}).directory("deploy")
    assert str(e.value).startswith("LEDGER_ROOT_DEPLOY: root deploy = '/nonexistent/shell'")
    with pytest.raises(RootError) as e:
        _roots(ws, {}).directory("scratch")  # declared with no default, set nowhere
    assert "ledger.yaml:5" in str(e.value) and "no directory on this machine" in str(e.value)
    with pytest.raises(RootError) as e:
        _roots(ws, {}).directory("nope")
    assert "no such root" in str(e.value) and "deploy, engine, scratch" in str(e.value)
    (ws.root / "ledger.local.yaml").write_text("roots:\n  engine: ../engine\n  deploy: /nope/x\n")
    ws.reload()
    with pytest.raises(RootError) as e:
        _roots(ws, {}).directory("deploy")
    assert str(e.value).startswith("ledger.local.yaml:3: root deploy = '/nope/x'")


def test_local_file_errors_name_file_and_line(tmp_path):
    ws = _ws(tmp_path, local="roots:\n  deploy: /x\n  other: /y\n")
    with pytest.raises(ConfigError) as e:
        _ = ws.roots
    assert "ledger.local.yaml:3" in str(e.value) and "'other' is not declared" in str(e.value)
    (ws.root / "ledger.local.yaml").write_text("targets: {}\n")
    ws.reload()
    with pytest.raises(ConfigError) as e:
        _ = ws.roots
    assert "ledger.local.yaml:1" in str(e.value) and "roots only" in str(e.value)


@pytest.mark.parametrize("path,problem", [
    ("deploy:../x.sh", "must stay inside the root"),
    ("deploy:a/../../x.sh", "must stay inside the root"),
    ("deploy:/etc/passwd", "must be relative to the root"),
    ("deploy:~/x.sh", "must be relative to the root"),
    ("nope:x.sh", "names root 'nope', which ledger.yaml does not declare"),
    ("Deploy:x.sh", "is not a valid root name"),
])
def test_rooted_paths_that_leave_their_root_are_refused_at_load(tmp_path, path, problem):
    with pytest.raises(ConfigError) as e:
        _ws(tmp_path, LEDGER.replace("deploy:serve.sh", path))
    assert problem in str(e.value) and "ledger.yaml:8" in str(e.value)  # target decode


def test_an_old_workspace_with_absolute_paths_still_loads_and_resolves(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text("export A=1\n")
    ws = _ws(tmp_path, f"version: 1\nengine_repo: {tmp_path}\ntargets:\n  decode:\n"
                       f"    path: {script}\n    format: bash\n")
    assert ws.target_path(ws.target("decode")) == script
    assert ws.engine_repo_path == tmp_path
    assert ws.config.roots == {}
    assert ws.target_path(ws.target("decode")).read_text() == "export A=1\n"


def test_place_picks_the_deepest_root_and_refuses_ties_and_strays(tmp_path):
    outer, inner = tmp_path / "srv", tmp_path / "srv" / "sglang"
    inner.mkdir(parents=True)
    ws = _ws(tmp_path, f"version: 1\nroots:\n  srv: {outer}\n  sglang: {inner}\n"
                       f"  twin: {inner}\ntargets: {{}}\n")
    with pytest.raises(Refused) as e:
        ws.place(inner / "serve.sh")
    assert "root sglang" in str(e.value) and "root twin" in str(e.value)
    assert "ledger.yaml:4" in str(e.value) and "ledger.yaml:5" in str(e.value)
    assert "--root NAME" in str(e.value)
    assert ws.place(inner / "serve.sh", "twin") == "twin:serve.sh"
    assert ws.place(inner / "serve.sh", "srv") == "srv:sglang/serve.sh"
    assert ws.place(outer / "a.sh") == "srv:a.sh"
    assert ws.place(ws.root / "k8s" / "decode.yaml") == "k8s/decode.yaml"
    with pytest.raises(Refused) as e:
        ws.place(tmp_path / "elsewhere" / "x.sh")
    assert str(tmp_path / "elsewhere" / "x.sh") in str(e.value)
    assert "ledger root add NAME DIR" in str(e.value) and "--root" in str(e.value)
    with pytest.raises(Refused) as e:
        ws.place(tmp_path / "x.sh", "srv")
    assert "is not under root srv" in str(e.value)
    with pytest.raises(LedgerError):
        ws.place(outer / "a.sh", "nope")


def test_a_target_whose_root_is_not_here_does_not_stop_the_others(tmp_path):
    (tmp_path / "ws").mkdir()
    ws_root = tmp_path / "ws"
    (ws_root / "serve.sh").write_text("export A=1\n")
    text = LEDGER.replace("targets:\n", "targets:\n  local:\n    path: serve.sh\n"
                                        "    format: bash\n")
    (ws_root / "ledger.yaml").write_text(text)
    (ws_root / "entries.jsonl").write_text("")
    ws = Workspace(ws_root)
    ws._roots = _roots(ws, {})
    assert ws.target_path(ws.target("local")) == ws_root / "serve.sh"
    with pytest.raises(RootError):
        ws.target_path(ws.target("decode"))
    assert os.path.isabs(str(ws.target_path(ws.target("local"))))
