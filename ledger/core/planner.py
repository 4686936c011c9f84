"""The planner: from entries and a selection to what one command changes.  Pure.

No files, no git, no clock: every function takes entries (and, where needed, the live
values a caller read, or the time to stamp history with) and returns data.  This is
where the semantics of docs/ARCHITECTURE.md §2 live, to be tested exhaustively and fast.

Knob layering
    What value each (target, knob) has for a given set of applied entries:
    :mod:`ledger.core.layers`.  A :class:`Plan`'s ``knob_edits`` are the layers' values
    before and after its state changes.

Patch stack
    Patch entries form one ordered stack; the desired engine tree is base + applied
    patches in record order.  The planner only says which patches are applied before
    and after an operation; ``ledger.patches.stack`` turns that into a tree (or refuses).

Class-selective operations
    ``plan_revert`` / ``plan_restore`` take an explicit selection and return the entries'
    new states plus the knob values and patch set that follow.  Restores skip entries
    under suspicion (unless ``include_suspects``) and entries whose evidence says
    ``regression`` (unless ``force``); when the operator named an entry explicitly, such
    a skip is a refusal instead, because silently doing less than asked is worse.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.core.action import Action
from ledger.core.display import revert_action
from ledger.core.display import revert_reason
from ledger.core.layers import KnobKey
from ledger.core.layers import entry_keys
from ledger.core.layers import knob_layers
from ledger.core.layers import layer_value
from ledger.core.model import Entry
from ledger.errors import Refused
from ledger.errors import UsageError


@dataclass(frozen=True)
class Skip:
    entry: Entry
    reason: str


@dataclass(frozen=True)
class Plan:
    """What one command will do: entry transitions and the configuration that follows."""

    op: str
    changes: tuple[tuple[Entry, Entry], ...]  # (before, after) per changed entry
    skipped: tuple[Skip, ...] = ()
    # (target, knob) -> (old expected value, new expected value), only where it changes
    knob_edits: dict[KnobKey, tuple[str | None, str | None]] = field(default_factory=dict)
    # patch entries whose applied-ness changes, in record order
    patch_flips: tuple[Entry, ...] = ()
    # entries this command records (``record``, ``adopt``): after every existing one
    added: tuple[Entry, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.changes and not self.added

    def new_entries(self, entries: Iterable[Entry]) -> list[Entry]:
        """All entries with this plan's changes applied, in record order (added last)."""
        changed = {new.id: new for _, new in self.changes}
        kept = sorted((changed.get(e.id, e) for e in entries), key=lambda e: e.seq)
        return kept + list(self.added)


def _effects(
    entries: Sequence[Entry], changes: Sequence[tuple[Entry, Entry]]
) -> tuple[dict[KnobKey, tuple[str | None, str | None]], tuple[Entry, ...]]:
    """Knob values and patch flips that follow from ``changes``."""
    new_state = {new.id: new.applied for _, new in changes}
    edits: dict[KnobKey, tuple[str | None, str | None]] = {}
    touched = {key for old, _ in changes if old.kind != "patch" for key in entry_keys(old)}
    layers = knob_layers(entries)
    for key in sorted(touched):  # type: ignore[type-var]
        layer = layers[key]  # type: ignore[index]
        old_value = layer_value(layer)
        new_value = layer_value(layer, new_state)
        if old_value != new_value:
            edits[key] = (old_value, new_value)  # type: ignore[index]
    flips = tuple(
        new for old, new in sorted(changes, key=lambda c: c[0].seq)
        if old.kind == "patch" and old.applied != new.applied
    )
    return edits, flips


def select(
    entries: Iterable[Entry],
    *,
    ids: Sequence[str] = (),
    cls: str | None = None,
    state: str | None = None,
) -> list[Entry]:
    """Entries by id (in the given order) or by class and state (in record order)."""
    if ids:
        by_id = {e.id: e for e in entries}
        return [by_id[i] for i in dict.fromkeys(ids)]
    return [
        e for e in sorted(entries, key=lambda e: e.seq)
        if (cls is None or e.cls == cls) and (state is None or e.state == state)
    ]


