"""Places of a knob in a target file, and how an edit selects among them.

A knob can have more than one *place* that takes effect: an ``export`` in each branch of
an ``if``, a ``K=V`` prefix on each of two launch lines, a flag on the prefill and on the
decode command.  Formats that can tell (``bash``) report them as :class:`Place` records,
and an edit of such a knob must say which: ``at=LINE`` (one place) or ``at=ALL`` (every
place).  Without a selection the edit raises :class:`AmbiguousKnob`, which names every
place; the ledger turns it into ``error: ... serve.sh:12, serve.sh:20 ... --at LINE /
--all``.  Nothing is ever picked silently.

A place's ``key`` (``launch 2``, ``at 1``) identifies it while the file changes elsewhere
(lines move, keys do not), so an entry can record the places it changed and a revert can
touch exactly those; ``raw`` is the place's exact source text, which a revert writes back
so that the file comes back byte for byte.
"""

from __future__ import annotations

from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from functools import cached_property
from typing import Any

from envknobs.formats.common import FormatError

ALL = "all"  # at=ALL: every place of the knob


@dataclass(frozen=True)
class Place:
    """One spot of a file where a knob gets its value (or is unset)."""

    knob: str
    key: str  # stable within the file: "launch N" or "at N"
    line: int
    kind: str  # export | assign | declare | unset | prefix | docker-env | flag | array-flag
    scope: str  # "top level", "if (line 4)", "case (line 10) > function (line 3)", ...
    value: str | None  # None: unset here, or computed by the shell
    computed: bool
    launch: int | None  # the launch command (1-based) it is written on, if any
    raw: str  # the exact source text of the place
    anchor: dict[str, Any] | None = None  # where a removed launch word goes back
    seen_by: tuple[int, ...] = ()  # the launches (1-based; 0: the end of the script) it reaches
    # a computed value's shell text (``${MEM_FRACTION_STATIC}``): the value the ledger
    # records for it, so a revert writes those bytes back (None: static, or no one word)
    expr: str | None = None

    def where(self, path: str | None = None) -> str:
        return f"{path}:{self.line}" if path else f"line {self.line}"

    def describe(self, path: str | None = None) -> str:
        """``serve.sh:12 (if (line 10), export K=1)``: a place in an error or a table."""
        return f"{self.where(path)} ({self.scope}: {self.raw.strip()})"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("anchor")
        return out


@dataclass(frozen=True)
class PlaceEdit:
    """Set (``value``) or unset (None) one place, addressed by key.

    ``raw``: the exact text to write back (a revert), used when it reads as ``value``.
    ``anchor``: where to put a launch word back that is no longer in the file.
    """

    key: str
    value: str | None
    raw: str | None = None
    anchor: dict[str, Any] | None = None


@dataclass(frozen=True)
class KnobSummary:
    """What a format sees of one knob: its places and whether one value holds."""

    knob: str
    places: tuple[Place, ...]
    conditional: bool  # the value depends on a branch: no single static value
    repeated: bool  # several places, each taking effect (several launch lines)
    is_flag: bool = False
    absent_on: tuple[int, ...] = ()  # launches that, on some path, see no place at all

    @property
    def value(self) -> str | None:
        """The static value when there is exactly one, else None."""
        if self.conditional or len(self.places) != 1:
            return None
        return self.places[0].value

    @property
    def computed(self) -> bool:
        return any(p.computed for p in self.places)

    @property
    def on_launch(self) -> bool:
        return any(p.launch is not None or p.kind == "array-flag" for p in self.places)

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(p.line for p in self.places)

    @property
    def needs_selection(self) -> bool:
        return self.conditional or len(self.places) > 1

    @property
    def state(self) -> str:
        """``conditional``, ``repeated``, ``computed`` or ``static``."""
        if self.conditional:
            return "conditional"
        if self.repeated:
            return "repeated"
        return "computed" if self.computed else "static"

    def to_dict(self) -> dict[str, Any]:
        return {
            "knob": self.knob,
            "flag": self.is_flag,
            "state": self.state,
            "value": self.value,
            "conditional": self.conditional,
            "repeated": self.repeated,
            "computed": self.computed,
            "on_launch": self.on_launch,
            "absent_on": list(self.absent_on),
            "places": [p.to_dict() for p in self.places],
        }


@dataclass(frozen=True)
class LaunchInfo:
    """One launch command of a script."""

    ordinal: int
    line: int
    end_line: int
    engine: str | None
    docker: bool
    env_files: tuple[tuple[str | None, int], ...] = ()  # (--env-file path, line)
    opaque: tuple[str, ...] = ()  # argument words the ledger cannot see into ("$@", $EXTRA)
    reached: bool = True
    container: str = ""  # the wrapper whose own env options are the server's (apptainer --cleanenv)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Summary:
    """What a format sees in a whole file: ``ledger target show``."""

    knobs: tuple[KnobSummary, ...]
    launches: tuple[LaunchInfo, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def get(self, knob: str) -> KnobSummary | None:
        return self._by_name.get(knob)

    @cached_property
    def _by_name(self) -> dict[str, KnobSummary]:
        """Each knob by name (a status of 10,000 entries asks 10,000 times)."""
        out: dict[str, KnobSummary] = {}
        for k in self.knobs:
            out.setdefault(k.knob, k)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "knobs": [k.to_dict() for k in self.knobs],
            "launches": [launch.to_dict() for launch in self.launches],
            "notes": list(self.notes),
        }


class AmbiguousKnob(FormatError):
    """An edit would have to pick one of several places: it names them all instead."""

    def __init__(
        self, knob: str, places: tuple[Place, ...] | list[Place], action: str, reason: str,
        candidates: tuple[int, ...] = (),
    ) -> None:
        self.knob, self.places, self.action, self.reason = knob, tuple(places), action, reason
        self.candidates = candidates  # launch lines a new place could go on
        super().__init__(self.describe())

    def describe(self, path: str | None = None) -> str:
        """The message, with each place as ``path:line`` when ``path`` is given."""
        if self.places:
            listed = "; ".join(p.describe(path) for p in self.places)
            where = f"{self.knob} {self.reason}: {listed}"
        else:
            lines = ", ".join(f"{path}:{n}" if path else f"line {n}" for n in self.candidates)
            where = f"{self.knob} {self.reason}: {lines}"
        return (
            f"{where}. Not picking one: select a place with --at LINE, "
            f"or {self.action} every place with --all"
        )
