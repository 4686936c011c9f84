"""A bisect's conclusion in words, with its evidence, its confidence and what to do next.

The record stores this (``conclusion`` in ``bisect/<id>/record.json``) so ``show``,
``render`` and a later reader see the same sentence the operator saw.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from ledger.core import bisect as core
from ledger.core.model import Entry


def conclusion_record(conclusion: core.Conclusion, record: dict, selection: Sequence[Entry]
                      ) -> dict:
    """The stored form of ``conclusion``: kind, entries, text, evidence, confidence, next."""
    steps = record["steps"]
    by_id = {e.id: e for e in selection}
    asked = [(frozenset(s["applied"]), s["verdict"] == "bad") for s in steps]
    counts = [(len(s["runs"]), sum(1 for r in s["runs"] if r["exit"] != 0)) for s in steps]
    conf = core.confidence(counts, record["runs"])
    lines, suggest = _describe(conclusion, record, by_id, asked)
    return {
        "kind": conclusion.kind,
        "entries": list(conclusion.entries),
        "text": "\n".join(lines),
        "evidence_steps": [i + 1 for i in conclusion.evidence],
        "confidence": {"value": conf.value, "failure_rate": conf.failure_rate,
                       "text": conf.text, "runs_for_95": conf.runs_for_95,
                       "flaky_steps": [i + 1 for i in conf.flaky_steps]},
        "suggest": suggest,
    }


def _namer(record: dict):
    """``id [class] title (change)`` from the record's own copy of the selection."""
    sel = {s["id"]: s for s in record.get("selection") or ()}

    def name(entry_id: str) -> str:
        s = sel.get(entry_id) or {}
        return f"{entry_id} [{s.get('class', '?')}] {s.get('title', '?')} ({s.get('change', '?')})"
    return name


def _describe(conclusion: core.Conclusion, record: dict, by_id: dict[str, Entry], asked
              ) -> tuple[list[str], list[str]]:
    n = len(by_id)
    bid = record["id"]
    runs = record["runs"]
    name = _namer(record)
    kind = conclusion.kind
    if kind == "cannot-reproduce":
        return ([f"cannot reproduce: the check passes with all {n} selected entries applied "
                 f"(step 1, {runs} run{'s' if runs != 1 else ''})"], [])
    if kind == "not-in-entries":
        suspects = [e for e in by_id.values() if e.suspected]
        lines = [f"not in these entries: the check fails with all {n} selected entries "
                 "reverted (step 2) as with all of them applied (step 1)"]
        suggest = []
        if suspects:
            lines.append("suspects among them: " + ", ".join(name(e.id) for e in suspects))
            why = (f"bisect {bid}: the failure persists with all {n} selected entries reverted")
            suggest = [f"ledger clear {e.id} --why {shlex.quote(why)}" for e in suspects]
        return lines, suggest
    members = frozenset(conclusion.entries)
    fails_at = next(i for i, (s, bad) in enumerate(asked) if bad and s == members) + 1
    passes_at = {m: i + 1 for m, i in core.minimality_evidence(members, asked).items()}
    if kind == "culprit":
        (x,) = conclusion.entries
        why = (f"bisect {bid}: the check fails with it applied alone (step {fails_at}) "
               f"and passes without it (step {passes_at[x]})")
        return ([f"one culprit: {name(x)}",
                 f"fails with only it of the selection applied (step {fails_at}); passes "
                 f"without it (step {passes_at[x]})"],
                [f"ledger suspect {x} --why {shlex.quote(why)}"])
    lines = [f"{len(members)} entries fail only together: "
             + ", ".join(conclusion.entries),
             f"with only them applied the check fails (step {fails_at}); "
             "without any one of them it passes:"]
    suggest = []
    for m in conclusion.entries:
        lines.append(f"  {name(m)}: passes without it (step {passes_at[m]})")
        why = (f"bisect {bid}: fails only together with "
               + ", ".join(o for o in conclusion.entries if o != m)
               + f" (step {fails_at}); passes without it (step {passes_at[m]})")
        suggest.append(f"ledger suspect {m} --why {shlex.quote(why)}")
    return lines, suggest


def timeline(record: dict) -> list[dict]:
    """The record's steps as display rows (for the CLI and the rendered docs)."""
    rows = []
    for s in record.get("steps") or ():
        runs = s.get("runs") or []
        exits = ["timeout" if r.get("timed_out") else str(r.get("exit")) for r in runs]
        last = next((r["tail"][-1] for r in reversed(runs) if r.get("tail")), "")
        if s.get("restart_failed"):
            exits, last = ["restart failed"], str(s["restart_failed"])
        rows.append({"n": s.get("n"), "purpose": s.get("purpose"),
                     "applied": len(s.get("applied") or ()),
                     "reverted": len(s.get("reverted") or ()),
                     "applied_ids": list(s.get("applied") or ()),
                     "verdict": s.get("verdict") or "—", "exits": ", ".join(exits) or "—",
                     "seconds": round(float(s.get("check_seconds") or 0.0), 2),
                     "ledger_seconds": round(float(s.get("ledger_seconds") or 0.0), 3),
                     "last_line": last})
    return rows


def summary(record: dict) -> str:
    """One line: the conclusion's first sentence, or the status."""
    c = record.get("conclusion") or {}
    text = str(c.get("text") or "").splitlines()
    if text:
        return text[0]
    n = len(record.get("steps") or ())
    error = str(record.get("error") or "").splitlines()
    return (f"no conclusion: {record.get('status') or 'unknown'} at step {n}"
            + (f" ({error[0]})" if error else ""))


def role_of(record: dict, entry_id: str) -> str:
    """What a bisect concluded about one entry of its selection."""
    c = record.get("conclusion") or {}
    kind = c.get("kind")
    if kind in ("culprit", "interaction"):
        if entry_id in (c.get("entries") or ()):
            return "culprit" if kind == "culprit" else "fails together with " + ", ".join(
                o for o in c["entries"] if o != entry_id)
        return "not needed for the failure"
    if kind == "not-in-entries":
        return "exonerated: the failure persists with all selected entries reverted"
    if kind == "cannot-reproduce":
        return "the failure did not reproduce"
    return str(record.get("status") or "")


__all__ = ["conclusion_record", "role_of", "summary", "timeline"]
