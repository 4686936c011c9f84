"""Real dates: when a change was actually made, as opposed to when the ledger learned of it.

An operator bringing in history they already have (a hand revert two days ago, a commit
of last week) gives ``--when TIME``.  The ledger keeps both times: every history action
has ``at`` (when the ledger recorded it: the workspace commit's time) and, where given,
``when`` (when it really happened).  History, ``ledger log`` and the rendered docs order
by :func:`effective` — ``when`` where known, else ``at``.  Pure: the caller passes "now".

Decisions (docs/ARCHITECTURE.md is silent on them):

* A time without a UTC offset is taken as UTC (deterministic on every machine; write
  ``+01:00`` for another zone).  A date alone is its midnight.
* A time in the future is refused: history cannot be recorded ahead of the clock.
* Stored as the ledger stamps history, ``YYYY-MM-DDTHH:MM:SSZ``, so text order is time
  order.
"""

from __future__ import annotations

import re
from datetime import datetime
from datetime import timezone

from ledger.errors import InvalidValue

# "20261202-1414" / "20261202T141405" / "20261202": how backup copies are often dated.
_COMPACT = re.compile(r"(\d{4})(\d{2})(\d{2})(?:[-T_]?(\d{2})(\d{2})(\d{2})?)?\Z")


def stamp(moment: datetime) -> str:
    """``moment`` in the ledger's format (UTC, seconds)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 time (``2026-12-02``, ``2026-12-02 14:14``, ``...T14:14:05+01:00``,
    ``...Z``) or a compact one (``20261202-1414``) as an aware datetime; None if neither."""
    text = str(text).strip()
    m = _COMPACT.match(text)
    try:
        if m:
            y, mo, d, h, mi, s = (int(g) if g else 0 for g in m.groups())
            moment = datetime(y, mo, d, h, mi, s)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def parse_when(text: str, now: str, what: str = "--when") -> str:
    """``text`` as a history time, checked: a real time, not after ``now``."""
    moment = parse_time(text)
    if moment is None:
        raise InvalidValue(f"{what} {text!r}: not a time; write it like 2026-12-02T14:14 "
                           "(UTC unless it says +HH:MM)")
    value = stamp(moment)
    if value > now:
        raise InvalidValue(f"{what} {text!r} ({value}) is after now ({now}): history cannot "
                           "be recorded ahead of the clock")
    return value


def dated_log(commits: list[dict]) -> list[dict]:
    """``commits`` (newest first) with each one's ``when`` ("" without a trailer),
    ordered newest first by it, else by the commit time (commit order between equal
    times)."""
    out = []
    for index, c in enumerate(commits):
        when = next((line[6:].strip() for line in str(c.get("body", "")).splitlines()
                     if line.startswith("When: ")), "")
        moment = parse_time(c.get("time") or "")
        time = stamp(moment) if moment else str(c.get("time") or "")
        out.append((when or time, -index, {**c, "when": when}))
    return [c for *_, c in sorted(out, key=lambda t: (t[0], t[1]), reverse=True)]


__all__ = ["dated_log", "parse_time", "parse_when", "stamp"]
