"""Notes carry their numbers (issue 52): a markdown A/B table read for showing, never judged."""

from __future__ import annotations

from ledger.evidence.notes import note_line
from ledger.evidence.notes import note_numbers
from ledger.evidence.notes import notes_headline
from tests.cli.after_the_incident import NOTE

LETTERED = """# SGLANG_SM120_MMA_TARGET_CTAS

| conc | A (256) | B (512) |
|---:|---:|---:|
| c64 | 1,843.2 tok/s | 2,079.1 tok/s |
| c96 | 2,210.0 | 2,336.0 |
"""


def test_a_table_with_value_named_columns_and_its_own_delta():
    rows = note_numbers(NOTE)
    assert [(r["load"], r["a"], r["b"], r["delta_pct"]) for r in rows] == [
        (64, 1000.0, 1128.0, 12.8), (96, 1100.0, 1163.0, 5.7)]
    assert notes_headline([{"text": NOTE}]) == \
        "note: +12.8% @c64, +5.7% @c96 (not measured by the ledger)"


def test_a_lettered_table_without_a_delta_column_is_computed_from_a_and_b():
    rows = note_numbers(LETTERED)
    assert [r["load"] for r in rows] == [64, 96]
    assert round(rows[0]["delta_pct"], 1) == 12.8 and round(rows[1]["delta_pct"], 1) == 5.7
    line = note_line({"file": "plan.md", "title": "plan", "text": LETTERED})
    assert line == "plan.md (plan) — +12.8% @c64, +5.7% @c96"


def test_a_note_without_a_table_says_no_numbers():
    assert note_numbers("just prose\n| a | b |\n|---|---|\n| 1 | 2 |\n") == []
    assert notes_headline([{"link": "https://example.com"}, {"text": "prose"}]) is None
