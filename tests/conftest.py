"""Shared fixtures: a CliRunner-driven `ledger`, workspaces on tmp_path."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli

# The ledger's cache of parsed files (ledger.store.cache) goes to a directory of the test
# session's own, shared by its tests (and the commands they start), never ~/.cache.
if "LEDGER_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["LEDGER_CACHE_DIR"] = tempfile.mkdtemp(prefix="knob-ledger-test-cache-")

REPO_ROOT = Path(__file__).resolve().parents[1]

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
