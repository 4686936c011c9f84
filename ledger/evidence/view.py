"""The ledger's view of an entry's evidence: its headline, verdict and staleness.

Evidence lives under ``evidence/<entry-id>/<run-id>/`` (see :mod:`ledger.evidence.store`);
this module answers the questions the other commands ask of it, and stays cheap when an
entry has no evidence at all (no pandas, no YAML parsing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

from ledger.core.model import Entry
from ledger.errors import LedgerError
from ledger.store.workspace import Workspace

NO_EVIDENCE = "no evidence"


@dataclass(frozen=True)
class EvidenceInfo:
    headline: str
    verdict: str | None
    stale: bool
    summary: dict | None
    stale_why: tuple[str, ...] = ()  # what differs, ``what then → now`` each

    @property
    def text(self) -> str:
        """The headline, marked ``[stale]`` and ended with what differs when it is."""
        if not self.stale:
            return self.headline
        why = f" (stale: {'; '.join(self.stale_why)})" if self.stale_why else ""
        return f"[stale] {self.headline}{why}"


NONE = EvidenceInfo(NO_EVIDENCE, None, False, None)


def has_evidence(ws: Workspace, entry: Entry) -> bool:
    return (ws.evidence_dir / entry.id).is_dir()


class AllIds:
    """What :func:`evidence_ids` answers where ``evidence/`` cannot be listed: every id may
    have evidence, so each entry is asked alone."""

    def __contains__(self, entry_id: object) -> bool:
        return True


def evidence_ids(ws: Workspace) -> frozenset[str] | AllIds:
    """The ids of every entry with an evidence directory: one listing of ``evidence/``,
    for a command that looks at thousands of entries (one ``stat`` each costs more).
    Where the directory exists but cannot be listed, :class:`AllIds`."""
    try:
        with os.scandir(ws.evidence_dir) as found:
            return frozenset(d.name for d in found if d.is_dir())
    except FileNotFoundError:  # no evidence/ yet
        return frozenset()
    except OSError:  # unreadable: each entry is then asked alone
        return AllIds()


def evidence_of(ws: Workspace, entries: Iterable[Entry]) -> dict[str, EvidenceInfo]:
    """:func:`evidence_for` of each entry, by id, listing ``evidence/`` once."""
    present = evidence_ids(ws)
    return {e.id: evidence_for(ws, e) if e.id in present else NONE for e in entries}


def evidence_for(ws: Workspace, entry: Entry, context: dict | None = None) -> EvidenceInfo:
    """The latest evidence of ``entry`` (or NONE), with staleness against the live state."""
    if not has_evidence(ws, entry):
        return NONE
    from ledger.evidence import store

    summary = store.latest_summary(ws.root, entry.id)
    if summary is None:
        return NONE
    engine_commit = current_engine_commit(ws)
    recorded_at = summary.get("engine_commit")
    if recorded_at and engine_commit and recorded_at != engine_commit \
            and same_tree(ws, recorded_at, engine_commit):
        # A revert and a restore make new commits of the same tree: same engine source,
        # so the evidence still describes it.
        engine_commit = recorded_at
    if context is None:
        context = knob_context(ws, entry)
    from ledger.evidence.summary import stale_reasons

    why = tuple(stale_reasons(summary, engine_commit, context))
    return EvidenceInfo(store.headline(summary), summary.get("verdict"), bool(why), summary,
                        why)


def engine_git(ws: Workspace):
    """The engine repo through the hardened runner (it is not ours: no hooks, no GIT_*)."""
    path = ws.engine_repo_path
    if path is None or not (path / ".git").exists():
        return None
    from ledger.patches.gitrun import Git

    return Git(path)


def current_engine_commit(ws: Workspace) -> str | None:
    git = engine_git(ws)
    try:
        return git.head() if git else None
    except LedgerError:  # an unreadable engine repo only makes evidence unjudgeable
        return None


def same_tree(ws: Workspace, a: str, b: str) -> bool:
    """Whether two engine commits hold the same source tree."""
    git = engine_git(ws)
    try:
        return bool(git) and git.tree_of(a) == git.tree_of(b)
    except LedgerError:  # an unknown commit (history rewritten): not the same engine
        return False


def knob_context(ws: Workspace, entry: Entry) -> dict | None:
    """The other knobs of the entry's target as they are live (None for patch entries)."""
    if entry.kind != "knob":
        return None
    from ledger.store.targets import read_target

    try:
        tf = read_target(ws, ws.target(entry.target))
    except LedgerError:
        return None
    return {k: v for k, v in tf.values.items() if k != entry.knob}
