"""Ledger records: entries, their history, and the workspace configuration.

These are plain dataclasses with validation in ``__post_init__``; they know how to turn
themselves into the mappings stored in YAML (``to_dict``) and back (``from_dict``), and
nothing about files, git or the clock.

An entry is one recorded change, classified ``perf`` or ``bugfix``:

* a *knob entry* sets ``knob`` in ``target`` from ``before`` to ``after`` (either may be
  ``None``: unset);
* a *patch entry* applies the unified diff stored at ``patch`` (with its ``sha256``) to
  the engine repo;
* an *upgrade entry* moves the engine release ``target``'s file runs from ``before`` to
  ``after`` (``vllm==0.30.0`` -> ``vllm==0.34.0``): its ``knob`` is :data:`RELEASE_KNOB`,
  so it layers, reverts and restores like a knob (the file's image tags / pins are
  rewritten, :mod:`envknobs.release_spots`); ``plan`` holds the upgrade plan of that target
  as ``ledger upgrade plan --json`` gives it (its rows: removed / renamed / deprecated
  names, moved defaults, ...) and ``body`` the same as markdown (see
  :mod:`ledger.core.upgrade`).

``state`` is ``applied`` or ``reverted``.  ``suspicion`` is ``None``, ``suspected``
(reverted because it was suspected of causing an incident; ``suspect_why`` holds the
hypothesis) or ``cleared`` (exonerated; ``clear_why`` holds the reason).  ``seq`` is the
record order, which is what knob layering and the patch stack follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import MISSING
from dataclasses import field
from dataclasses import fields
from typing import Any
from typing import Callable
from typing import Mapping

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value
from ledger.core.service import Service
from ledger.errors import InvalidValue
from ledger.values import FLAG_ENGINES
from ledger.values import FORMATS

CLASSES = ("perf", "bugfix")
KINDS = ("knob", "patch", "upgrade")
# The layer key of upgrade entries: no format has a knob of that name (a space in it).
RELEASE_KNOB = "engine release"
STATES = ("applied", "reverted")
SUSPICIONS = ("suspected", "cleared")
# restart: a --restart restarted the entry's service (with the health result);
# rollback: a failed health check (or an interrupted restart) put the entry back.
ACTIONS = ("record", "adopt", "revert", "restore", "suspect", "clear", "restart", "rollback",
           "amend", "bake")

# Target names and entry ids name files (patches/<id>.patch, evidence/<id>/,
# entries/<id>.md) and URL fragments: no separators, no leading dot, nothing a shell or a
# URL would need to quote.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


# A knob at one place of a file ("CUDA_VISIBLE_DEVICES@launch 2"): the layer key of
# entries recorded with --at/--all.  '@' is in no env knob or flag name.
PLACE_SEP = "@"


def place_knob(knob: str, key: str) -> str:
    return f"{knob}{PLACE_SEP}{key}"


def split_place(knob: str) -> tuple[str, str | None]:
    """``(knob, place key)`` of a layer key; the key is None for a whole knob."""
    name, sep, key = knob.partition(PLACE_SEP)
    return name, (key if sep else None)


def check_entry_knob(name: str) -> str:
    """A knob entry's name: an env variable (``SGLANG_X``), a launch flag
    (``--cuda-graph-max-bs``), or a key of a YAML map (``mem-fraction-static``)."""
    if is_flag_name(name):
        return check_flag_name(name)
    try:
        return check_knob_name(name)
    except KnobError:
        from envknobs.formats.yaml.keys import check_key_name

        return check_key_name(name)


def check_class(value: str) -> str:
    if value not in CLASSES:
        raise InvalidValue(f"invalid class {value!r}: use perf or bugfix")
    return value


def _check_name(what: str, value: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise InvalidValue(
            f"invalid {what} {value!r}: use letters, digits, '.', '_' and '-' "
            "(at most 64, starting with a letter or digit)"
        )
    return value


def check_target_name(name: str) -> str:
    return _check_name("target name", name)


def check_entry_id(entry_id: str) -> str:
    """Return ``entry_id`` if it is a well-formed entry id (it can name a file), else raise."""
    return _check_name("entry id", entry_id)


def slugify(title: str, limit: int = 48) -> str:
    """A short lowercase slug for addressing an entry: 'Raise CTAS to 512' -> 'raise-ctas-to-512'."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return slug[:limit].rstrip("-") or "entry"


