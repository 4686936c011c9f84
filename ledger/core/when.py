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


def dated_events(commits: list[dict], entries) -> list[dict]:
    """The dated actions (``--when``, ``--reverted-when``, ``clear --when``, an adopted
    revert's date) that the commits' own lines do not already show, as events of their
    own: a hand revert recorded with its entry is one commit, ``record …``, dated by its
    earliest date, and without this its revert would be missing from every history view.

    An action is already shown when a commit of the same kind (its subject's first word;
    ``record`` and ``adopt`` are one kind) carries the same ``When:`` date.  Each event: ``when``, ``at`` (recorded), the entry's
    ``id``, ``title`` and ``cls``, ``action`` and ``why``; newest first."""
    shown = {(c.get("when"), _kind(str(c.get("subject", "")))) for c in commits if c.get("when")}
    events = []
    for e in entries:
        for a in e.history:
            # An entry brought in with its history is recorded (`record`) or adopted: the
            # commit line that brought it shows that date under either word.
            kinds = ("record", "adopt") if a.action in ("record", "adopt") else (a.action,)
            if a.when and not any((a.when, k) in shown for k in kinds):
                events.append({"when": a.when, "at": a.at, "id": e.id, "title": e.title,
                               "cls": e.cls, "action": a.action, "why": a.why})
    return sorted(events, key=lambda ev: (ev["when"], ev["id"]), reverse=True)


def _kind(subject: str) -> str:
    return subject.split(" ", 1)[0].strip("`:") if subject else ""


__all__ = ["dated_events", "dated_log", "parse_time", "parse_when", "stamp"]
