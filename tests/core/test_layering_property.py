"""Any sequence of commands reaching the same applied set leaves the same file
(docs/ARCHITECTURE.md §2)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.cli import cli

SCRIPT = """\
#!/usr/bin/env bash
# serve
export A=1
export B=2

export C=3
exec python -m engine serve
"""

# (knob, value or None for --unset): a stack on A, new knobs, removals, a re-add.
CHANGES = [("A", "10"), ("B", None), ("NEW", "x"), ("A", "11"), ("C", None), ("NEW2", "y"),
           ("B", "20")]


def run(runner, *args):
    r = runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return r


@pytest.mark.slow
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["revert", "restore"]),
                          st.integers(0, len(CHANGES) - 1)), min_size=1, max_size=14))
def test_file_is_a_function_of_the_applied_set(ops):
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        script = tmp / "serve.sh"
        script.write_text(SCRIPT)
        root = tmp / "ws"
        run(runner, "init", root, "--root", f"tmp={tmp}")
        run(runner, "-C", root, "target", "add", "t", script, "--format", "bash")
        ids = []
        for knob, value in CHANGES:
            args = [knob, "--unset"] if value is None else [f"{knob}={value}"]
            r = run(runner, "-C", root, "record", "knob", "t", *args, "--class", "perf",
                    "--title", f"{knob} {value}", "--no-validate", "--json")
            ids.append(json.loads(r.stdout)["id"])
        seen = {frozenset(ids): script.read_text()}
        applied = set(ids)
        for op, i in ops:
            run(runner, "-C", root, op, ids[i])
            (applied.discard if op == "revert" else applied.add)(ids[i])
            key = frozenset(applied)
            text = script.read_text()
            assert seen.setdefault(key, text) == text, (ops, sorted(applied))
        # and everything back: the file is what it was with every entry applied
        run(runner, "-C", root, "restore", *ids)
        assert script.read_text() == seen[frozenset(ids)]