@dataclass(frozen=True)
class Action:
    """One line of an entry's history: what was done, when, and why."""

    at: str
    action: str
    why: str = ""
    # The workspace command that did it, e.g. "revert --perf-only".
    command: str = ""
    # When it really happened, where that is not ``at`` (``--when``, a commit's date, a
    # backup's): history is ordered by it (ledger.core.when).  "" for "at ``at``".
    when: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise InvalidValue(f"unknown history action {self.action!r}")

    @property
    def happened(self) -> str:
        """When the action happened: ``when`` where given, else ``at``."""
        return self.when or self.at

    def to_dict(self) -> dict[str, Any]:
        d = {"at": self.at, "action": self.action, "why": self.why, "command": self.command}
        if self.when:  # absent otherwise: ledgers without real dates keep their bytes
            d["when"] = self.when
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Action":
        at, action = _text(d["at"]), _text(d["action"])
        why, command, when = d.get("why"), d.get("command"), d.get("when")
        return _built(cls, {
            "at": at,
            "action": action,
            "why": why if type(why) is str else str(why or ""),
            "command": command if type(command) is str else str(command or ""),
            "when": when if type(when) is str else str(when or ""),
        })


def _text(value: Any) -> str:
    return value if type(value) is str else str(value)


# Entry fields read from JSON as text: "" when absent / None when absent.
_TEXT_OR_EMPTY = ("why", "suspect_why", "clear_why", "revert_why", "body")
_TEXT_OR_NONE = ("suspicion", "target", "knob", "before", "after", "at", "before_source",
                 "after_source", "before_lines", "after_lines", "patch", "sha256", "commit",
                 "origin")


def _built(cls, values: dict[str, Any]):
    """An instance of frozen dataclass ``cls`` from every one of its fields, validated by
    its ``__post_init__`` like ``cls(**values)``.

    The path of reading ``entries.jsonl`` (10,000 entries in a command) and of a revert
    (thousands of ``with_action``): a frozen dataclass's ``__init__`` sets each field
    through ``object.__setattr__``; with that skipped and ``from_dict``'s conversions
    done only where a value is not text already, building 10,000 entries costs 40% less
    (0.117 -> 0.07 s of CPU here).  ``values`` names every field but those left at
    their default (``from_dict`` names all; ``with_action`` those of the entry it
    copies; a test holds them to that).

    The instance's ``__dict__`` leaves out the values that are their field's default
    object itself (``None``, the empty string, the empty tuple — what most fields of
    most entries hold): such a field reads the class attribute the dataclass keeps its
    default in (the fields with a ``default_factory`` have none, and are always held).
    An entry sets a dozen of its thirty fields, so the cached ledger (pickled instances,
    see ``ledger.store.cache``) holds a third of the items and loads twice as fast;
    reading, comparing, hashing and ``dataclasses.replace`` go through the attributes
    and see no difference.  (An identity test: an equal value that is another object,
    a ``"applied"`` read from JSON, is simply held.)"""
    obj = object.__new__(cls)
    default = _DEFAULTS.get(cls)
    if default is None:
        default = _DEFAULTS[cls] = {f.name: f.default for f in fields(cls)
                                    if f.default is not MISSING}.get
    obj.__dict__.update({k: v for k, v in values.items() if v is not default(k, _HELD)})
    obj.__post_init__()
    return obj


_DEFAULTS: dict[type, Callable[[str, Any], Any]] = {}  # class -> its defaults' ``get``
_HELD = object()  # the "default" of a field without one: never a value


