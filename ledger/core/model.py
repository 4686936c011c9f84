"""Ledger records: an entry, its change and its history.

An entry is one recorded change, classified ``perf`` or ``bugfix``; what it changes is a
typed record of its kind (:mod:`ledger.core.changes`): a knob (:class:`KnobChange`), a
patch of the engine (:class:`PatchChange`) or an engine upgrade (:class:`UpgradeChange`).
The change's attributes read through the entry (``e.target``, ``e.knob``, ``e.patch``:
``None``, ``()`` or ``""`` where the entry's kind has no such field), and the entry is
still made, replaced and stored as one flat record: ``Entry(kind="knob", target=...,
knob=...)``, ``dataclasses.replace(e, before=...)`` and ``to_dict`` / ``from_dict`` (the
stored form, key for key and byte for byte what it was before the change was typed).

``state`` is ``applied`` or ``reverted``.  ``suspicion`` is ``None``, ``suspected``
(reverted because it was suspected of causing an incident; ``suspect_why`` holds the
hypothesis) or ``cleared`` (exonerated; ``clear_why`` holds the reason).  ``seq`` is the
record order, which is what knob layering and the patch stack follow.  Plain frozen
dataclasses, validated in ``__post_init__``; nothing about files, git or the clock.
"""

from __future__ import annotations

from dataclasses import MISSING
from dataclasses import dataclass
from dataclasses import field
from dataclasses import fields
from typing import Any
from typing import Mapping

from ledger.core.action import Action
from ledger.core.action import shared_action
from ledger.core.changes import CHANGES
from ledger.core.changes import Change
from ledger.core.frozen import built
from ledger.core.frozen import text_of
from ledger.core.identifiers import check_class
from ledger.core.identifiers import check_entry_id
from ledger.core.identifiers import slugify
from ledger.errors import InvalidValue

KINDS = tuple(CHANGES)
STATES = ("applied", "reverted")
SUSPICIONS = ("suspected", "cleared")

# Entry fields read from JSON as text ("" when absent).
_TEXT_OR_EMPTY = ("why", "suspect_why", "clear_why", "revert_why")
# Each attribute of a change read through the entry, with what it reads where the entry's
# kind has no such field.
_CHANGE_DEFAULTS: dict[str, Any] = {
    "target": None, "knob": None, "before": None, "after": None, "anchor": None,
    "places": None, "at": None, "also": None, "before_source": None, "after_source": None,
    "before_lines": None, "after_lines": None, "patch": None, "sha256": None, "files": (),
    "commit": None, "plan": None, "body": ""}


