"""What the rendered docs are drawn from: a plain, file-free snapshot of a workspace.

The workspace layer (``ledger/workspace.py`` and the CLI) builds a :class:`RenderModel`
from ``ledger.yaml``, the live target files and the stored evidence, and hands it to
:func:`ledger.render.docs.render_docs`.  Keeping this snapshot separate means the renderer
never touches git, target files or the clock, so the same model always renders the same
bytes, and tests can build any situation by hand.

Evidence summaries are the mappings stored in ``evidence/<entry>/<run>/summary.yaml``
(see ``ledger/evidence.py``); the renderer reads them defensively because they come from
disk and from imports of other tools' results.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Mapping

from ledger.core.model import Entry
from ledger.errors import InvalidValue


@dataclass(frozen=True)
class KnobRow:
    """One knob of one target, as the knob-state table shows it.

    ``live`` is the value in the file now and ``ledger_full`` the value the file would
    carry if every entry were applied (``None``: unset).  When the two differ, the
    difference is what a full restore would put back.  ``entries`` are the ids of the
    entries that touch this knob, in record order.
    """

    knob: str
    live: str | None
    ledger_full: str | None
    entries: list[str] = field(default_factory=list)
    default: Any = None  # the engine's default, shown beside an unset side (None: unknown)

    @property
    def off_table(self) -> bool:
        """True when the live value is not what the fully-applied ledger would set."""
        return self.live != self.ledger_full


@dataclass(frozen=True)
class TargetState:
    """A managed config file and the state of every knob the ledger knows in it."""

    name: str
    path: str
    format: str
    knobs: list[KnobRow] = field(default_factory=list)


@dataclass(frozen=True)
class RenderModel:
    """Everything the docs show, gathered by the workspace layer.

    ``entries`` are in record order.  ``evidence`` maps an entry id to its latest
    summary (absent when the entry has none); ``stale`` holds the ids whose evidence
    was recorded at another engine commit than the live one.  ``patch_stats`` maps a
    patch entry's id to its diffstat: ``[(file, lines added, lines removed)]``.
    """

    title: str
    entries: list[Entry]
    targets: list[TargetState] = field(default_factory=list)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    patch_stats: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    # Bisect records as display rows (see ledger.commands.render.bisect_views), oldest first.
    bisects: list[dict[str, Any]] = field(default_factory=list)
    # The workspace's commits as `ledger log` gives them (sha, time, subject, body), newest
    # first: the timeline.  Empty: the timeline is drawn from the entries' histories.
    log: list[dict[str, Any]] = field(default_factory=list)
    # entry id -> the engine's default of its knob, for an entry with an unset side
    defaults: dict[str, Any] = field(default_factory=dict)
    # Notes and links attached with `ledger evidence note` (ledger.evidence.notes), by
    # entry id, in the order attached: shown as written, never judged as numbers.
    notes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.title, str) or not self.title.strip():
            raise InvalidValue("the render title (workspace name) is empty")
        seen: set[str] = set()
        for entry in self.entries:
            if entry.id in seen:
                raise InvalidValue(f"entry id {entry.id!r} appears twice in the render model")
            seen.add(entry.id)
        for where, ids in (
            ("evidence", self.evidence),
            ("stale", self.stale),
            ("patch_stats", self.patch_stats),
            ("notes", self.notes),
        ):
            unknown = sorted(set(ids) - seen)
            if unknown:
                raise InvalidValue(f"{where} names entries not in the ledger: {', '.join(unknown)}")
        for b in self.bisects:
            if not isinstance(b, Mapping) or not isinstance(b.get("selection"), list):
                raise InvalidValue("a bisect view needs a selection list")
        for c in self.log:
            if not isinstance(c, Mapping) or not isinstance(c.get("subject"), str):
                raise InvalidValue("a log commit needs a subject")
        for entry_id, summary in self.evidence.items():
            if not isinstance(summary, Mapping):
                raise InvalidValue(
                    f"evidence for {entry_id} is a {type(summary).__name__}, not a mapping"
                )

    def entry(self, entry_id: str) -> Entry:
        """The entry with this id (ids are checked unique in ``__post_init__``)."""
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        raise InvalidValue(f"no entry {entry_id!r} in the render model")


__all__ = ["KnobRow", "RenderModel", "TargetState"]
