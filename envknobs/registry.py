"""The knob registry: what an environment knob is, and how its values are checked.

A :class:`Knob` declares one environment variable a serving engine reads: its name,
type, default, allowed range or choices, whether changing it is usually a ``perf`` or
a ``bugfix`` change (the *class hint*), and a one-line doc.  Catalogs of knobs live as
YAML data files in ``envknobs/catalogs/`` (see :mod:`envknobs.catalog`); the bundled
engine declares its own knobs in code through :class:`Registry` and the same data
types, so the ledger and the engine agree on what a valid value is.

This module has no dependency on the ledger or the engine: both import it.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Callable
from typing import Iterable
from typing import Iterator
from typing import Mapping

KNOB_TYPES = ("int", "float", "bool", "str")
CLASS_HINTS = ("perf", "bugfix")

# POSIX environment variable names as a shell accepts them in `export K=V`.
KNOB_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# SGLang's parsing of booleans (environ.py): case-insensitive.
TRUE_WORDS = frozenset({"true", "1", "yes", "y", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "n", "off"})


class KnobError(ValueError):
    """A knob declaration or a knob value is invalid.  ``str()`` is the whole message."""


def check_knob_name(name: str) -> str:
    """Return ``name`` if it is a valid environment variable name, else raise KnobError."""
    if not isinstance(name, str) or not KNOB_NAME_RE.match(name):
        raise KnobError(
            f"invalid knob name {name!r}: a knob name is letters, digits and '_', "
            "not starting with a digit"
        )
    return name


def check_knob_value(value: str) -> str:
    """Reject values no config file can carry: NUL bytes and line breaks."""
    if not isinstance(value, str):
        raise KnobError(f"knob value must be a string, got {type(value).__name__}")
    for bad, what in (("\x00", "a NUL byte"), ("\n", "a newline"), ("\r", "a carriage return")):
        if bad in value:
            raise KnobError(f"invalid knob value {value!r}: it contains {what}")
    return value


def parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise KnobError(f"{text!r} is not a boolean (true/false, 1/0, yes/no, y/n, on/off)")


@dataclass(frozen=True)
class Knob:
    """One environment knob: its declaration, not its value."""

    name: str
    type: str
    default: Any = None
    doc: str = ""
    class_hint: str | None = None
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    unit: str | None = None
    # Free-form grouping, e.g. "liveness" for timeouts; purely descriptive.
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        self._check_name()
        if self.type not in KNOB_TYPES:
            raise KnobError(f"knob {self.name}: type {self.type!r} is not one of {KNOB_TYPES}")
        if self.class_hint is not None and self.class_hint not in CLASS_HINTS:
            raise KnobError(
                f"knob {self.name}: class hint {self.class_hint!r} is not one of {CLASS_HINTS}"
            )
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(str(c) for c in self.choices))
        if self.min is not None and self.max is not None and self.min > self.max:
            raise KnobError(f"knob {self.name}: min {self.min} is greater than max {self.max}")

    def _check_name(self) -> None:
        check_knob_name(self.name)

    def parse(self, text: str) -> Any:
        """Parse a value as the engine would read it from the environment.

        Raises :class:`KnobError` naming the knob, the value and the rule it breaks.
        """
        check_knob_value(text)
        try:
            if self.type == "int":
                value: Any = int(text.strip(), 10)
            elif self.type == "float":
                value = float(text.strip())
                if not math.isfinite(value):
                    raise KnobError(f"{text!r} is not a finite number")
            elif self.type == "bool":
                value = parse_bool(text)
            else:
                value = text
        except KnobError as e:
            raise KnobError(f"{self.name}={text!r}: {e}") from None
        except ValueError:
            raise KnobError(f"{self.name}={text!r}: not a valid {self.type}") from None
        if self.choices is not None and str(value) not in self.choices:
            raise KnobError(
                f"{self.name}={text!r}: must be one of {', '.join(self.choices)}"
            )
        if self.type in ("int", "float"):
            if self.min is not None and value < self.min:
                raise KnobError(f"{self.name}={text!r}: below the minimum {self.min:g}")
            if self.max is not None and value > self.max:
                raise KnobError(f"{self.name}={text!r}: above the maximum {self.max:g}")
        return value

    def validate(self, text: str) -> str:
        """Check ``text`` and return it unchanged (the file keeps what the user typed)."""
        self.parse(text)
        return text

    def read(self, environ: Mapping[str, str] | None = None) -> Any:
        """The knob's value from ``environ`` (default ``os.environ``), or its default."""
        env = os.environ if environ is None else environ
        raw = env.get(self.name)
        if raw is None or raw == "":
            return self.default
        return self.parse(raw)


class Registry:
    """An ordered set of knobs, looked up by name."""

    def __init__(self, knobs: Iterable[Knob] = ()) -> None:
        self._knobs: dict[str, Knob] = {}
        for knob in knobs:
            self.add(knob)

    def add(self, knob: Knob) -> Knob:
        if knob.name in self._knobs and self._knobs[knob.name] != knob:
            raise KnobError(f"knob {knob.name} is declared twice with different definitions")
        self._knobs[knob.name] = knob
        return knob

    def declare(self, name: str, type: str, default: Any = None, doc: str = "", **kw: Any) -> Knob:
        """Declare a knob in code (the engine's way): ``registry.declare("X", "int", 4, ...)``."""
        return self.add(Knob(name=name, type=type, default=default, doc=doc, **kw))

    def get(self, name: str) -> Knob | None:
        return self._knobs.get(name)

    def __getitem__(self, name: str) -> Knob:
        return self._knobs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._knobs

    def __iter__(self) -> Iterator[Knob]:
        return iter(self._knobs.values())

    def __len__(self) -> int:
        return len(self._knobs)

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Known names closest to ``name`` (for "unknown knob, did you mean ..."); case
        is no difference (``engine_num_pages`` finds ``ENGINE_NUM_PAGES``)."""
        upper = {k.upper(): k for k in self._knobs}
        found = difflib.get_close_matches(name.upper(), list(upper), n=n, cutoff=0.6)
        return [upper[f] for f in found]


KeyCheck = Callable[[str], None]


def key_checker(
    known: Callable[[str], bool], names: Iterable[str] = (), what: str = "server argument"
) -> KeyCheck:
    """A ``check_key`` that refuses keys ``known`` does not know, suggesting ``names``.

    ``known`` is the catalog lookup (it normalizes ``--`` and ``_``/``-`` itself).
    """
    choices = sorted(set(names))

    def check(key: str) -> None:
        if not known(key):
            close = difflib.get_close_matches(key, choices, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise KnobError(f"{key!r} is not a known {what}{hint}")

    return check