def plan_record(entry: Entry, *, adopt: bool = False) -> Plan:
    """Record ``entry`` as the newest entry: the configuration that follows from it.

    A knob entry moves each of its layers (the knob, or each place it selected) from its
    ``before`` to its ``after``; a patch entry goes on top of the stack.  An adopted
    change (made by hand, or a commit already in the engine repo) changes nothing: the
    files hold it already, the ledger only learns of it.  The caller has checked that
    ``before`` is what the ledger expects (or the file holds, with ``--force``).
    """
    edits: dict[KnobKey, tuple[str | None, str | None]] = {}
    flips: tuple[Entry, ...] = ()
    # An entry recorded already reverted (``--already-reverted``: made and taken back by
    # hand before the ledger knew) changes nothing either: the files hold its base.
    adopt = adopt or not entry.applied
    if entry.kind != "patch" and not adopt:
        edits = {key: (layer[0].before, entry.after) for key, layer in knob_layers([entry]).items()}
    elif entry.kind == "patch" and not adopt:
        flips = (entry,)
    return Plan("adopt" if adopt else "record", (), (), edits, flips, (entry,))


def plan_revert(
    entries: Sequence[Entry],
    selected: Sequence[Entry],
    *,
    why: str,
    at: str,
    command: str,
    suspect: bool = False,
    when: str = "",
) -> Plan:
    """Revert ``selected`` (already-reverted ones are skipped; ``suspect`` marks them).
    ``when``: the real time of the revert where it is not ``at`` (``--when``)."""
    changes = []
    skipped = []
    # one action for every entry this command reverts (the same line in each history)
    action = Action(at=at, action="suspect" if suspect else "revert", why=why, command=command,
                    when=when)
    for e in selected:
        if suspect:
            new = e.with_action(action, state="reverted", suspicion="suspected", suspect_why=why)
            changes.append((e, new))
        elif not e.applied:
            skipped.append(Skip(e, "already reverted"))
        else:
            changes.append((e, e.with_action(action, state="reverted")))
    edits, flips = _effects(entries, changes)
    return Plan("suspect" if suspect else "revert", tuple(changes), tuple(skipped), edits, flips)


def restore_blocker(
    e: Entry,
    *,
    include_suspects: bool,
    force: bool,
    require_evidence: bool,
    verdict: str | None,
) -> str | None:
    """Why ``e`` must not be restored under these flags, or None if it may be."""
    if e.suspected and not include_suspects:
        return (
            f"under suspicion ({e.suspect_why or 'no hypothesis given'}); "
            "`ledger clear` it or pass --include-suspects"
        )
    if verdict == "regression" and not force:
        return "its evidence says regression; pass --force to restore it anyway"
    if require_evidence and verdict not in ("gain",):
        return f"no gain shown by evidence ({verdict or 'no evidence'}); --require-evidence"
    return None


def restore_flags(e: Entry, verdict: str | None) -> tuple[str, ...]:
    """The flags `ledger restore ID` needs to bring ``e`` back past every blocker above."""
    flags = []
    if restore_blocker(e, include_suspects=False, force=True, require_evidence=False,
                       verdict=verdict):
        flags.append("--include-suspects")
    if restore_blocker(e, include_suspects=True, force=False, require_evidence=False,
                       verdict=verdict):
        flags.append("--force")
    return tuple(flags)


def plan_restore(
    entries: Sequence[Entry],
    selected: Sequence[Entry],
    *,
    why: str,
    at: str,
    command: str,
    explicit: bool,
    include_suspects: bool = False,
    force: bool = False,
    require_evidence: bool = False,
    verdicts: Mapping[str, str | None] | None = None,
    when: str = "",
) -> Plan:
    """Re-apply ``selected`` entries that are reverted and allowed back (rules above)."""
    changes = []
    skipped = []
    refused = []
    actions: dict[str, Action] = {}
    for e in selected:
        if e.applied:
            skipped.append(Skip(e, "already applied"))
            continue
        blocker = restore_blocker(
            e,
            include_suspects=include_suspects,
            force=force,
            require_evidence=require_evidence,
            verdict=(verdicts or {}).get(e.id),
        )
        if blocker:
            (refused if explicit else skipped).append(Skip(e, blocker))
            continue
        # Without a reason given, a cleared suspect comes back for the reason it was cleared.
        reason = why or (f"cleared: {e.clear_why}" if e.suspicion == "cleared" else "")
        if reason not in actions:  # one action per reason, shared by the entries it restores
            actions[reason] = Action(at=at, action="restore", why=reason, command=command,
                                     when=when)
        changes.append((e, e.with_action(actions[reason], state="applied")))
    if refused:
        lines = "\n  ".join(f"{s.entry.id} {s.entry.title}: {s.reason}" for s in refused)
        raise Refused(f"not restoring:\n  {lines}")
    edits, flips = _effects(entries, changes)
    return Plan("restore", tuple(changes), tuple(skipped), edits, flips)


