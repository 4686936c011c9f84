"""Helpers for the patch-stack tests: a generated engine repo and its patch stack.

The stack (record order): P1 perf on a.py, B2 bugfix on b.py, P3 perf on c.py, and B4
bugfix on c.py that rewrites a line P3 changed (so B4 depends on P3).  Patches are made
by real git in a scratch repo; every test gets its own copy of the base repo.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(repo: Path, *args: str, input: str | None = None) -> str:
    """Run git as a test would by hand (not through the code under test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV)
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        check=False,
        input=input,
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {args}: {proc.stderr}")
    return proc.stdout


def numbered(prefix: str, n: int = 20) -> str:
    return "".join(f"{prefix}_{k} = {k}\n" for k in range(n))


BASE = {"a.py": numbered("a"), "b.py": numbered("b"), "c.py": numbered("c"), "README": "engine\n"}


def edit(text: str, old: str, new: str) -> str:
    if old not in text:
        raise ValueError(old)
    return text.replace(old, new, 1)


@dataclass(frozen=True)
class Stack:
    base: Path  # a repo with the base commit only (copy it, do not change it)
    names: tuple[str, ...]
    ids: tuple[str, ...]
    classes: tuple[str, ...]
    texts: tuple[str, ...]
    base_files: dict


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)


def make_base_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write_files(root, BASE)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def tree_files(root: Path) -> dict[str, str]:
    """Every file under root (outside .git) with its content; symlinks as '-> target'."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            p = Path(dirpath) / f
            rel = p.relative_to(root).as_posix()
            if rel == ".git":  # a linked worktree's pointer file
                continue
            out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else p.read_text()
    return out
