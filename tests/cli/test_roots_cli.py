"""Portable workspaces and GitOps through the real CLI: `ledger root add|list`, target
add under roots, `status --exit-code`, and k8s manifests committed with the ledger."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.store.kit import assert_refused
from tests.store.kit import run_cli
from tests.sync.kit import MANIFEST

SERVE = "#!/usr/bin/env bash\nexport SGLANG_SM120_MMA_TARGET_CTAS=256\nexec sglang\n"


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stdout


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_gitops_manifest_in_the_repo_every_change_a_commit_ci_fails_on_a_hand_edit(tmp_path):
    ws = tmp_path / "fleet"
    ok(run_cli(tmp_path, "init", ws))
    (ws / "k8s").mkdir()
    (ws / "k8s" / "decode.yaml").write_text(MANIFEST)
    out = ok(run_cli(ws, "target", "add", "decode", ws / "k8s" / "decode.yaml",
                     "--format", "k8s", "--container", "sglang"))
    assert "k8s/decode.yaml" in out
    assert git(ws, "show", "HEAD:k8s/decode.yaml") + "\n" == MANIFEST  # committed as is
    ok(run_cli(ws, "record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
               "--class", "perf", "--title", "CTAS 512 for c64"))
    # the manifest change is the ledger's commit: what Argo CD / Flux applies
    assert set(git(ws, "show", "--name-only", "--format=", "HEAD").split()) == \
        {"entries.jsonl", "k8s/decode.yaml"}
    assert 'value: "512"' in git(ws, "show", "HEAD:k8s/decode.yaml")
    assert git(ws, "status", "--porcelain") == ""
    r = run_cli(ws, "status", "--exit-code")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "ok" in r.stdout
    # someone edits the manifest outside the ledger: CI fails, naming the file
    live = ws / "k8s" / "decode.yaml"
    live.write_text(live.read_text().replace('"512"', '"1024"'))
    r = run_cli(ws, "status", "--exit-code")
    assert r.returncode == 1
    assert str(ws / "k8s" / "decode.yaml") in r.stdout and "DRIFT" in r.stdout
    assert "error:" in r.stderr and "k8s/decode.yaml" in r.stderr
    r = run_cli(ws, "--json", "status", "--exit-code")
    assert r.returncode == 1 and json.loads(r.stdout)["clean"] is False
    assert run_cli(ws, "status").returncode == 0  # without the flag: a report, exit 0
    # reverting through the ledger is a commit too (after putting the file back)
    (ws / "k8s" / "decode.yaml").write_text(git(ws, "show", "HEAD:k8s/decode.yaml") + "\n")
    ok(run_cli(ws, "revert", "--perf-only", "--why", "hang"))
    assert git(ws, "show", "HEAD:k8s/decode.yaml") + "\n" == MANIFEST
    assert run_cli(ws, "status", "--exit-code").returncode == 0


def test_target_add_outside_the_workspace_under_no_root_declares_one(tmp_path):
    ws = tmp_path / "ws"
    ok(run_cli(tmp_path, "init", ws))
    deploy = tmp_path / "opt" / "sglang"
    deploy.mkdir(parents=True)
    (deploy / "serve.sh").write_text(SERVE)
    out = ok(run_cli(ws, "target", "add", "decode", deploy / "serve.sh", "--format", "bash"))
    assert "added target decode: sglang:serve.sh" in out
    assert f"declared root sglang = {deploy}" in out
    config = (ws / "ledger.yaml").read_text()
    assert "path: sglang:serve.sh" in config  # the default: `root list` below
    assert git(ws, "status", "--porcelain") == ""
    assert_refused(run_cli(ws, "root", "add", "sglang", tmp_path), "ledger.yaml:", "declared",
                   "--local")
    rows = json.loads(ok(run_cli(ws, "--json", "root", "list")))
    assert rows == [{"name": "sglang", "default": str(deploy), "directory": str(deploy),
                     "from": "ledger.yaml:4", "problem": None}]
    # this machine puts the root elsewhere (ledger.local.yaml), and a shell elsewhere again
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "serve.sh").write_text(SERVE.replace("256", "128"))
    ok(run_cli(ws, "root", "add", "sglang", mine, "--local"))
    assert "ledger.local.yaml" in (ws / ".gitignore").read_text()
    assert git(ws, "status", "--porcelain") == ""
    rows = json.loads(ok(run_cli(ws, "--json", "root", "list")))
    assert rows[0]["directory"] == str(mine) and rows[0]["from"] == "ledger.local.yaml:3"
    show = json.loads(ok(run_cli(ws, "--json", "target", "show", "decode")))
    assert show["path"] == str(mine / "serve.sh")
    r = run_cli(ws, "--json", "root", "list", env={"LEDGER_ROOT_SGLANG": str(deploy)})
    assert json.loads(ok(r))[0]["from"] == "LEDGER_ROOT_SGLANG"


def test_a_second_file_uses_the_declared_root_and_another_directory_gets_its_own(tmp_path):
    ws = tmp_path / "ws"
    ok(run_cli(tmp_path, "init", ws))
    deploy, other = tmp_path / "opt" / "sglang", tmp_path / "srv" / "sglang"
    for d in (deploy, other):
        d.mkdir(parents=True)
    for f in (deploy / "decode.sh", deploy / "prefill.sh", other / "serve.sh"):
        f.write_text(SERVE)
    ok(run_cli(ws, "target", "add", "decode", deploy / "decode.sh", "--format", "bash"))
    out = ok(run_cli(ws, "target", "add", "prefill", deploy / "prefill.sh", "--format", "bash"))
    assert "sglang:prefill.sh" in out and "declared root" not in out
    out = ok(run_cli(ws, "target", "add", "other", other / "serve.sh", "--format", "bash"))
    assert "sglang_2:serve.sh" in out and f"declared root sglang_2 = {other}" in out
    out = ok(run_cli(ws, "target", "add", "x", other / "serve.sh", "--format", "bash",
                     "--dry-run"))
    assert "would add" in out
    assert "x:" not in (ws / "ledger.yaml").read_text()
    # nothing of this machine is committed but the roots' defaults
    config = YAML(typ="safe").load(git(ws, "show", "HEAD:ledger.yaml"))
    assert config["roots"] == {"sglang": str(deploy), "sglang_2": str(other)}
    assert {t["path"] for t in config["targets"].values()} == {
        "sglang:decode.sh", "sglang:prefill.sh", "sglang_2:serve.sh"}


def test_root_add_rewrites_an_old_workspaces_absolute_paths_all_or_nothing(tmp_path):
    ws = tmp_path / "ws"
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    for name in ("a.sh", "b.sh"):
        (deploy / name).write_text(SERVE)
    engine = deploy / "engine"
    engine.mkdir()
    subprocess.run(["git", "init", "--quiet", str(engine)], check=True)
    ok(run_cli(tmp_path, "init", ws))
    # an older workspace: absolute paths, as previous versions wrote them
    text = (ws / "ledger.yaml").read_text().replace("engine_repo:\n", f"engine_repo: {engine}\n")
    text = text.replace(
        "targets: {}", f"targets:\n  a:\n    path: {deploy / 'a.sh'}\n    format: bash\n"
                       f"  b:\n    path: {deploy / 'b.sh'}\n    format: bash")
    (ws / "ledger.yaml").write_text(text)
    git(ws, "commit", "-qam", "old layout")
    assert json.loads(ok(run_cli(ws, "--json", "status")))["clean"]
    before = (ws / "ledger.yaml").read_bytes()
    # killed after writing ledger.yaml, before its commit: the next command puts it back
    r = run_cli(ws, "root", "add", "deploy", deploy, env={"LEDGER_CRASH_AT": "after-ledger-files"})
    assert r.returncode == -9
    r = run_cli(ws, "root", "list")
    assert "note:" in r.stderr and "rolled back" in r.stderr
    assert (ws / "ledger.yaml").read_bytes() == before
    assert git(ws, "status", "--porcelain") == ""
    out = ok(run_cli(ws, "root", "add", "deploy", deploy))
    assert f"target a: {deploy / 'a.sh'} -> deploy:a.sh" in out
    assert f"engine_repo: {engine} -> deploy:engine" in out
    text = (ws / "ledger.yaml").read_text()
    assert str(deploy / "a.sh") not in text and "deploy:b.sh" in text
    assert "root add deploy" in git(ws, "log", "-1", "--format=%s")
    ok(run_cli(ws, "record", "knob", "a", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
               "perf", "--title", "CTAS 512"))
    assert "=512" in (deploy / "a.sh").read_text()


def test_doctor_and_recovery_on_a_rooted_target(tmp_path):
    ws = tmp_path / "ws"
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "serve.sh").write_text(SERVE)
    ok(run_cli(tmp_path, "init", ws, "--root", f"deploy={deploy}"))
    ok(run_cli(ws, "target", "add", "decode", deploy / "serve.sh", "--format", "bash"))
    r = run_cli(ws, "record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
                "perf", "--title", "CTAS 512", env={"LEDGER_CRASH_AT": "after-targets"})
    assert r.returncode == -9 and "=512" in (deploy / "serve.sh").read_text()
    r = run_cli(ws, "status")
    assert "rolled back" in r.stderr
    assert (deploy / "serve.sh").read_text() == SERVE
    assert "no problems found" in ok(run_cli(ws, "doctor"))
    # the root's directory gone on this machine: said, naming where it came from
    r = run_cli(ws, "target", "show", "decode", env={"LEDGER_ROOT_DEPLOY": str(tmp_path / "x")})
    assert_refused(r, "LEDGER_ROOT_DEPLOY", str(tmp_path / "x"), "not a directory")


@pytest.mark.parametrize("bad", ["deploy:../escape.sh", "deploy:/etc/passwd"])
def test_hand_written_rooted_paths_cannot_leave_the_root(tmp_path, bad):
    ws = tmp_path / "ws"
    (tmp_path / "deploy").mkdir()
    ok(run_cli(tmp_path, "init", ws, "--root", f"deploy={tmp_path / 'deploy'}"))
    text = (ws / "ledger.yaml").read_text().replace(
        "targets: {}", f"targets:\n  x:\n    path: {bad}\n    format: bash")
    (ws / "ledger.yaml").write_text(text)
    assert_refused(run_cli(ws, "status"), "ledger.yaml:", bad, "root")


def test_init_gives_an_engine_repo_outside_the_workspace_a_root_of_its_own(tmp_path):
    engine = tmp_path / "src" / "sglang"
    engine.mkdir(parents=True)
    subprocess.run(["git", "init", "--quiet", str(engine)], check=True)
    ws = tmp_path / "ws"
    out = ok(run_cli(tmp_path, "init", ws, "--engine-repo", engine))
    assert f"declared root engine = {engine}" in out
    config = YAML(typ="safe").load((ws / "ledger.yaml").read_text())
    assert config["engine_repo"] == "engine:" and config["roots"] == {"engine": str(engine)}
    # --root picks the name (and holds the repo): nothing more is declared
    ws2 = tmp_path / "ws2"
    out = ok(run_cli(tmp_path, "init", ws2, "--engine-repo", engine, "--root",
                     f"src={tmp_path / 'src'}"))
    assert "declared root" not in out
    config = YAML(typ="safe").load((ws2 / "ledger.yaml").read_text())
    assert config["engine_repo"] == "src:sglang"
