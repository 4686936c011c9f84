"""A target file as the ledger sees it: its bytes and what its format found in them.

Pure: no reading, no parsing here.  :mod:`ledger.store.targets` reads a file and fills one
in through the target's ``envknobs`` format; the planners (:mod:`ledger.core.recording`,
:mod:`ledger.core.planner`) and :mod:`ledger.core.layout` decide from it without touching
the disk.  The text is the bytes decoded as UTF-8 with ``surrogateescape``, so that any
byte sequence comes back out exactly as it went in.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.identifiers import place_knob
from ledger.core.identifiers import split_place
from ledger.core.managed_file import Target

ENCODING = "utf-8"
ERRORS = "surrogateescape"


@dataclass(frozen=True)
class TargetFile:
    target: Target
    path: Path
    raw: bytes
    values: dict[str, str]
    # bash targets: what the format sees (envknobs.formats.common.places.Summary), and the value
    # at every place of every knob, keyed knob@place ("CUDA_VISIBLE_DEVICES@launch 2")
    summary: Any = None
    place_values: dict[str, str | None] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.raw.decode(ENCODING, ERRORS)

    def live(self, knob: str) -> str | None:
        """The live value of a layer key: a knob, or ``knob@place``; a value the shell
        computes is its shell text (``${MEM_FRACTION_STATIC}``: :attr:`exprs`); the
        engine release (:data:`RELEASE_KNOB`) is the one release the file names."""
        if knob == RELEASE_KNOB:
            named = self.releases()
            return named[0] if len(named) == 1 else None
        if split_place(knob)[1] is not None:
            found = self.place_values.get(knob)
        else:
            found = self.values.get(knob)
        return found if found is not None else self.exprs.get(knob)

    @property
    def exprs(self) -> dict[str, str]:
        """Layer key -> the shell text of a value the shell computes (bash targets).

        Such a value is recorded as that text, and written back as those bytes, so that
        a revert of ``--mem-fraction-static ${MEM_FRACTION_STATIC}`` -> ``0.85`` puts the
        expression back instead of removing the flag.  Kept apart from :attr:`values`,
        which hold what the process receives (A/B sides, ``status --live``, release
        checks need real values, never shell text)."""
        out: dict[str, str] = {}
        for k in getattr(self.summary, "knobs", ()) or ():
            for p in k.places:
                expr = getattr(p, "expr", None)
                if expr is not None:
                    out[place_knob(k.knob, p.key)] = expr
                    if not k.needs_selection and len(k.places) == 1:
                        out[k.knob] = expr
        return out

    def ambiguity(self, knob: str):
        """For a whole knob (not ``knob@place``) that has no single value in the file —
        conditional on a branch or repeated on several launch lines — its summary."""
        if knob == RELEASE_KNOB:
            spots = self.release_spots()
            return SeveralReleases(tuple(spots)) if len(self.releases()) > 1 else None
        if split_place(knob)[1] is not None:
            return None
        found = self.knob_summary(knob)
        return found if found is not None and found.needs_selection else None

    def release_spots(self) -> list:
        """Where the file writes an engine release (:mod:`envknobs.release_spots`)."""
        from envknobs.release_spots import release_spots

        return release_spots(self.text)

    def releases(self) -> list[str]:
        """The distinct releases the file names (``vllm==0.30.0``), in file order."""
        from envknobs.release_spots import releases_named

        return releases_named(self.release_spots())

    def knob_summary(self, knob: str):
        """The format's view of ``knob`` (places, conditional, repeated), if it has one."""
        return self.summary.get(knob) if self.summary is not None else None

    def names(self) -> list[str]:
        """Every knob and flag name the file holds, in file order."""
        names = list(self.values)
        if self.summary is not None:
            names += [k.knob for k in self.summary.knobs]
        return list(dict.fromkeys(names))


@dataclass(frozen=True)
class SeveralReleases:
    """A file naming more than one engine release: what :meth:`TargetFile.ambiguity` says
    of its release (``state`` and ``lines`` as a knob summary has them)."""

    spots: tuple
    state: str = "several releases"

    @property
    def lines(self) -> list[int]:
        return [s.line for s in self.spots]

    @property
    def places(self) -> list:
        return [_SpotPlace(s) for s in self.spots]


@dataclass(frozen=True)
class _SpotPlace:
    spot: Any

    def to_dict(self) -> dict:
        s = self.spot
        return {"line": s.line, "value": s.spec, "kind": s.kind, "raw": s.text}


@dataclass(frozen=True)
class Edited:
    """A target file edited once by its format (the change a command records): the new
    bytes, and what the format says of the knob in the file before and after — where the
    knob sits (``anchor``, see :mod:`ledger.core.layout`) and the exact text of its value.
    ``without``: the text with the knob removed, where a planner asked for it (the lines
    of an adopted knob the file added by hand)."""

    raw: bytes
    anchor: dict | None = None
    before_source: str | None = None
    after_source: str | None = None
    without: str | None = None

    @property
    def text(self) -> str:
        return self.raw.decode(ENCODING, ERRORS)


__all__ = ["ENCODING", "ERRORS", "Edited", "TargetFile"]
