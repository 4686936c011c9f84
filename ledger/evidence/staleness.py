"""Stale that says whether it matters: what changed since evidence was measured, and
whether it touches what the entry's change touches.

Pure: it reads lists the view gathered from git (:mod:`ledger.evidence.view`).

An engine commit made since the evidence is **related** when it touches a file the
entry's change touches: for a knob entry, a file of the engine that names the knob (the
code that reads it, its declaration, its launch script) or a commit whose diff names the
knob itself; for a patch entry, a file its diff changes.  The ledger has no "interacting
entries" marker yet; when it has, a commit of such an entry is related too.  Other
commits are **unrelated**: counted, named with their subject and files, but they do not
discredit the evidence.  A knob of the target with another value than when measured is
always said (the ledger cannot know what a knob interacts with).

The headline then reads:

* nothing changed: the headline alone;
* only unrelated commits: ``gain +12.1% … — measured before 2 bugfix commits (a1b2c3d
  "refuse non-boolean ignore_eos", …; files: engine/serving/requests.py), none touching
  what it measures`` (still stale, but the verdict stands as the operator's best guess);
* a related commit, another knob value, or commits the ledger cannot list (history
  rewritten): ``[stale] gain +12.1% … (stale: engine commit 5d6e7f8 "fewer, longer split-K
  partitions" touches engine/model/attention_ops.py, which names ENGINE_DECODE_TARGET_CTAS;
  and 1 bugfix commit that does not (files: …))``: measure again before trusting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MAX_NAMED = 3  # commits / files named one by one before "and N more"


@dataclass(frozen=True)
class EngineCommit:
    """One engine commit between the evidence's and the live one."""

    sha: str
    subject: str
    files: tuple[str, ...]
    related: tuple[str, ...] = ()  # why it touches what the entry measures, each a phrase
    cls: str | None = None  # the class of the ledger entry it applies, if it is one


def related_why(files: Sequence[str], entry_files: Sequence[str], knob: str | None,
                mentions_knob: bool) -> tuple[str, ...]:
    """Why a commit touching ``files`` is related to the entry: each shared file (``…, which
    names KNOB`` for a knob entry), and the knob named in its diff.  Empty: unrelated."""
    shared = [f for f in files if f in set(entry_files)]
    why = [f"{f}, which names {knob}" if knob else f"{f}, which the patch changes"
           for f in shared]
    if mentions_knob and knob and not shared:
        why.append(f"{knob} itself")
    return tuple(why)


def _named(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    return shown + (f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else "")


def _commit(c: EngineCommit) -> str:
    return f'{c.sha[:7]} "{c.subject}"'


def _kind(commits: Sequence[EngineCommit]) -> str:
    n = len(commits)
    word = "bugfix commit" if commits and all(c.cls == "bugfix" for c in commits) \
        else "engine commit"
    return f"{n} {word}{'s' if n != 1 else ''}"


def _files(commits: Sequence[EngineCommit]) -> list[str]:
    return sorted({f for c in commits for f in c.files})


def stale_story(commits: Sequence[EngineCommit] | None, knob_changes: Sequence[str],
                commit_change: str | None) -> tuple[bool, list[str]]:
    """``(matters, reasons)``: whether the changes since the evidence touch what it measures,
    and each change said.  ``commits``: the engine commits since (None when the ledger could
    not list them; then ``commit_change``, ``engine commit A → B``, is said as it is);
    ``knob_changes``: ``KNOB then → now`` of the target's other knobs."""
    reasons: list[str] = []
    matters = bool(knob_changes)
    if commits is None:
        if commit_change:
            reasons.append(commit_change)
            matters = True
    else:
        related = [c for c in commits if c.related]
        others = [c for c in commits if not c.related]
        for c in related:
            reasons.append(f"engine commit {_commit(c)} touches {_named(list(c.related))}")
        if related and others:
            verb = "does" if len(others) == 1 else "do"
            reasons.append(f"and {_kind(others)} that {verb} not "
                           f"(files: {_named(_files(others))})")
        elif others:
            named = "; ".join(_commit(c) for c in others[:MAX_NAMED])
            more = f"; and {len(others) - MAX_NAMED} more" if len(others) > MAX_NAMED else ""
            reasons.append(f"measured before {_kind(others)} ({named}{more}; files: "
                           f"{_named(_files(others))}), none touching what it measures")
        matters = matters or bool(related)
    reasons.extend(knob_changes)
    return matters, reasons


def stale_text(headline: str, matters: bool, reasons: Sequence[str]) -> str:
    """The headline with what changed since: ``[stale] … (stale: …)`` when it matters, else
    ``… — measured before …``; the headline alone when nothing changed."""
    if not reasons:
        return headline
    if matters:
        return f"[stale] {headline} (stale: {'; '.join(reasons)})"
    return f"{headline} — {'; '.join(reasons)}"


__all__ = ["EngineCommit", "related_why", "stale_story", "stale_text"]