@dataclass(frozen=True)
class Entry:
    id: str
    seq: int
    kind: str
    cls: str
    title: str
    slug: str
    recorded: str
    state: str = "applied"
    why: str = ""
    suspicion: str | None = None
    suspect_why: str = ""
    clear_why: str = ""
    # the latest revert's reason as `ledger amend --of revert` corrected it ("": as the
    # revert action says; see ledger.core.display.revert_reason)
    revert_why: str = ""
    # knob entries
    target: str | None = None
    knob: str | None = None
    before: str | None = None
    after: str | None = None
    # where the knob's line sits, to put it back there (see ledger.core.layout)
    anchor: dict | None = None
    # the places changed when a selection was given (record --at LINE / --all): place key
    # -> {"line": at record time, "before": value there, "raw": its exact text, "anchor"}
    places: dict[str, dict] | None = None
    at: str | None = None  # the selection as given: "all" or a line number
    # one change across several targets (``record knob decode,prefill K=V``): the other
    # targets (by name: stored JSON sorts its keys) -> that target's own "before", "anchor" and exact texts
    # ("before_source", "after_source", "before_lines", "after_lines"); the fields above
    # are the first target's.  One entry, one id: reverted and restored together.
    also: dict[str, dict] | None = None
    # the exact text of the value before / after (formats that keep it: k8s, yaml-map), so
    # a revert or restore writes those bytes back rather than a re-rendering of the value
    before_source: str | None = None
    after_source: str | None = None
    # the knob's exact lines when the change removes it (before) or adds it (after), so
    # re-adding it puts those lines back (an `env:` list written in the file's own style)
    before_lines: str | None = None
    after_lines: str | None = None
    # patch entries
    patch: str | None = None
    sha256: str | None = None
    files: tuple[str, ...] = ()
    commit: str | None = None
    # where the ledger learned of a change made before it knew (``ledger adopt``): the
    # backup copies or the deploy-repo commit it was read from; None for the others
    origin: str | None = None
    # upgrade entries: the plan of the upgrade for the target (JSON, ledger.core.upgrade)
    # and the same as markdown (what `show` and the rendered docs print)
    plan: dict | None = None
    body: str = ""
    history: tuple[Action, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        check_entry_id(self.id)
        if self.kind not in KINDS:
            raise InvalidValue(f"entry {self.id}: unknown kind {self.kind!r}")
        check_class(self.cls)
        if self.state not in STATES:
            raise InvalidValue(f"entry {self.id}: unknown state {self.state!r}")
        if self.suspicion is not None and self.suspicion not in SUSPICIONS:
            raise InvalidValue(f"entry {self.id}: unknown suspicion {self.suspicion!r}")
        if not self.title.strip():
            raise InvalidValue(f"entry {self.id}: the title is empty")
        if self.kind == "knob":
            if not self.target or not self.knob:
                raise InvalidValue(f"entry {self.id}: a knob entry needs a target and a knob")
            try:
                check_entry_knob(split_place(self.knob)[0])
                for v in (self.before, self.after):
                    if v is not None:
                        check_knob_value(v)
            except KnobError as e:
                raise InvalidValue(f"entry {self.id}: {e}") from None
            if self.also is not None:
                self._check_also()
            if self.places is not None:
                self._check_places()
            elif self.before == self.after:
                raise InvalidValue(
                    f"entry {self.id}: {self.knob} before and after are the same "
                    f"({'unset' if self.after is None else repr(self.after)})"
                )
        elif self.kind == "upgrade":
            self._check_upgrade()
        else:
            if not self.patch or not self.sha256:
                raise InvalidValue(f"entry {self.id}: a patch entry needs a patch file and sha256")

    def _check_upgrade(self) -> None:
        if not self.target or self.knob != RELEASE_KNOB:
            raise InvalidValue(f"entry {self.id}: an upgrade entry needs a target (and its "
                               f"knob is {RELEASE_KNOB!r})")
        specs = (str(self.before), str(self.after))
        if not all(ENGINE_SPEC_RE.match(v) for v in specs):
            raise InvalidValue(f"entry {self.id}: an upgrade goes from one release to another, "
                               f"written sglang==X or vllm==X (got {specs[0]!r} -> {specs[1]!r})")
        if specs[0].split("==")[0] != specs[1].split("==")[0] or specs[0] == specs[1]:
            raise InvalidValue(f"entry {self.id}: an upgrade goes to another release of the "
                               f"same engine (got {specs[0]} -> {specs[1]})")

    def _check_also(self) -> None:
        if not isinstance(self.also, dict) or not self.also or self.places is not None:
            raise InvalidValue(f"entry {self.id}: 'also' must be a non-empty mapping of "
                               "other targets (and goes without places)")
        for name, other in self.also.items():
            check_target_name(name)
            if name == self.target or not isinstance(other, dict):
                raise InvalidValue(f"entry {self.id}: target {name} is named twice")
            if other.get("before") == self.after:
                raise InvalidValue(
                    f"entry {self.id}: {self.knob} in {name} is already "
                    f"{'unset' if self.after is None else repr(self.after)}")

    @property
    def targets(self) -> tuple[str, ...]:
        """Every target the entry changes, the first one first."""
        return (str(self.target), *sorted(self.also or ())) if self.target else ()

    def _check_places(self) -> None:
        if not isinstance(self.places, dict) or not self.places:
            raise InvalidValue(f"entry {self.id}: places must be a non-empty mapping")
        for key, place in self.places.items():
            if not isinstance(key, str) or not isinstance(place, dict):
                raise InvalidValue(f"entry {self.id}: a place is a key and a mapping")
            if place.get("before") == self.after:
                raise InvalidValue(
                    f"entry {self.id}: {self.knob} at {key} is already "
                    f"{'unset' if self.after is None else repr(self.after)}"
                )

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
        of entries makes thousands of these)."""
        unknown = sorted(set(changes) - _ENTRY_FIELDS | ({"history"} & set(changes)))
        if unknown:
            raise TypeError(f"with_action() cannot change {', '.join(unknown)}")
        return _built(type(self), {**vars(self), **changes, "history": self.history + (action,)})

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
        if self.kind == "knob":
            d.update(target=self.target, knob=self.knob, before=self.before, after=self.after)
            if self.anchor is not None:
                d["anchor"] = self.anchor
            if self.places is not None:
                d["places"] = self.places
                d["at"] = self.at
            if self.also is not None:
                d["also"] = self.also
            for key in ("before_source", "after_source", "before_lines", "after_lines"):
                if getattr(self, key) is not None:
                    d[key] = getattr(self, key)
        elif self.kind == "upgrade":
            d.update(target=self.target, knob=self.knob, before=self.before, after=self.after,
                     plan=self.plan, body=self.body)
        else:
            d.update(patch=self.patch, sha256=self.sha256, files=list(self.files), commit=self.commit)
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
            "id": _text(d["id"]), "seq": int(d["seq"]), "kind": _text(d["kind"]),
            "cls": _text(d["class"]), "title": _text(d["title"]),
            "recorded": _text(d["recorded"]), "state": _text(get("state", "applied")),
        }
        values["slug"] = _text(get("slug") or slugify(values["title"]))
        for key in _TEXT_OR_EMPTY:
            v = get(key)
            values[key] = v if type(v) is str else str(v or "")
        for key in _TEXT_OR_NONE:
            v = get(key)
            values[key] = v if v is None or type(v) is str else str(v)
        anchor, places = get("anchor"), get("places")
        values["anchor"] = anchor if isinstance(anchor, dict) else None
        values["places"] = dict(places) if isinstance(places, dict) else None
        also = get("also")
        values["also"] = dict(also) if isinstance(also, dict) else None
        plan = get("plan")
        values["plan"] = plan if isinstance(plan, dict) else None
        values["files"] = tuple(map(_text, get("files") or ()))
        history = get("history") or ()
        values["history"] = tuple(map(Action.from_dict, history)) if shared is None else \
            tuple(_shared_action(a, shared) for a in history)
        return _built(cls, values)


_ENTRY_FIELDS = frozenset(f.name for f in fields(Entry))


def _shared_action(d: Mapping[str, Any], shared: dict) -> Action:
    """``Action.from_dict(d)``, built once per distinct JSON object (its items, as read)
    and once per distinct action: ``shared`` holds both (a tuple of items and an action
    are never equal)."""
    try:
        key = tuple(d.items())
        found = shared.get(key)
    except TypeError:  # an unhashable value: built (and refused) as it is
        key = found = None
    if found is None:
        action = Action.from_dict(d)
        found = shared.setdefault(action, action)
        if key is not None:
            shared[key] = found
    return found


ENGINE_SPEC_RE = re.compile(r"(sglang|vllm|knob-ledger-engine)==[0-9][A-Za-z0-9.+-]*\Z")


@dataclass(frozen=True)
class Target:
    """A config file under management."""

    name: str
    path: str  # as written in ledger.yaml: absolute, or relative to the workspace
    format: str
    container: str | None = None  # k8s: the address of the container whose env list
    key_path: str | None = None  # yaml-map: where the map is (None: the whole file)
    flags: str | None = None  # yaml-map: the keys are this engine's server flags (--config)
    # the running service behind the file: live probe, restart, health (ledger.core.service)
    service: Service | None = None
    # the engine release that reads the file, ``sglang==0.5.23``: knobs are checked
    # against that release's generated catalog (envknobs.catalog_release)
    engine: str | None = None

    def __post_init__(self) -> None:
        check_target_name(self.name)
        if self.engine is not None and not ENGINE_SPEC_RE.match(str(self.engine)):
            raise InvalidValue(
                f"target {self.name}: engine {self.engine!r}: write it as sglang==X or vllm==X"
            )
        if self.format not in FORMATS:
            raise InvalidValue(
                f"target {self.name}: unknown format {self.format!r} (use {', '.join(FORMATS)})"
            )
        if self.format == "k8s" and not self.container:
            raise InvalidValue(f"target {self.name}: a k8s target needs --container")
        if self.format != "k8s" and self.container:
            raise InvalidValue(f"target {self.name}: --container is for k8s targets only")
        if self.format not in ("yaml-map", "bash") and self.key_path or \
                self.format != "yaml-map" and self.flags:
            raise InvalidValue(  # a bash key path: the script in a YAML file (SkyPilot run:)
                f"target {self.name}: --key-path is for yaml-map and bash targets, "
                "--flags for yaml-map targets only"
            )
        if self.flags is not None and self.flags not in FLAG_ENGINES:
            raise InvalidValue(
                f"target {self.name}: unknown --flags {self.flags!r} "
                f"(use {', '.join(FLAG_ENGINES)})"
            )

    def to_dict(self) -> dict[str, Any]:
        d = {"path": self.path, "format": self.format}
        for key in ("container", "key_path", "flags", "engine"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.service is not None:
            d.update(self.service.to_dict())
        return d


__all__ = [
    "Action",
    "Entry",
    "Target",
    "CLASSES",
    "KINDS",
    "STATES",
    "FLAG_ENGINES",
    "FORMATS",
    "PLACE_SEP",
    "RELEASE_KNOB",
    "check_class",
    "check_entry_knob",
    "check_target_name",
    "place_knob",
    "split_place",
    "slugify",
]
