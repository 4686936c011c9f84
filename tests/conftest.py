"""Shared fixtures: a CliRunner-driven `ledger`, workspaces on tmp_path."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import hypothesis
import pytest
from click.testing import CliRunner

from ledger.cli import cli

LONG_FACTOR = 10

# A suite started in the background by a non-interactive shell (`cmd &`, some CI runners)
# inherits SIGINT ignored, and so would every `ledger` the tests start: the Ctrl-C tests
# would see a command that cannot be interrupted.  Each process of the suite (the xdist
# workers too) puts Python's own handler back; its children then start with the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The ledger's cache of parsed files (ledger.store.cache) goes to a directory of the test
# session's own, shared by its tests (and the commands they start), never ~/.cache.
if "LEDGER_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["LEDGER_CACHE_DIR"] = tempfile.mkdtemp(prefix="knob-ledger-test-cache-")

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, before any worker starts
        compile_project()
    # pytest keeps each test module's rewritten asserts as bytecode unless the interpreter
    # writes none (PYTHONDONTWRITEBYTECODE, set on the CI machines): then every worker of
    # every run rewrites all ~300 test modules again (~4 s of CPU each, measured).
    sys.dont_write_bytecode = False


def compile_project() -> None:
    """The project's bytecode, compiled once before the workers start.

    Where PYTHONDONTWRITEBYTECODE is set (the CI machines set it), nothing writes a
    ``.pyc``, so each of the suite's processes -- four workers, and the hundreds of
    ``ledger`` and engine processes the tests start -- compiled every project module it
    imports from source again (~0.1 s of CPU per ``ledger`` command, measured).
    compileall writes them explicitly (into the ignored ``__pycache__`` folders); every
    interpreter reads them, the variable only stops the writing."""
    import compileall

    for package in ("ledger", "engine", "envknobs", "backups"):
        compileall.compile_dir(REPO_ROOT / package, quiet=1, workers=os.cpu_count() or 1)


# Property tests (hypothesis).  A test's own ``@settings(max_examples=N)`` is its everyday
# count, chosen so the whole suite runs in minutes; a test without one runs the profile's
# default.  For a long run (before a release, after touching a parser or the planner):
#     KNOB_LEDGER_HYPOTHESIS=long .venv/bin/python -m pytest -q tests/envknobs tests/core
# multiplies every count by LONG_FACTOR (see pytest_collection_modifyitems below).
hypothesis.settings.register_profile("knob-ledger", max_examples=100, deadline=None)
hypothesis.settings.register_profile("long", max_examples=100 * LONG_FACTOR, deadline=None)
PROFILE = os.environ.get("KNOB_LEDGER_HYPOTHESIS") or "knob-ledger"
hypothesis.settings.load_profile(PROFILE)

SERVE_DECODE = """\
#!/usr/bin/env bash
# Decode server of the PD pair.  Tuned 2026-11; see the ledger for why.
set -euo pipefail

export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
export SGLANG_SM120_MMA_TARGET_CTAS=256   # wave quantisation at c64: see ledger

MODEL="${MODEL:-/models/glm}"
exec python -m sglang.launch_server --model-path "$MODEL" \\
    --disaggregation-mode decode --port 30001
"""


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


@pytest.fixture
def ledger():
    """Run `ledger ARGS...` in-process; returns exit code, stdout and stderr."""
    runner = CliRunner()

    def run(*args: str, env: dict | None = None) -> Result:
        r = runner.invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)
        return Result(r.exit_code, r.stdout, r.stderr)

    return run


@dataclass
class Setup:
    root: Path
    script: Path

    def args(self, *a: str) -> list[str]:
        return ["-C", str(self.root), *a]


@pytest.fixture
def story(tmp_path, ledger) -> Setup:
    """A workspace managing a decode serve script (bash)."""
    script = tmp_path / "serve_decode.sh"
    script.write_text(SERVE_DECODE)
    script.chmod(0o755)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    r = ledger("-C", root, "target", "add", "decode", script, "--format", "bash")
    assert r.exit_code == 0, r.stderr
    return Setup(root, script)


@pytest.fixture
def git_log():
    """Subjects of a repository's commits, newest first."""
    return _git_log


def _git_log(path: Path) -> list[str]:
    import subprocess

    out = subprocess.run(["git", "-C", str(path), "log", "--format=%s"], check=True,
                         capture_output=True, text=True, env={**os.environ, "GIT_PAGER": "cat"})
    return out.stdout.splitlines()


def pytest_collection_modifyitems(items):
    """Modules with a ``slow`` test run first, the longest first; under the ``long``
    hypothesis profile every property test runs LONG_FACTOR times its own example count.

    Slow first, the longest first (``slow(minutes=N)``: the module's measured wall time on
    the 2-core CI machine, 1 unsaid), in every worker alike, as xdist requires.  Under the
    suite's ``-n 4 --dist loadscope`` xdist (3.8) would rank the modules by their number of
    tests instead; ``--no-loadscope-reorder`` (pyproject.toml) keeps this order, so the
    four slowest modules start at once and no long module runs alone at the end.  The
    real-Prometheus module (5 tests, ~3.5 min of windows) ranked by xdist started ~6 min
    in and ran its last minutes alone, one core idle; started first, beside the kernel
    builds, the demo and the engine bisects, its harmless change once read ``inconclusive
    +26.8%``, until its engine, load and Prometheus got a higher priority than the suite
    (tests/live/test_prom_observed.py: PRIORITY).

    An explicit ``@settings(max_examples=N)`` overrides a profile, so the profile alone
    would only reach the tests that set none: the counts are scaled here, once per test
    function (the items of a parametrized test share one: scaled once per item, a test
    of 25 parameters asked for 25 x 10^25 examples and never finished)."""
    minutes: dict[str, float] = {}
    for item in items:
        for mark in item.iter_markers("slow"):
            module = _module_of(item)
            minutes[module] = max(minutes.get(module, 0.0), mark.kwargs.get("minutes", 1.0))
    items.sort(key=lambda i: -minutes.get(_module_of(i), 0.0))  # stable: the order within stays
    if PROFILE != "long":
        return
    scaled: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        if id(test) in scaled:
            continue
        scaled.add(id(test))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if (getattr(test, "is_hypothesis_test", False) and own is not None
                and own.max_examples != hypothesis.settings.default.max_examples):
            test._hypothesis_internal_use_settings = hypothesis.settings(
                own, max_examples=own.max_examples * LONG_FACTOR)


def _module_of(item) -> str:
    return item.nodeid.partition("::")[0]
