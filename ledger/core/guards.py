"""Guard metrics: the few metrics whose regression decides a verdict whatever the primary
metric says (``bench: guards:`` in ledger.yaml).  Pure: values in, checked records out.

A guard is either a metric name (``p99_itl_ms``: judged with the run's tolerance, and
critical) or a mapping::

    bench:
      tolerance_pct: 2
      guards:
        - p99_itl_ms                      # critical, the run's ±2%
        - metric: p99_ttft_ms
          direction: lower                # optional; must agree with the name's
          max_change_pct: 10              # the change it may make unjudged
          critical: true                  # false: a regression is reported, not deciding

Decisions where the issue is silent:

* ``max_change_pct`` is the guard's own practical tolerance: the guard cell is judged by the
  same interval rule as every metric, against ±``max_change_pct`` instead of the run's.
* ``direction`` is checked against the metric's name (``*_ms`` lower is better,
  ``*throughput*`` higher): a contradiction is a typo that would invert the guard, so it is
  refused, never silently believed.
* A non-critical guard that regresses is written into the summary's warnings and the
  headline names it, but it neither vetoes a gain nor makes a bake roll back.
The same guards judge every verdict: ``ledger ab``, imported runs, observed evidence
(``evidence prom``) and a bake after ``--restart``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.errors import InvalidValue

DIRECTIONS = ("higher", "lower")
KEYS = ("metric", "direction", "max_change_pct", "critical")


def name_direction(name: str) -> str | None:
    """``lower`` for a latency (``*_ms``), ``higher`` for a rate (``*throughput*``,
    ``*goodput*``, ``*_per_s``), None when not judged (every verdict's rule:
    :func:`ledger.evidence.stats.metric_direction` asks here)."""
    if name.endswith("_ms"):
        return "lower"
    if "throughput" in name or "goodput" in name or name.endswith("_per_s"):
        return "higher"
    return None


@dataclass(frozen=True)
class Guard:
    """One guard metric: its name, its own tolerance (None: the run's), critical or not."""

    metric: str
    max_change_pct: float | None = None
    critical: bool = True
    direction: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or name_direction(self.metric) is None:
            raise InvalidValue(f"guard {self.metric!r}: a guard metric is a rate "
                               "(…throughput, …_per_s) or a latency (…_ms)")
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise InvalidValue(f"guard {self.metric}: direction {self.direction!r}: "
                               "higher or lower")
        if self.direction is not None and self.direction != name_direction(self.metric):
            raise InvalidValue(f"guard {self.metric}: direction {self.direction} contradicts "
                               f"the metric's name ({name_direction(self.metric)} is better)")
        pct = self.max_change_pct
        if pct is not None and (isinstance(pct, bool) or not isinstance(pct, (int, float))
                                or not 0 < pct < 100):
            raise InvalidValue(f"guard {self.metric}: max_change_pct {pct!r}: a number of "
                               "percent between 0 and 100")
        if not isinstance(self.critical, bool):
            raise InvalidValue(f"guard {self.metric}: critical must be true or false")

    @property
    def plain(self) -> bool:
        """Said as its bare name in ledger.yaml (critical, the run's tolerance)."""
        return self.max_change_pct is None and self.critical and self.direction is None

    def to_config(self) -> str | dict[str, Any]:
        if self.plain:
            return self.metric
        out: dict[str, Any] = {"metric": self.metric}
        if self.direction is not None:
            out["direction"] = self.direction
        if self.max_change_pct is not None:
            out["max_change_pct"] = self.max_change_pct
        out["critical"] = self.critical
        return out


def as_guard(item: Any) -> Guard:
    """A guard from ledger.yaml's item (a name or a mapping) or a Guard; InvalidValue
    naming what is wrong."""
    if isinstance(item, Guard):
        return item
    if isinstance(item, str):
        return Guard(item)
    if isinstance(item, dict):
        unknown = sorted(set(map(str, item)) - set(KEYS))
        if unknown or "metric" not in item:
            raise InvalidValue(f"guard {dict(item)!r}: keys are {', '.join(KEYS)} "
                               "(metric required)")
        return Guard(item["metric"], item.get("max_change_pct"), item.get("critical", True),
                     item.get("direction"))
    raise InvalidValue(f"guard {item!r}: a metric name or a mapping with metric")


def guard_names(guards: Any) -> list[str]:
    """The metric names of ``guards`` (names or Guards), in order."""
    return [as_guard(g).metric for g in guards]


__all__ = ["DIRECTIONS", "Guard", "as_guard", "guard_names", "name_direction"]
