"""Knobs and engine patches together (issue 4's "Done when"), on a git copy of the engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.commands.demo import prepare

REPO = Path(__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def tree(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD^{tree}").strip()


@pytest.fixture
def demo(tmp_path, ledger):
    d = prepare(tmp_path / "demo")
    a = ["-C", str(d.workspace)]
    script = d.root / "deploy" / "serve_decode.sh"
    assert ledger(*a, "target", "add", "decode", script, "--format", "bash").exit_code == 0
    return d, a, script


def record_all(ledger, d, a) -> dict[str, str]:
    ids = {}
    for name, args in {
        "perf_knob": ("record", "knob", "decode", "ENGINE_DECODE_TARGET_CTAS=64", "--class",
                      "perf", "--title", "ctas 64"),
        "perf_patch": ("record", "patch", d.root / "patches" / "perf.patch", "--class", "perf",
                       "--title", "longer split-K partitions"),
        "fix_knob": ("record", "knob", "decode", "ENGINE_INFLIGHT_TIMEOUT_S=10", "--class",
                     "bugfix", "--title", "timeout 10"),
        "fix_patch": ("record", "patch", d.root / "patches" / "bugfix.patch", "--class",
                      "bugfix", "--title", "refuse non-boolean ignore_eos"),
    }.items():
        r = ledger(*a, *args, "--json")
        assert r.exit_code == 0, r.stderr
        ids[name] = r.json()["id"]
    return ids


def test_revert_and_restore_perf_across_knobs_and_patches(demo, ledger):
    d, a, script = demo
    repo = d.root / "engine-repo"
    base_tree = tree(repo)
    ids = record_all(ledger, d, a)
    full_script, full_tree = script.read_bytes(), tree(repo)
    attention = (repo / "engine" / "model" / "attention_ops.py").read_text()
    assert "MIN_SPLIT_TOKENS = 64" in attention

    r = ledger(*a, "revert", "--perf-only", "--why", "incident: harness hangs")
    assert r.exit_code == 0, r.stderr
    text = script.read_text()
    assert "export ENGINE_DECODE_TARGET_CTAS=16" in text  # perf knob back at its base
    assert "export ENGINE_INFLIGHT_TIMEOUT_S=10" in text  # bugfix knob untouched
    assert "MIN_SPLIT_TOKENS = 16" in (repo / "engine" / "model" / "attention_ops.py").read_text()
    assert "must be true or false" in (repo / "engine" / "serving" / "requests.py").read_text()
    assert not git(repo, "status", "--porcelain")
    st = ledger(*a, "status", "--json").json()
    assert st["clean"] and all(row["ok"] for row in st["entries"])
    backed_up = {f["path"] for f in ledger(*a, "backups", "list", "--json").json()[-1]["files"]}
    assert backed_up == {str(script), str(repo / "engine" / "model" / "attention_ops.py")}

    r = ledger(*a, "diff", "--files")
    assert "longer split-K partitions" in r.stdout and "ctas 64" in r.stdout
    assert "+MIN_SPLIT_TOKENS = 64" in r.stdout and "+export ENGINE_DECODE_TARGET_CTAS=64" in r.stdout

    r = ledger(*a, "restore", "--perf-only")
    assert r.exit_code == 0, r.stderr
    assert script.read_bytes() == full_script
    assert tree(repo) == full_tree != base_tree
    log = git(repo, "log", "--format=%s%n%b")
    for name in ("perf_patch", "fix_patch"):
        assert f"Ledger-Entry: {ids[name]}" in log
    assert log.count("Ledger-Action: revert") == 1 and log.count("Ledger-Action: restore") == 1


@pytest.mark.slow
def test_engine_tests_pass_on_the_reverted_and_restored_copy(demo, ledger):
    d, a, _ = demo
    repo = d.root / "engine-repo"
    record_all(ledger, d, a)
    tests = [str(REPO / "tests" / "engine" / "test_engine_attention.py")]
    env = {**os.environ, "PYTHONPATH": str(repo)}

    def engine_tests() -> None:
        # -n 0: this handful of tests in the one process (the ini's addopts start workers)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                            "no:cacheprovider", "--rootdir", str(repo), *tests], cwd=repo, env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-3000:]
        probe = subprocess.run([sys.executable, "-c", "import engine, sys; print(engine.__file__)"],
                               cwd=repo, env=env, capture_output=True, text=True, check=True)
        assert probe.stdout.startswith(str(repo))

    assert ledger(*a, "revert", "--perf-only").exit_code == 0
    engine_tests()
    assert ledger(*a, "restore", "--perf-only").exit_code == 0
    engine_tests()


def test_conflicting_patch_is_refused_and_knob_files_stay(demo, ledger, tmp_path):
    d, a, script = demo
    repo = d.root / "engine-repo"
    ids = record_all(ledger, d, a)
    # A bugfix that edits the very line the perf patch changed: the perf patch can no
    # longer be taken out without taking this one too.
    source = repo / "engine" / "model" / "attention_ops.py"
    original = source.read_text()
    source.write_text(original.replace("MIN_SPLIT_TOKENS = 64", "MIN_SPLIT_TOKENS = 64  # clamp"))
    fix = tmp_path / "dep.patch"
    fix.write_text(git(repo, "diff"))
    source.write_text(original)
    r = ledger(*a, "record", "patch", fix, "--class", "bugfix", "--title", "clamp", "--json")
    assert r.exit_code == 0, r.stderr
    dep = r.json()["id"]
    before = (script.read_bytes(), tree(repo), (d.workspace / "entries.jsonl").read_bytes())
    r = ledger(*a, "revert", "--perf-only")
    assert r.exit_code == 1
    assert ids["perf_patch"] in r.stderr and dep in r.stderr
    assert (script.read_bytes(), tree(repo), (d.workspace / "entries.jsonl").read_bytes()) == before


def test_dirty_engine_repo_is_refused_with_files_named(demo, ledger):
    d, a, script = demo
    repo = d.root / "engine-repo"
    record_all(ledger, d, a)
    target = repo / "engine" / "serving" / "requests.py"
    target.write_text(target.read_text() + "# local hack\n")
    before = script.read_bytes()
    r = ledger(*a, "revert", "--perf-only")
    assert r.exit_code == 1 and "engine/serving/requests.py" in r.stderr
    assert script.read_bytes() == before
    assert target.read_text().endswith("# local hack\n")


def test_tampered_patch_is_reported_and_refused(demo, ledger):
    d, a, _ = demo
    ids = record_all(ledger, d, a)
    stored = d.workspace / "patches" / f"{ids['perf_patch']}.patch"
    stored.write_text(stored.read_text().replace("64", "65"))
    r = ledger(*a, "status")
    assert ids["perf_patch"] in r.stderr and "sha256" in r.stderr
    r = ledger(*a, "revert", "--perf-only")
    assert r.exit_code == 1 and ids["perf_patch"] in r.stderr and "sha256" in r.stderr
