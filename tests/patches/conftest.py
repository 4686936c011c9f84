"""Fixtures for the patch-stack tests (the stack is described in helpers.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .helpers import BASE
from .helpers import Stack
from .helpers import edit
from .helpers import git
from .helpers import make_base_repo


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    top = tmp_path_factory.mktemp("stack")
    base = make_base_repo(top / "base")
    scratch = top / "scratch"
    shutil.copytree(base, scratch)
    steps = [
        ("a.py", "a_5 = 5\n", "a_5 = 500  # perf P1\n"),
        ("b.py", "b_7 = 7\n", "b_7 = 7  # bugfix B2\n"),
        ("c.py", "c_10 = 10\nc_11 = 11\n", "c_10 = 1000  # perf P3\nc_11 = 1100\n"),
        ("c.py", "c_10 = 1000  # perf P3\n", "c_10 = 1000  # perf P3, bugfix B4\n"),
    ]
    texts = []
    for name, old, new in steps:
        p = scratch / name
        p.write_text(edit(p.read_text(), old, new))
        texts.append(git(scratch, "diff"))
        git(scratch, "commit", "-q", "-am", name)
    return Stack(
        base=base,
        names=("P1", "B2", "P3", "B4"),
        ids=("e0001", "e0002", "e0003", "e0004"),
        classes=("perf", "bugfix", "perf", "bugfix"),
        texts=tuple(texts),
        base_files=dict(BASE),
    )


@pytest.fixture()
def repo(tmp_path: Path, stack: Stack) -> Path:
    """A fresh copy of the base engine repo."""
    dest = tmp_path / "engine"
    shutil.copytree(stack.base, dest, symlinks=True)
    return dest
