"""Helpers for the crash and hostile-input tests: the real CLI in a subprocess, and
pictures of everything a command may change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT


def run_cli(root: Path, *args, env: dict | None = None, timeout: float = 120,
            ) -> subprocess.CompletedProcess:
    """``python -m ledger.cli -C root ARGS`` (bytes allowed in ARGS); text output."""
    argv = [sys.executable, "-m", "ledger.cli", "-C", str(root),
            *[a if isinstance(a, bytes) else str(a) for a in args]]
    return subprocess.run(argv, capture_output=True, env={**os.environ, **(env or {})},
                          cwd=REPO_ROOT, timeout=timeout, text=True, errors="replace")


def start_cli(root: Path, *args, env: dict | None = None) -> subprocess.Popen:
    """The CLI started in its own process group (so a kill takes its git children too)."""
    argv = [sys.executable, "-m", "ledger.cli", "-C", str(root), *[str(a) for a in args]]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, cwd=REPO_ROOT,
                            start_new_session=True)


def tree(*roots: Path, skip=(".git",)) -> dict[str, bytes]:
    """path -> bytes of every file under ``roots`` (a file root is taken as itself)."""
    out = {}
    for root in roots:
        if root.is_file():
            out[str(root)] = root.read_bytes()
            continue
        for base, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in skip]
            for name in files:
                p = Path(base) / name
                if not p.is_symlink():
                    out[str(p)] = p.read_bytes()
    return out


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def git_status(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def git_locks(repo: Path) -> list[str]:
    found = []
    for base, _, files in os.walk(repo / ".git"):
        found += [os.path.join(base, f) for f in files if f.endswith(".lock")]
    return found


def ledger_temps(*dirs: Path) -> list[str]:
    """Every temporary file the ledger (or an older version of it) may leave."""
    found = []
    for d in dirs:
        for base, subdirs, files in os.walk(d):
            subdirs[:] = [s for s in subdirs if s != ".git"]
            found += [os.path.join(base, f) for f in files
                      if f.startswith(".ledger-tmp-") or f.endswith(".tmp")]
    return found


def assert_refused(r: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 1, ``error:`` on stderr naming each fragment, and no traceback."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "error:" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    for f in fragments:
        assert f in r.stderr, (f, r.stderr)


CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"


def with_ctas_512(story, ledger):
    """The story workspace with one perf entry recorded (CTAS 256 -> 512)."""
    r = ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                           "--title", "ctas"))
    assert r.exit_code == 0, r.stderr
    return story
