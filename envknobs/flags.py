"""Server flags as knobs: what a launch-line flag is, and how its values are checked.

Most real tuning of an SGLang or vLLM server is on its launch line
(``--mem-fraction-static 0.85``, ``--cuda-graph-max-bs=256``, ``--disable-radix-cache``).
A :class:`Flag` declares one such server argument with the fields of an env
:class:`~envknobs.registry.Knob` (type, default, range or choices, class hint, doc) plus
what argparse knows about it: its aliases, whether it takes several words (``nargs``)
and whether a boolean has a ``--no-`` form.

Naming convention (shared by every format and by the ledger): a flag's *knob name* is
the flag spelled with its two leading dashes, ``--cuda-graph-max-bs``.  Lookups
normalize a name first (:func:`normalize_flag`): leading dashes are dropped and ``_``
reads as ``-``, so ``cuda_graph_max_bs``, ``--cuda_graph_max_bs`` and the key
``cuda-graph-max-bs`` of an ``sglang --config`` YAML file all name the same flag.

Values are strings like env values: a boolean flag's value is ``true`` (present) or
``false`` (written ``--no-x`` where the flag has that form); an ``nargs`` flag's value is
its words joined by single spaces (``"1 2 4 8"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from typing import Iterable

from envknobs.registry import Knob
from envknobs.registry import KnobError
from envknobs.registry import Registry

# A flag as the user or a catalog spells it: one or two dashes, then a name.
FLAG_NAME_RE = re.compile(r"--?[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
NARGS = ("+", "*")


def is_flag_name(name: str) -> bool:
    """Whether ``name`` names a launch-line flag (it starts with a dash) rather than an env knob."""
    return isinstance(name, str) and name.startswith("-")


def normalize_flag(name: str) -> str:
    """The lookup key of a flag name: no leading dashes, ``_`` read as ``-``."""
    return name.lstrip("-").replace("_", "-")


def canonical_flag(name: str) -> str:
    """``name`` as a flag knob name: ``--`` plus its normalized spelling."""
    return "--" + normalize_flag(name)


def check_flag_name(name: str) -> str:
    """Return ``name`` if it can be a flag's knob name, else raise KnobError."""
    if not isinstance(name, str) or not FLAG_NAME_RE.match(name):
        raise KnobError(
            f"invalid flag {name!r}: a flag is '--' then letters, digits, '-', '_' or '.'"
        )
    return name


@dataclass(frozen=True)
class Flag(Knob):
    """One server argument: its declaration, not its value."""

    aliases: tuple[str, ...] = ()
    # argparse.BooleanOptionalAction: `--no-x` sets the flag false.
    negatable: bool = False
    # "+" / "*": the flag takes several words (`--cuda-graph-bs 1 2 4 8`).
    nargs: str | None = None
    engine: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "aliases", tuple(self.aliases))
        for alias in self.aliases:
            check_flag_name(alias)
        if self.nargs is not None and self.nargs not in NARGS:
            raise KnobError(f"flag {self.name}: nargs {self.nargs!r} is not one of {NARGS}")
        if self.negatable and self.type != "bool":
            raise KnobError(f"flag {self.name}: only a bool flag can be negatable")

    def _check_name(self) -> None:
        check_flag_name(self.name)
        if not self.name.startswith("--"):
            raise KnobError(f"flag {self.name}: a flag's name is spelled with '--'")

    @property
    def is_switch(self) -> bool:
        """A boolean flag: present or absent, no value word."""
        return self.type == "bool"

    def parse(self, text: str) -> Any:
        """Parse a value as the server would (each word of an ``nargs`` flag)."""
        if self.nargs is None:
            return super().parse(text)
        words = text.split()
        if self.nargs == "+" and not words:
            raise KnobError(f"{self.name}={text!r}: needs at least one value")
        return [super(Flag, self).parse(w) for w in words]

    def spellings(self) -> tuple[str, ...]:
        """The name and its aliases, as normalized lookup keys."""
        return (normalize_flag(self.name), *(normalize_flag(a) for a in self.aliases))


class FlagRegistry(Registry):
    """Flags of one engine, looked up by any spelling of their name or aliases."""

    def __init__(self, flags: Iterable[Flag] = ()) -> None:
        self._keys: dict[str, str] = {}
        super().__init__(flags)

    def add(self, knob: Knob) -> Knob:  # type: ignore[override]
        if not isinstance(knob, Flag):
            raise KnobError(f"{knob.name} is not a flag")
        for key in knob.spellings():
            owner = self._keys.get(key)
            if owner is not None and owner != knob.name:
                raise KnobError(f"flag {knob.name}: {key!r} already names {owner}")
        added = super().add(knob)
        for key in knob.spellings():
            self._keys[key] = knob.name
        return added

    def get(self, name: str) -> Flag | None:  # type: ignore[override]
        canonical = self._keys.get(normalize_flag(name))
        return None if canonical is None else super().get(canonical)  # type: ignore[return-value]

    def __getitem__(self, name: str) -> Flag:
        flag = self.get(name)
        if flag is None:
            raise KeyError(name)
        return flag

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def closest(self, name: str, n: int = 3) -> list[str]:
        import difflib

        keys = difflib.get_close_matches(normalize_flag(name), list(self._keys), n=n, cutoff=0.6)
        return list(dict.fromkeys(self._keys[k] for k in keys))


__all__ = [
    "FLAG_NAME_RE",
    "Flag",
    "FlagRegistry",
    "canonical_flag",
    "check_flag_name",
    "is_flag_name",
    "normalize_flag",
]
