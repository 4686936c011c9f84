"""The first screen of the docs: the incident questions, and the timeline of what was done.

An operator opening the docs at 3 a.m. asks three things, and the page answers them in
this order before anything else:

* **Off the table** — what a restore would bring back *now*: reverted entries that no
  rule holds back, each with why it was reverted and its evidence headline.
* **Cleared and restored** — suspects that were exonerated, on what grounds (the clear's
  reason, the bisect that showed it) and the evidence of what came back.
* **Held back** — reverted entries a plain restore skips, and why: under suspicion,
  evidence saying regression, or *failed its health check* (rolled back by the restart's
  health gate: the value crashed or wedged the service, so it is never offered as a
  claw-back).

The timeline is the workspace's git history — one commit per command, so A/B runs,
evidence imports, bisect steps, restarts and health-gate rollbacks are all in it — in
exactly the order ``ledger log`` prints it (newest first), each to the second.  The
renderer gets those commits in the model (no git here); a model without them (a
hand-built one) falls back to the entries' own histories.
"""

from __future__ import annotations

import re
from typing import Any
from typing import Iterable
from typing import Mapping

from ledger.core.display import happened_at
from ledger.core.display import health_failure
from ledger.core.model import Entry
from ledger.render.text import when_exact

# An entry line of a ledger commit's body: "- 82dd29e6 [perf] title" or "- ID reverted: …".
_BODY_ENTRY = re.compile(r"^- ([\w.-]+)")
_SUBJECT_ENTRY = re.compile(r"[\w.-]+")
_TRAILER = re.compile(r"^[A-Z][A-Za-z-]+: \S+$")


def incident_views(views: list[dict[str, Any]], entries: Iterable[Entry],
                   bisects: list[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The three answers of the first screen, newest entry first in each."""
    by_id = {e.id: e for e in entries}
    off, held, cleared = [], [], []
    for v in sorted(views, key=lambda v: (v["made_raw"], v["seq"]), reverse=True):
        e = by_id[v["id"]]
        if v["suspicion"] == "cleared" and v["applied"]:
            cleared.append({**v, "cleared_by": _exonerating_bisects(e.id, bisects),
                            "restored_at": _last_at(e, "restore")})
        if v["applied"]:
            continue
        failure = health_failure(e)
        if failure is not None:
            held.append({**v, "held_kind": "health", "held_detail": failure,
                         "held_why": "the service failed its health check on this value and "
                                     "the change was rolled back; it is not a claw-back"})
        elif v["restore"]["held"]:
            kind = "suspect" if e.suspected else "regression"
            held.append({**v, "held_kind": kind, "held_why": v["restore"]["held"],
                         "held_detail": ""})
        else:
            off.append(v)
    return {"off_now": off, "held_back": held, "cleared_restored": cleared}


def _exonerating_bisects(entry_id: str, bisects: list[Mapping[str, Any]]) -> list[dict]:
    return [{"id": b["id"], "summary": b["summary"]} for b in bisects
            if str((b.get("roles") or {}).get(entry_id, "")).startswith("exonerated")]


def _last_at(e: Entry, action: str) -> str:
    at = happened_at(e, action)
    return when_exact(at) if at else ""


def timeline(log: list[Mapping[str, Any]], entries: list[Entry]) -> list[dict[str, Any]]:
    """One event per workspace commit, newest first (``ledger log`` order: by the
    commit's ``When:`` date where it has one, see ledger.core.when.dated_log)."""
    if not log:
        return _history_timeline(entries)
    from ledger.core.when import dated_events
    from ledger.core.when import parse_time
    from ledger.core.when import stamp

    titles = {e.id: (e.title, e.cls) for e in entries}
    events = []
    for c in log:
        subject = str(c.get("subject", ""))
        ids, details = [], []
        for line in str(c.get("body", "")).splitlines():
            m = _BODY_ENTRY.match(line)
            if m and m.group(1).rstrip(":") in titles:
                ids.append(m.group(1).rstrip(":"))
            elif line.strip() and not _TRAILER.match(line) and not line.startswith("  "):
                details.append(line.removeprefix("- "))
        ids += [i for i in _SUBJECT_ENTRY.findall(subject) if i in titles]
        events.append({
            "at": when_exact(c.get("when") or c.get("time")),
            "sha": str(c.get("sha", ""))[:10],
            "action": _kind(subject),
            "subject": subject,
            "detail": " ".join(details),
            "entries": [{"id": i, "title": titles[i][0], "cls": titles[i][1]}
                        for i in dict.fromkeys(ids)],
        })
    # The dated actions no commit line shows (a hand revert recorded with its entry, a
    # clear --when) are events of their own, where they happened: as `ledger log` has them.
    raw = [c.get("when") or (stamp(m) if (m := parse_time(c.get("time") or "")) else "")
           for c in log]
    dated = [(ev["when"], {
        "at": when_exact(ev["when"]), "sha": "", "action": ev["action"],
        "subject": f"{ev['action']} (recorded {when_exact(ev['at'])})",
        "detail": ev["why"],
        "entries": [{"id": ev["id"], "title": ev["title"], "cls": ev["cls"]}],
    }) for ev in dated_events(list(log), entries)]
    merged = [(r, 0, -i, e) for i, (r, e) in enumerate(zip(raw, events))]
    merged += [(r, 1, -i, e) for i, (r, e) in enumerate(dated)]
    return [e for *_, e in sorted(merged, key=lambda t: t[:3], reverse=True)]


def _kind(subject: str) -> str:
    word = subject.split(" ", 1)[0].strip("`:") if subject else ""
    return word if re.fullmatch(r"[a-z][a-z-]*", word) else "commit"


def _history_timeline(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """Without the workspace's commits: every action of every entry, newest first."""
    events = []
    for entry in entries:
        for index, action in enumerate(entry.history):
            events.append(((action.happened, entry.seq, index), {
                "at": when_exact(action.happened), "sha": "", "action": action.action,
                "subject": action.action, "detail": action.why,
                "entries": [{"id": entry.id, "title": entry.title, "cls": entry.cls}],
            }))
    return [event for _, event in sorted(events, key=lambda pair: pair[0], reverse=True)]


__all__ = ["incident_views", "timeline"]