def plan_clear(entry: Entry, *, why: str, at: str, command: str, when: str = "") -> Plan:
    """Exonerate a suspect.  The entry stays reverted: clearing is not restoring."""
    if not entry.suspected:
        raise Refused(f"entry {entry.id} ({entry.title}) is not under suspicion")
    new = entry.with_action(
        Action(at=at, action="clear", why=why, command=command, when=when),
        suspicion="cleared", clear_why=why,
    )
    return Plan("clear", ((entry, new),))


# `ledger amend --of KIND`: the entry field holding the reason each kind of action gave.
AMENDABLE = {"record": "why", "adopt": "why", "suspect": "suspect_why", "clear": "clear_why",
             "revert": "revert_why"}


def plan_amend(entry: Entry, *, why: str, of: str | None, at: str, command: str,
               when: str = "") -> Plan:
    """Replace a reason typed wrong: the record's why, the suspect's hypothesis, the
    clear's reason or the latest revert's (``of``; default: the latest of them the entry
    has); and/or, with ``when``, the date that action happened (a ``--when`` typed wrong
    or never given).  History keeps what was there: an ``amend`` action holds the old
    text and the old date.  A date changes the action's ``when`` in place (history is
    ordered by it), never its ``at`` (when the ledger recorded it)."""
    kinds = [a.action for a in entry.history if a.action in AMENDABLE or a.action == "adopt"]
    kinds = ["record" if k == "adopt" else k for k in kinds]
    kind = of or (kinds[-1] if kinds else "record")
    if kind not in AMENDABLE:
        raise UsageError(f"--of {kind!r}: amend the reason of record, suspect, clear or revert")
    if of is not None and of not in kinds:
        raise Refused(f"entry {entry.id} ({entry.title}) has no {of} to amend "
                      f"(its history: {', '.join(a.action for a in entry.history)})")
    notes, changes, history = [], {}, entry.history
    if why:
        field_name = AMENDABLE[kind]
        old = _last_revert_why(entry) if kind == "revert" else getattr(entry, field_name)
        if old == why:
            raise Refused(f"entry {entry.id}: the {kind} reason already reads {why!r}")
        notes.append(f"{kind} reason amended; it was: {old!r}" if old else f"{kind} reason added")
        changes[field_name] = why
    if when:
        acts = ("record", "adopt") if kind == "record" else (kind,)
        index = max((i for i, a in enumerate(history) if a.action in acts), default=None)
        if index is None:
            raise Refused(f"entry {entry.id} ({entry.title}) has no {kind} to date")
        old_when = history[index].happened
        if history[index].when == when:
            raise Refused(f"entry {entry.id}: the {kind} is already dated {when}")
        history = history[:index] + (replace(history[index], when=when),) + history[index + 1:]
        notes.append(f"{kind} date amended to {when}; it was: {old_when}")
    if not notes:
        raise UsageError("amend needs --why (the reason as it should read) or --when (the "
                         "date as it should read)")
    dated = replace(entry, history=history) if history is not entry.history else entry
    new = dated.with_action(Action(at=at, action="amend", why="; ".join(notes),
                                   command=command), **changes)
    return Plan("amend", ((entry, new),))


def _last_revert_why(entry: Entry) -> str:
    """The reason the entry's latest revert shows (an earlier amend of it included)."""
    last = [a for a in entry.history if a.action == "revert"][-1]
    shown = revert_reason(entry)
    return shown if revert_action(entry) is last else last.why


def plan_states(entries: Sequence[Entry], wanted: Mapping[str, bool], op: str = "bisect") -> Plan:
    """Set entries applied (True) or reverted (False) by id, *without* a history line.

    For temporary configurations (a bisect's probes): the toggle is recorded by the
    bisect's own record, and the entries end as they started, so their history must not
    grow by two lines per probe.  Entries not in ``wanted`` keep their state.
    """
    changes = [
        (e, replace(e, state="applied" if wanted[e.id] else "reverted"))
        for e in sorted(entries, key=lambda e: e.seq)
        if e.id in wanted and e.applied != wanted[e.id]
    ]
    edits, flips = _effects(entries, changes)
    return Plan(op, tuple(changes), (), edits, flips)


def next_seq(entries: Iterable[Entry]) -> int:
    return max((e.seq for e in entries), default=0) + 1


def unique_slug(entries: Iterable[Entry], slug: str) -> str:
    taken = {e.slug for e in entries}
    if slug not in taken:
        return slug
    n = 2
    while f"{slug}-{n}" in taken:
        n += 1
    return f"{slug}-{n}"


__all__ = [
    "AMENDABLE",
    "Plan",
    "Skip",
    "next_seq",
    "plan_amend",
    "plan_clear",
    "plan_record",
    "plan_restore",
    "plan_revert",
    "plan_states",
    "restore_blocker",
    "restore_flags",
    "select",
    "unique_slug",
]
