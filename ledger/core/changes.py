"""What an entry changes, one typed record per kind of entry.

* :class:`KnobChange`: ``knob`` in ``target`` from ``before`` to ``after`` (either may be
  ``None``: unset), with where its line sits and the exact texts to write back;
* :class:`PatchChange`: the unified diff stored at ``patch`` (with its ``sha256``),
  applied to the engine repo;
* :class:`UpgradeChange`: the engine release ``target``'s file runs, moved from ``before``
  to ``after`` (``vllm==0.30.0`` -> ``vllm==0.34.0``); its ``knob`` is
  :data:`~ledger.core.identifiers.RELEASE_KNOB`, so it layers, reverts and restores like a
  knob (the file's image tags / pins are rewritten, :mod:`envknobs.release_spots`).

Each knows its part of the stored entry: ``to_dict`` writes exactly the keys, in exactly
the order, that an entry of its kind has always had in ``entries.jsonl`` (so stored bytes
never change), and ``from_dict`` reads them back, taking text fields as text.  A change
is checked as part of its entry (:meth:`check`), so the messages name the entry.

The anchor, the places and the other targets' parts stay JSON mappings: they are the
position protocol of :mod:`ledger.core.layout` and of the formats
(``envknobs.formats.common.places``), which read and write them as such; the types here
say which mapping is which (:data:`Anchor`, :data:`Place`, :data:`OtherTarget`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from typing import ClassVar
from typing import Mapping

from envknobs.registry import KnobError
from envknobs.registry import check_knob_value
from ledger.core.frozen import built
from ledger.core.frozen import text_of
from ledger.core.identifiers import ENGINE_SPEC_RE
from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.identifiers import check_entry_knob
from ledger.core.identifiers import check_target_name
from ledger.core.identifiers import split_place
from ledger.errors import InvalidValue

# Where a knob's line sits, to put it back there (see ledger.core.layout): ``{"knob": K}``,
# ``{"lines": [...], "below": [...]}``, or ``{"place": {...}}`` at one place of a launch.
Anchor = dict
# One place changed by an entry recorded with --at LINE / --all: "line" (at record time),
# "before" (the value there), "raw" (its exact text) and its "anchor".
Place = dict
# Another target of a change across several (``record knob decode,prefill K=V``): its own
# "before", "anchor" and exact texts ("before_source", "after_source", "before_lines",
# "after_lines").
OtherTarget = dict

_EXACT_TEXTS = ("before_source", "after_source", "before_lines", "after_lines")
_KNOB_TEXTS = ("target", "knob", "before", "after", "at", *_EXACT_TEXTS)


def _text_or_none(value: Any) -> str | None:
    return value if value is None or type(value) is str else str(value)


def _unset_or(value: str | None) -> str:
    return "unset" if value is None else repr(value)


@dataclass(frozen=True)
class KnobChange:
    """A knob set, changed or removed in one target (or the same change in several)."""

    kind: ClassVar[str] = "knob"

    target: str | None = None
    knob: str | None = None
    before: str | None = None
    after: str | None = None
    anchor: Anchor | None = None
    # the places changed when a selection was given (record --at LINE / --all): place key
    # -> its Place
    places: dict[str, Place] | None = None
    at: str | None = None  # the selection as given: "all" or a line number
    # one change across several targets: the other targets (by name: stored JSON sorts
    # its keys) -> that target's own part; the fields above are the first target's.  One
    # entry, one id: reverted and restored together.
    also: dict[str, OtherTarget] | None = None
    # the exact text of the value before / after (formats that keep it: k8s, yaml-map), so
    # a revert or restore writes those bytes back rather than a re-rendering of the value
    before_source: str | None = None
    after_source: str | None = None
    # the knob's exact lines when the change removes it (before) or adds it (after), so
    # re-adding it puts those lines back (an `env:` list written in the file's own style)
    before_lines: str | None = None
    after_lines: str | None = None

    def check(self, entry_id: str) -> None:
        """Refuse a knob change the ledger cannot hold (messages name ``entry_id``)."""
        if not self.target or not self.knob:
            raise InvalidValue(f"entry {entry_id}: a knob entry needs a target and a knob")
        try:
            check_entry_knob(split_place(self.knob)[0])
            for v in (self.before, self.after):
                if v is not None:
                    check_knob_value(v)
        except KnobError as e:
            raise InvalidValue(f"entry {entry_id}: {e}") from None
        if self.also is not None:
            self._check_also(entry_id)
        if self.places is not None:
            self._check_places(entry_id)
        elif self.before == self.after:
            raise InvalidValue(f"entry {entry_id}: {self.knob} before and after are the same "
                               f"({_unset_or(self.after)})")

    def _check_also(self, entry_id: str) -> None:
        if not isinstance(self.also, dict) or not self.also or self.places is not None:
            raise InvalidValue(f"entry {entry_id}: 'also' must be a non-empty mapping of "
                               "other targets (and goes without places)")
        for name, other in self.also.items():
            check_target_name(name)
            if name == self.target or not isinstance(other, dict):
                raise InvalidValue(f"entry {entry_id}: target {name} is named twice")
            if other.get("before") == self.after:
                raise InvalidValue(f"entry {entry_id}: {self.knob} in {name} is already "
                                   f"{_unset_or(self.after)}")

    def _check_places(self, entry_id: str) -> None:
        if not isinstance(self.places, dict) or not self.places:
            raise InvalidValue(f"entry {entry_id}: places must be a non-empty mapping")
        for key, place in self.places.items():
            if not isinstance(key, str) or not isinstance(place, dict):
                raise InvalidValue(f"entry {entry_id}: a place is a key and a mapping")
            if place.get("before") == self.after:
                raise InvalidValue(f"entry {entry_id}: {self.knob} at {key} is already "
                                   f"{_unset_or(self.after)}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"target": self.target, "knob": self.knob, "before": self.before,
                             "after": self.after}
        if self.anchor is not None:
            d["anchor"] = self.anchor
        if self.places is not None:
            d["places"] = self.places
            d["at"] = self.at
        if self.also is not None:
            d["also"] = self.also
        for key in _EXACT_TEXTS:
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KnobChange":
        get = d.get
        values = {}
        for key in _KNOB_TEXTS:  # inlined: 10,000 entries read in a command
            v = get(key)
            values[key] = v if v is None or type(v) is str else str(v)
        anchor, places, also = get("anchor"), get("places"), get("also")
        values["anchor"] = anchor if isinstance(anchor, dict) else None
        values["places"] = dict(places) if isinstance(places, dict) else None
        values["also"] = dict(also) if isinstance(also, dict) else None
        return built(cls, values)


@dataclass(frozen=True)
class PatchChange:
    """A unified diff applied to the engine repo (or a commit of it adopted)."""

    kind: ClassVar[str] = "patch"

    patch: str | None = None
    sha256: str | None = None
    files: tuple[str, ...] = ()
    commit: str | None = None

    def check(self, entry_id: str) -> None:
        if not self.patch or not self.sha256:
            raise InvalidValue(f"entry {entry_id}: a patch entry needs a patch file and sha256")

    def to_dict(self) -> dict[str, Any]:
        return {"patch": self.patch, "sha256": self.sha256, "files": list(self.files),
                "commit": self.commit}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PatchChange":
        get = d.get
        return built(cls, {"patch": _text_or_none(get("patch")),
                           "sha256": _text_or_none(get("sha256")),
                           "files": tuple(map(text_of, get("files") or ())),
                           "commit": _text_or_none(get("commit"))})


@dataclass(frozen=True)
class UpgradeChange:
    """The engine release of a target's file, moved from one release to another.

    ``plan`` holds the upgrade plan of that target as ``ledger upgrade plan --json`` gives
    it (its rows: removed / renamed / deprecated names, moved defaults, ...) and ``body``
    the same as markdown (what `show` and the rendered docs print; see
    :mod:`ledger.core.upgrade`)."""

    kind: ClassVar[str] = "upgrade"

    target: str | None = None
    before: str | None = None
    after: str | None = None
    knob: str | None = None  # RELEASE_KNOB, checked
    plan: dict | None = None
    body: str = ""

    def check(self, entry_id: str) -> None:
        if not self.target or self.knob != RELEASE_KNOB:
            raise InvalidValue(f"entry {entry_id}: an upgrade entry needs a target (and its "
                               f"knob is {RELEASE_KNOB!r})")
        specs = (str(self.before), str(self.after))
        if not all(ENGINE_SPEC_RE.match(v) for v in specs):
            raise InvalidValue(f"entry {entry_id}: an upgrade goes from one release to "
                               "another, written sglang==X or vllm==X "
                               f"(got {specs[0]!r} -> {specs[1]!r})")
        if specs[0].split("==")[0] != specs[1].split("==")[0] or specs[0] == specs[1]:
            raise InvalidValue(f"entry {entry_id}: an upgrade goes to another release of the "
                               f"same engine (got {specs[0]} -> {specs[1]})")

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "knob": self.knob, "before": self.before,
                "after": self.after, "plan": self.plan, "body": self.body}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "UpgradeChange":
        get = d.get
        plan, body = get("plan"), get("body")
        return built(cls, {**{key: _text_or_none(get(key))
                              for key in ("target", "before", "after", "knob")},
                           "plan": plan if isinstance(plan, dict) else None,
                           "body": body if type(body) is str else str(body or "")})


Change = KnobChange | PatchChange | UpgradeChange
CHANGES: dict[str, type[KnobChange] | type[PatchChange] | type[UpgradeChange]] = {
    c.kind: c for c in (KnobChange, PatchChange, UpgradeChange)}

__all__ = ["Anchor", "CHANGES", "Change", "KnobChange", "OtherTarget", "PatchChange", "Place",
           "UpgradeChange"]
