"""Property: for any file names git can track (control characters aside: those are
refused by policy), the parser reads the paths git reads."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.patches.stack import parse_patch_files

from .helpers import git

component = st.text(alphabet='ab é"\\-_.λ', min_size=1, max_size=6).filter(
    lambda c: c not in (".", "..") and c.lower().rstrip(". ") != ".git"
)
paths = st.lists(component, min_size=1, max_size=3).map("/".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(paths, min_size=1, max_size=4, unique=True),
    renamed=st.booleans(),
)
def test_parser_agrees_with_git(names: list[str], renamed: bool) -> None:
    # No name may be a directory of another (git could not track both).
    if any(a != b and b.startswith(a + "/") for a in names for b in names):
        return
    with tempfile.TemporaryDirectory() as d:
        repo = Path(d)
        git(repo, "init", "-q")
        for k, name in enumerate(names):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text("".join(f"line {k} {i}\n" for i in range(12)))
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "base")
        first = repo / names[0]
        if renamed:
            git(repo, "mv", "--", names[0], names[0] + ".moved")
        else:
            first.write_text(first.read_text().replace("line 0 5\n", "changed\n"))
        for name in names[1:]:
            (repo / name).unlink()
        git(repo, "add", "-A")
        patch = git(repo, "diff", "--cached", "-M")
        expected = git(repo, "diff", "--cached", "-M", "--name-only", "-z").split("\0")
        if renamed:
            expected.append(names[0])
        assert parse_patch_files(patch) == sorted(p for p in set(expected) if p)
