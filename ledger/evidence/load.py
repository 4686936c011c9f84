"""Load points: the concurrency or the request rate a bench result was measured at.

A closed-loop bench (``--max-concurrency 64``) has a *concurrency*; an open-loop sweep
(``--request-rate 4``, or ``inf``: every request at once) has a *rate*.  A result's load
point is its ``max_concurrency`` when set, else its ``request_rate``.  Evidence keeps them
apart: a concurrency of 4 and a rate of 4 req/s are different experiments.

Rows carry the load point as ``concurrency`` (an int) or ``rate`` (a float, ``inf``
allowed), never both.  Labels: ``c64`` and ``rate 4`` (``rate 2.5``, ``rate inf``), as in
the headline ``+8.1% output tok/s @rate 4``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from typing import Mapping

CONCURRENCY = "concurrency"
RATE = "rate"
KINDS = (CONCURRENCY, RATE)
AXIS_TITLES = {CONCURRENCY: "concurrency", RATE: "request rate (req/s)"}


def format_rate(value: float) -> str:
    """``4`` for 4.0, ``2.5``, ``inf``: the shortest text that reads back the same."""
    if math.isinf(value):
        return "inf"
    return str(int(value)) if value == int(value) else repr(value)


def parse_rate(text: Any) -> float | None:
    """A request rate from a number or text (``4``, ``2.5``, ``inf``, ``Infinity``), or None."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        value = float(text)
    elif isinstance(text, str):
        try:
            value = float(text.strip())
        except ValueError:
            return None
    else:
        return None
    if math.isnan(value) or value <= 0:
        return None
    return value


@dataclass(frozen=True, order=True)
class LoadPoint:
    """One load point: ``kind`` (concurrency or rate) and its ``value``."""

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown load kind {self.kind!r}")

    @property
    def label(self) -> str:
        """``c64`` or ``rate 4``."""
        if self.kind == CONCURRENCY:
            return f"c{int(self.value)}"
        return f"rate {format_rate(self.value)}"

    @property
    def row_value(self) -> int | float:
        return int(self.value) if self.kind == CONCURRENCY else float(self.value)

    def to_row(self) -> dict[str, int | float]:
        return {self.kind: self.row_value}


def of_row(row: Mapping[str, Any]) -> LoadPoint:
    """The load point a run row (or a summary block) carries."""
    conc, rate = row.get(CONCURRENCY), row.get(RATE)
    if conc is not None and conc != "":
        return LoadPoint(CONCURRENCY, float(int(conc)))
    value = parse_rate(rate)
    if value is None:
        raise ValueError(f"no load point in {dict(row)!r}")
    return LoadPoint(RATE, value)


def sort_key(point: LoadPoint) -> tuple[int, float]:
    return (KINDS.index(point.kind), point.value)


__all__ = [
    "AXIS_TITLES",
    "CONCURRENCY",
    "KINDS",
    "RATE",
    "LoadPoint",
    "format_rate",
    "of_row",
    "parse_rate",
    "sort_key",
]
