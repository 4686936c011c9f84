"""Knobs the ledger removes come back where they were, whatever the command order."""

from __future__ import annotations

import itertools

import pytest

SCRIPT = """\
#!/usr/bin/env bash
# header

export A=1
export B=2

export C=3
exec python -m engine serve
"""

DOTENV = """\
# engine env
A=1
B=2

C=3
"""


@pytest.mark.parametrize("fmt,text,name", [("bash", SCRIPT, "s.sh"), ("dotenv", DOTENV, "e.env")])
def test_removed_knobs_return_in_place_in_any_order(tmp_path, ledger, fmt, text, name):
    path = tmp_path / name
    path.write_text(text)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "t", path, "--format", fmt).exit_code == 0
    ids = []
    for knob in "ABC":
        r = ledger("-C", root, "record", "knob", "t", knob, "--unset", "--class", "perf",
                   "--title", f"drop {knob}", "--no-validate", "--json")
        assert r.exit_code == 0, r.stderr
        ids.append(r.json()["id"])
    assert path.read_text().count("=") == 0
    results = set()
    for order in itertools.permutations(ids):
        for entry_id in order:  # put the knobs back one by one, in this order
            assert ledger("-C", root, "revert", entry_id).exit_code == 0
        results.add(path.read_text())
        assert ledger("-C", root, "restore", *order).exit_code == 0
    assert results == {text}


def test_added_knobs_any_subset_any_order_one_content(tmp_path, ledger):
    path = tmp_path / "serve.sh"
    path.write_text(SCRIPT)
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    ledger("-C", root, "target", "add", "t", path, "--format", "bash")
    ids = []
    for knob, value in [("NEW_ONE", "1"), ("A", "10"), ("NEW_TWO", "2"), ("NEW_ONE", "3")]:
        r = ledger("-C", root, "record", "knob", "t", f"{knob}={value}", "--class", "perf",
                   "--title", f"{knob} {value}", "--no-validate", "--json")
        assert r.exit_code == 0, r.stderr
        ids.append(r.json()["id"])
    full = path.read_text()
    seen: dict[frozenset, str] = {}
    for order in list(itertools.permutations(ids))[::5]:  # 5 of the 24 orders: enough to disagree
        for i, entry_id in enumerate(order):
            assert ledger("-C", root, "revert", entry_id).exit_code == 0
            applied = frozenset(order[i + 1:])
            seen.setdefault(applied, path.read_text())
            assert path.read_text() == seen[applied], f"applied {sorted(applied)}"
        assert path.read_text() == SCRIPT
        for entry_id in reversed(order):
            assert ledger("-C", root, "restore", entry_id).exit_code == 0
        assert path.read_text() == full


@pytest.mark.parametrize("fmt_name,text", [("bash", SCRIPT), ("dotenv", DOTENV)])
def test_knobs_claiming_one_place_stand_in_record_order_whichever_comes_back_first(
        fmt_name, text):
    """X and Y were recorded on two clones, each right below ``C`` (their anchors are the
    same lines): put back in either order, X (recorded first) stands above Y; and Z, recorded
    after Y right below it, stays with Y (issue 30: clones that diverged)."""
    from envknobs.formats import get_format
    from ledger.core.layout import add_knob
    from ledger.core.layout import anchor_for

    fmt = get_format(fmt_name)
    with_x = fmt.set(text, "X", "8")
    below_c = anchor_for(fmt, with_x, "X", fmt.parse(with_x), {})
    managed = {"X": below_c, "Y": below_c, "Z": {"knob": "Y"}}
    layouts = set()
    for order in itertools.permutations("XYZ"):
        out = text
        for knob in order:
            out = add_knob(fmt, out, knob, "1", managed)
        layouts.add(out)
    assert len(layouts) == 1
    lines = layouts.pop().splitlines()
    names = [line.split("=")[0].removeprefix("export ") for line in lines if "=" in line]
    assert names == ["A", "B", "C", "X", "Y", "Z"], lines
