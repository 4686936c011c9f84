"""A patched engine checkout's own defaults (issue 47, item 6): `status` and `diff` show a
default the checkout's commit moved away from its release, naming that commit; `doctor`
reports the commit while no entry records it.

The engine repo is a real git checkout laid out as SGLang's (``python/sglang/...``), built
from the generator's SGLang fixture (tests/envknobs/catalog_src) as release 0.5.23, with
one env var whose default is the real 0.5.23's (SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK,
128 in envknobs/catalogs/releases/sglang-0.5.23.yaml); a local commit then moves it to 256.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.store import cache

FIXTURE = Path(__file__).resolve().parents[1] / "envknobs" / "catalog_src" / "sglang"
KNOB = "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@example.com",
           "GIT_COMMITTER_NAME": "op", "GIT_COMMITTER_EMAIL": "op@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def set_default(repo: Path, value: int) -> None:
    environ = repo / "python" / "sglang" / "srt" / "environ.py"
    lines = [ln for ln in environ.read_text().splitlines(keepends=True) if KNOB not in ln]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("class Envs")) + 1
    lines.insert(at, f"    {KNOB} = EnvInt({value})\n")
    environ.write_text("".join(lines))


@pytest.fixture
def patched(tmp_path, ledger):
    """A workspace on sglang 0.5.23 whose engine repo has a local commit moving KNOB."""
    repo = tmp_path / "sglang"
    shutil.copytree(FIXTURE, repo / "python")
    (repo / "python" / "sglang" / "version.py").write_text('__version__ = "0.5.23"\n')
    set_default(repo, 128)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "sglang v0.5.23")
    (repo / "README.md").write_text("our fork\n")  # a commit that moves no default
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "readme")
    set_default(repo, 256)
    git(repo, "commit", "-qam", "deepep: a larger dispatch buffer for our decode nodes")
    mover = git(repo, "rev-parse", "HEAD")
    (repo / "NOTES").write_text("later\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notes")
    root = tmp_path / "ws"
    r = ledger("init", root, "--engine-repo", repo, "--root", f"tmp={tmp_path}")
    assert r.exit_code == 0, r.stderr
    config = root / "ledger.yaml"
    config.write_text(config.read_text() + "engine: sglang==0.5.23\n")
    git(root, "commit", "-qam", "engine")
    return root, repo, mover


def test_status_and_diff_show_the_checkouts_default_and_the_commit_that_set_it(patched, ledger):
    root, repo, mover = patched
    head = git(repo, "rev-parse", "HEAD")
    want = (f"{KNOB}: default 256 in engine commit {head[:12]}, 128 in sglang 0.5.23 "
            f"(set by {mover[:12]} \"deepep: a larger dispatch buffer for our decode nodes\", "
            "not recorded in the ledger)")
    r = ledger("-C", root, "status")
    assert r.exit_code == 0, r.stderr
    assert "engine defaults (the engine repo's checkout, not its release):" in r.stdout
    assert want in r.stdout
    moved = ledger("-C", root, "status", "--json").json()["engine_defaults"]
    assert [(d["knob"], d["default"], d["release_default"], d["mover"]) for d in moved] == [
        (KNOB, 256, 128, mover)]
    r = ledger("-C", root, "diff")
    assert r.exit_code == 0 and want in r.stdout


def test_the_checkout_is_read_once_per_commit(patched, ledger):
    root, repo, _ = patched
    for p in cache.cached_files():  # the same commits read by an earlier test stay cached
        if p.parent.name == "engine-defaults":
            p.unlink()
    before = {p.name for p in cache.cached_files() if p.parent.name == "engine-defaults"}
    assert ledger("-C", root, "status").exit_code == 0
    after = {p.name for p in cache.cached_files() if p.parent.name == "engine-defaults"}
    assert len(after - before) >= 2  # HEAD and the commits walked to find the one that set it
    assert ledger("-C", root, "status").exit_code == 0
    again = {p.name for p in cache.cached_files() if p.parent.name == "engine-defaults"}
    assert again == after


def test_doctor_reports_the_unrecorded_commit_until_a_patch_entry_records_it(patched, ledger):
    root, repo, mover = patched
    r = ledger("-C", root, "doctor", "--json")
    found = [f for f in r.json()["findings"] if f["check"] == "engine"]
    assert len(found) == 1, found
    assert mover[:12] in found[0]["problem"] and "not recorded" in found[0]["problem"]
    assert f"ledger record patch --commit {mover[:12]}" in found[0]["advice"]
    r = ledger("-C", root, "record", "patch", "--commit", mover, "--class", "perf",
               "--title", "deepep dispatch buffer 256")
    assert r.exit_code == 0, r.stderr
    r = ledger("-C", root, "doctor", "--json")
    assert not [f for f in r.json()["findings"] if f["check"] == "engine"]
    assert "(set by" in ledger("-C", root, "status").stdout  # still shown, now recorded
    assert ", recorded)" in ledger("-C", root, "status").stdout


def test_a_release_with_no_catalog_is_a_warning_naming_known_ones(patched, ledger):
    root, repo, _ = patched
    config = root / "ledger.yaml"
    config.write_text(config.read_text().replace("sglang==0.5.23", "sglang==0.5.21.post9"))
    git(root, "commit", "-qam", "engine 0.5.21.post9")
    r = ledger("-C", root, "status")
    assert r.exit_code == 0
    assert "no bundled catalog for sglang==0.5.21.post9" in r.stderr
    assert "nearest catalogued: 0.5.21, 0.5.22" in r.stderr
    assert "engine defaults" not in r.stdout


def test_a_bundled_engine_checkout_is_compared_with_the_release_its_scripts_pin(tmp_path,
                                                                                ledger):
    src = Path(__file__).resolve().parents[2] / "engine"
    repo = tmp_path / "engine-repo"
    (repo / "engine" / "tools").mkdir(parents=True)
    shutil.copy2(src / "knobs.py", repo / "engine" / "knobs.py")
    shutil.copy2(src / "tools" / "cli.py", repo / "engine" / "tools" / "cli.py")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "engine 1.0.0")
    knobs = repo / "engine" / "knobs.py"
    old = '"ENGINE_PAGE_SIZE", "int", 16,'
    assert old in knobs.read_text()
    knobs.write_text(knobs.read_text().replace(old, '"ENGINE_PAGE_SIZE", "int", 32,'))
    git(repo, "commit", "-qam", "pages of 32 tokens")
    mover = git(repo, "rev-parse", "HEAD")
    script = tmp_path / "serve_decode.sh"
    shutil.copy2(src / "scripts" / "serve_decode.sh", script)
    root = tmp_path / "ws"
    assert ledger("init", root, "--engine-repo", repo, "--root", f"t={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "decode", script, "--format", "bash"
                  ).exit_code == 0
    r = ledger("-C", root, "status")
    assert (f"ENGINE_PAGE_SIZE: default 32 in engine commit {mover[:12]}, 16 in "
            f"knob-ledger-engine 1.0.0 (set by {mover[:12]} \"pages of 32 tokens\", not "
            "recorded in the ledger)") in r.stdout
    assert "ENGINE_MAX_RUNNING_REQUESTS" not in r.stdout  # 1.1.0's moves are no patch
