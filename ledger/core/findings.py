"""What `ledger check` reads and what it reports: plain records.  Pure.

The commands layer (:mod:`ledger.commands.check`) reads each target at the base and the
head commit into a :class:`TargetReading` (a :class:`Side` each), and each entry's
evidence into an :class:`EvidenceView`; the judge (:mod:`ledger.core.check`) returns a
:class:`Report` of :class:`Finding`, :class:`Change` and :class:`EntryNote` records, which
the CLI prints or writes as JSON (``to_dict``), with the entries that still need
``ledger ab`` as a GitHub Actions :func:`matrix`.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Mapping
from typing import Sequence

from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.model import Entry
from ledger.core.identifiers import split_place
from ledger.values import value_text

@dataclass(frozen=True)
class Side:
    """One target file at one commit, as its format reads it.

    ``values``: each knob with one value (an env knob, a flag ``--x``), and, for a knob with
    several places, each place as ``knob@place``; ``places``: every place's value (the
    layer keys of entries recorded with ``--at``); ``lines``: where each key is;
    ``releases``: the engine releases the file names, ``(spec, line)``."""

    values: Mapping[str, str]
    places: Mapping[str, str | None] = field(default_factory=dict)
    lines: Mapping[str, int] = field(default_factory=dict)
    releases: tuple[tuple[str, int], ...] = ()

    def live(self, key: str) -> str | None:
        if key == RELEASE_KNOB:  # an upgrade entry's layer: the one release the file names
            named = {spec for spec, _ in self.releases}
            return named.pop() if len(named) == 1 else None
        if split_place(key)[1] is not None:
            return self.places.get(key)
        return self.values.get(key)


@dataclass(frozen=True)
class TargetReading:
    """A target at base and head.  ``base`` None with ``new``: the file is new in the range
    (its knobs are its baseline); ``error``: why it could not be read (unreadable)."""

    name: str
    path: str  # repo-relative, as a finding names it
    changed: bool  # the file's blob differs between base and head
    base: Side | None = None
    head: Side | None = None
    new: bool = False
    error: str | None = None
    outside: str | None = None  # why the file cannot be found in the repository


@dataclass(frozen=True)
class EvidenceView:
    """An entry's latest evidence at head: verdict, headline, what makes it stale."""

    verdict: str | None
    headline: str
    stale_why: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # error | warn
    message: str
    path: str | None = None
    line: int | None = None
    target: str | None = None
    knob: str | None = None
    change: str | None = None  # "SGLANG_X: 4 -> 8"
    fix: str | None = None  # the command that makes it right
    entry: str | None = None

    @property
    def where(self) -> str:
        if self.path and self.line:
            return f"{self.path}:{self.line}"
        return self.path or ""

    def to_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                "path": self.path, "line": self.line, "target": self.target,
                "knob": self.knob, "change": self.change, "fix": self.fix,
                "entry": self.entry}


@dataclass(frozen=True)
class Change:
    """A knob, flag or release that differs between base and head in one target."""

    target: str
    path: str
    knob: str
    before: str | None
    after: str | None
    line: int | None
    entries: tuple[str, ...]  # the entries of the range that explain it (empty: none)

    @property
    def text(self) -> str:
        return f"{self.knob}: {value_text(self.before)} -> {value_text(self.after)}"

    def to_dict(self) -> dict:
        return {"target": self.target, "path": self.path, "knob": self.knob,
                "before": self.before, "after": self.after, "line": self.line,
                "entries": list(self.entries)}


@dataclass(frozen=True)
class EntryNote:
    """An entry the range added or changed: what happened to it and its evidence."""

    entry: Entry
    what: str  # added | restored | reverted | changed
    evidence: EvidenceView | None

    def to_dict(self) -> dict:
        e, ev = self.entry, self.evidence
        return {"id": e.id, "slug": e.slug, "class": e.cls, "kind": e.kind, "title": e.title,
                "what": self.what, "state": e.state, "target": e.target, "knob": e.knob,
                "before": e.before, "after": e.after,
                "verdict": ev.verdict if ev else None,
                "headline": ev.headline if ev else "no evidence",
                "stale": list(ev.stale_why) if ev else []}


@dataclass
class Report:
    base: str
    head: str
    findings: list[Finding]
    changes: list[Change]
    entries: list[EntryNote]
    needs_ab: list[Entry]

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def failed(self, fail_on: str = "error") -> bool:
        """Whether the check fails: on any error (``error``), any warning too (``warn``),
        never (``never``)."""
        if fail_on == "never":
            return False
        levels = ("error", "warn") if fail_on == "warn" else ("error",)
        return any(f.severity in levels for f in self.findings)

    def to_dict(self, fail_on: str = "error") -> dict:
        return {"base": self.base, "head": self.head, "ok": not self.failed(fail_on),
                "errors": self.count("error"), "warnings": self.count("warn"),
                "findings": [f.to_dict() for f in self.findings],
                "changes": [c.to_dict() for c in self.changes],
                "entries": [n.to_dict() for n in self.entries],
                "needs_ab": matrix(self.needs_ab)}


def matrix(entries: Sequence[Entry]) -> dict:
    """A GitHub Actions matrix of the entries that still need ``ledger ab``."""
    return {"include": [{"entry": e.id, "slug": e.slug, "title": e.title, "kind": e.kind,
                         "target": e.target, "knob": e.knob} for e in entries]}


@dataclass(frozen=True)
class Layout:
    """How commands are spelled for this repository: the target file's path relative to
    the repository top, and the repository relative to the workspace (``.`` where the
    workspace is the repository)."""

    repo_from_workspace: str = "."


__all__ = ["Change", "EntryNote", "EvidenceView", "Finding", "Layout", "Report", "Side",
           "TargetReading", "matrix"]
