"""Load points: labels, parsing, and reading them back from rows."""

from __future__ import annotations

import math

import pytest

from ledger.evidence.load import LoadPoint
from ledger.evidence.load import format_rate
from ledger.evidence.load import of_row
from ledger.evidence.load import parse_rate
from ledger.evidence.load import sort_key


@pytest.mark.parametrize(
    "text, value",
    [(4, 4.0), ("2.5", 2.5), ("inf", math.inf), ("Infinity", math.inf), (math.inf, math.inf)],
)
def test_rates_parse(text, value) -> None:
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", [0, -1, "nan", "trace", None, True, [1]])
def test_non_rates_do_not(text) -> None:
    assert parse_rate(text) is None


def test_labels_and_rows() -> None:
    assert LoadPoint("concurrency", 64.0).label == "c64"
    assert LoadPoint("rate", 4.0).label == "rate 4"
    assert LoadPoint("rate", 2.5).label == "rate 2.5"
    assert LoadPoint("rate", math.inf).label == "rate inf"
    assert format_rate(0.1) == "0.1"
    assert of_row({"concurrency": 16}) == LoadPoint("concurrency", 16.0)
    assert of_row({"rate": "inf"}) == LoadPoint("rate", math.inf)
    assert of_row({"concurrency": "", "rate": "2.0"}) == LoadPoint("rate", 2.0)
    with pytest.raises(ValueError):
        of_row({"x": 1})
    points = [LoadPoint("rate", math.inf), LoadPoint("rate", 1.0), LoadPoint("concurrency", 8.0)]
    assert [p.label for p in sorted(points, key=sort_key)] == ["c8", "rate 1", "rate inf"]