class _OfChange:
    """An attribute of the entry's change, read through the entry (its default where the
    entry's kind has no such field)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.default = name, _CHANGE_DEFAULTS[name]

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj.change, self.name, self.default)


@dataclass(frozen=True, init=False)
class Entry:
    id: str
    seq: int
    kind: str
    cls: str
    title: str
    slug: str
    recorded: str
    change: Change | None  # None only for an unknown kind, which is refused
    state: str = "applied"
    why: str = ""
    suspicion: str | None = None
    suspect_why: str = ""
    clear_why: str = ""
    # the latest revert's reason as `ledger amend --of revert` corrected it ("": as the
    # revert action says; see ledger.core.display.revert_reason)
    revert_why: str = ""
    # where the ledger learned of a change made before it knew (``ledger adopt``): the
    # backup copies or the deploy-repo commit it was read from; None for the others
    origin: str | None = None
    history: tuple[Action, ...] = field(default_factory=tuple)

    # The change's attributes (see the module docstring).
    target = _OfChange()
    knob = _OfChange()
    before = _OfChange()
    after = _OfChange()
    anchor = _OfChange()
    places = _OfChange()
    at = _OfChange()
    also = _OfChange()
    before_source = _OfChange()
    after_source = _OfChange()
    before_lines = _OfChange()
    after_lines = _OfChange()
    patch = _OfChange()
    sha256 = _OfChange()
    files = _OfChange()
    commit = _OfChange()
    plan = _OfChange()
    body = _OfChange()

    def __init__(self, *, change: Change | None = None, **values: Any) -> None:
        """An entry from its fields, the change's given flat (``target=``, ``knob=``, ...)
        or as ``change`` (``dataclasses.replace`` gives both: the change, and the flat
        fields to change in it)."""
        flat = {k: values.pop(k) for k in list(values) if k in _CHANGE_DEFAULTS}
        unknown = sorted(set(values) - _ENTRY_FIELDS)
        if unknown:
            raise TypeError(f"Entry() got unexpected fields: {', '.join(unknown)}")
        values["change"] = _change_of(values.get("kind"), change, flat)
        for f in fields(self):
            if f.name in values:
                object.__setattr__(self, f.name, values[f.name])
            elif f.default_factory is not MISSING:
                object.__setattr__(self, f.name, f.default_factory())
            elif f.name not in _DEFAULTED:
                raise TypeError(f"Entry() missing field {f.name!r}")
        self.__post_init__()

    def __post_init__(self) -> None:
        check_entry_id(self.id)
        if self.kind not in KINDS or self.change is None:
            raise InvalidValue(f"entry {self.id}: unknown kind {self.kind!r}")
        check_class(self.cls)
        if self.state not in STATES:
            raise InvalidValue(f"entry {self.id}: unknown state {self.state!r}")
        if self.suspicion is not None and self.suspicion not in SUSPICIONS:
            raise InvalidValue(f"entry {self.id}: unknown suspicion {self.suspicion!r}")
        if not self.title.strip():
            raise InvalidValue(f"entry {self.id}: the title is empty")
        self.change.check(self.id)

    @property
    def targets(self) -> tuple[str, ...]:
        """Every target the entry changes, the first one first."""
        return (str(self.target), *sorted(self.also or ())) if self.target else ()

    @property
    def place_lines(self) -> tuple[int, ...]:
        """The lines of the places the entry changed (at record time)."""
        return tuple(int(p.get("line") or 0) for p in (self.places or {}).values())

    @property
    def applied(self) -> bool:
        return self.state == "applied"

    @property
    def suspected(self) -> bool:
        return self.suspicion == "suspected"

    @property
    def label(self) -> str:
        """What the entry changes, in one short phrase."""
        if self.kind == "upgrade":
            return f"{self.target}: {self.before} -> {self.after}"
        if self.kind == "knob":
            where = f" (line {', '.join(map(str, self.place_lines))})" if self.places else ""
            return f"{','.join(self.targets)}:{self.knob}{where}"
        return f"patch {', '.join(self.files) if self.files else self.patch}"

    def with_action(self, action: Action, **changes: Any) -> "Entry":
        """This entry with ``action`` appended to its history and ``changes`` made (like
        ``dataclasses.replace``, validated, at the fast path's cost: a revert of thousands
        of entries makes thousands of these).  Only the entry's own fields change here
        (its state and reasons), never its change."""
        unknown = sorted(set(changes) - _ENTRY_FIELDS | ({"history", "change"} & set(changes)))
        if unknown:
            raise TypeError(f"with_action() cannot change {', '.join(unknown)}")
        return built(type(self), {**vars(self), **changes, "history": self.history + (action,)})

    def last_action(self) -> Action | None:
        return self.history[-1] if self.history else None

    def timeline(self) -> list[Action]:
        """The history in the order things happened (real dates first, record order
        between equal times); ``history`` itself stays in record order."""
        return [a for _, a in sorted(enumerate(self.history),
                                     key=lambda ia: (ia[1].happened, ia[0]))]

    @property
    def made(self) -> str:
        """When the change was made: its first action's real time (else ``recorded``)."""
        return self.history[0].happened if self.history else self.recorded

    def to_dict(self) -> dict[str, Any]:
        d = self.fields_dict()
        d["history"] = [a.to_dict() for a in self.history]
        return d

    def fields_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` but the history (which it holds last)."""
        d: dict[str, Any] = {
            "id": self.id,
            "seq": self.seq,
            "kind": self.kind,
            "class": self.cls,
            "title": self.title,
            "slug": self.slug,
            "recorded": self.recorded,
            "state": self.state,
            "why": self.why,
            "suspicion": self.suspicion,
            "suspect_why": self.suspect_why,
            "clear_why": self.clear_why,
        }
        d.update(self.change.to_dict())  # type: ignore[union-attr]
        if self.origin is not None:  # absent otherwise: older ledgers keep their bytes
            d["origin"] = self.origin
        if self.revert_why:  # likewise
            d["revert_why"] = self.revert_why
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], shared: dict | None = None) -> "Entry":
        """An entry from its JSON object (what ``to_dict`` wrote): text fields are taken
        as text (a non-text value is converted, as ``str`` would), missing optional ones
        get their defaults, and the entry is validated (``__post_init__``).

        ``shared``: equal history actions already built, reused (actions are frozen): a
        bulk revert gives thousands of entries one and the same action, and the cached
        ledger then holds it once, not once per entry."""
        get = d.get
        values: dict[str, Any] = {
            "id": text_of(d["id"]), "seq": int(d["seq"]), "kind": text_of(d["kind"]),
            "cls": text_of(d["class"]), "title": text_of(d["title"]),
            "recorded": text_of(d["recorded"]), "state": text_of(get("state", "applied")),
        }
        values["slug"] = text_of(get("slug") or slugify(values["title"]))
        for key in _TEXT_OR_EMPTY:
            v = get(key)
            values[key] = v if type(v) is str else str(v or "")
        for key in ("suspicion", "origin"):
            v = get(key)
            values[key] = v if v is None or type(v) is str else str(v)
        kind = CHANGES.get(values["kind"])
        values["change"] = None if kind is None else kind.from_dict(d)
        history = get("history") or ()
        values["history"] = tuple(map(Action.from_dict, history)) if shared is None else \
            tuple(shared_action(a, shared) for a in history)
        return built(cls, values)


def _change_of(kind: Any, change: Change | None, flat: dict[str, Any]) -> Change | None:
    """The change of an entry of ``kind``: ``change`` with the ``flat`` fields changed in
    it, or made of them.  A field the kind has not is refused unless left at its default
    (``target=None`` on a patch entry says nothing)."""
    from dataclasses import replace

    made = CHANGES.get(kind) if isinstance(kind, str) else None
    if made is None:
        return None
    own = {f.name for f in fields(made)}
    stray = sorted(k for k, v in flat.items() if k not in own and v != _CHANGE_DEFAULTS[k])
    if stray:
        raise TypeError(f"a {kind} entry has no {', '.join(stray)}")
    flat = {k: v for k, v in flat.items() if k in own}
    if change is None:
        return made(**flat)
    if type(change) is not made:
        raise TypeError(f"a {kind} entry's change is a {made.__name__}, "
                        f"not a {type(change).__name__}")
    return replace(change, **flat) if flat else change


_ENTRY_FIELDS = frozenset(f.name for f in fields(Entry))
_DEFAULTED = frozenset(f.name for f in fields(Entry) if f.default is not MISSING)

__all__ = ["Entry", "KINDS", "STATES", "SUSPICIONS"]
