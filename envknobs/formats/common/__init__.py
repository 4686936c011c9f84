"""What every target format shares: its error, its interface, places and text helpers.

:class:`TargetFormat` is the one interface the ledger programs against.  Three methods
every format has (``parse``, ``set``, ``unset``); the rest are *capabilities* with a
default that is right for a format without them, so callers never probe with
``hasattr``:

* places (``summary``, ``knob``, ``select_places``, ``edit_places``, ``canonical``): a
  format whose knobs can be set in several spots of one file (the bash format) reports
  them; the default is a format where a knob has one spot (``summary`` is None,
  ``select_places`` is empty, ``canonical`` is the name itself, ``edit_places`` refuses);
* exact sources (``source``, ``set_exact``): a format that can write a value's original
  text back verbatim (k8s, yaml-map) returns it from ``source`` and takes it in
  ``set_exact``; the default keeps no source and renders the value;
* ``removed``: the text ``unset`` gives, for a caller that only looks at which lines go
  (the default is ``unset`` itself; bash skips its verification re-read);
* batch edits (``edit_many``, ``add_many``): one pass over the file for many knobs; the
  default edits them one at a time (removals first, then changes; additions in order),
  which gives the same text;
* ``outside_notes``: what other files the target names give the process (a unit's
  ``EnvironmentFile=``; with the target's ``path``, the files beside it that also count:
  a unit's drop-ins), read now -- never cached with the file's own summary, since
  those files change on their own; the default has none;
* ``refuse_outside``: FormatError where such a file beside the target would override an
  edit of the target (a unit's drop-in setting the knob); the default refuses nothing.

:mod:`.places` holds the place types (:class:`~.places.Place`,
:class:`~.places.AmbiguousKnob`, ...), :mod:`.text` the line helpers all formats use.
Shell words, which every format that holds a launch command or a string of flags reads:
:mod:`.shell_lexer` (words with their spans), :mod:`.shellwords` (quoting, and the one
unquoting loop of bash and of compose's splitting), :mod:`.launch` and :mod:`.wrappers`
(a server's launch line, its flags as argparse reads them, the catalog lookup),
:mod:`.word_edit` (word surgery that keeps the bytes around) and :mod:`.argstring`
(a value that is itself a string of flags).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Mapping
from typing import Sequence

if TYPE_CHECKING:
    from envknobs.formats.common.places import KnobSummary
    from envknobs.formats.common.places import Place
    from envknobs.formats.common.places import PlaceEdit
    from envknobs.formats.common.places import Summary


class FormatError(ValueError):
    """A target file cannot be parsed or edited; the message says what and at which line."""


class TargetFormat:
    """What the ledger core needs from a file format (see the module docstring)."""

    name: str = ""

    # -- every format ---------------------------------------------------------------
    def parse(self, text: str) -> dict[str, str]:
        """Map each knob to the value the launched process sees."""
        raise NotImplementedError

    def set(self, text: str, knob: str, value: str) -> str:
        """Return ``text`` with ``knob`` set to ``value`` (unchanged if it already is)."""
        raise NotImplementedError

    def unset(self, text: str, knob: str) -> str:
        """Return ``text`` without ``knob`` (unchanged if it is absent)."""
        raise NotImplementedError

    def removed(self, text: str, knob: str) -> str:
        """The text ``unset`` gives, where the caller only needs to see which lines go
        (the ledger's layout anchors); a format may skip re-reading it to verify."""
        return self.unset(text, knob)

    def placed(self, into: str | None) -> "TargetFormat":
        """This format writing new knobs where ``record --in`` selects (k8s only)."""
        if into is None:
            return self
        raise FormatError(f"--in {into} selects env: or an envFrom ConfigMap of a k8s "
                          f"target; a {self.name} target has one place for a knob")

    # -- places ---------------------------------------------------------------------
    def summary(self, text: str) -> Summary | None:
        """Every knob with its places (None: a format whose knobs have one spot each)."""
        return None

    def knob(self, text: str, knob: str) -> KnobSummary | None:
        """The places of one knob (None when the format does not report places)."""
        return None

    def canonical(self, text: str, knob: str) -> str:
        """The name this file's knob goes by (a flag's catalog spelling, say)."""
        return knob

    def select_places(
        self, text: str, knob: str, at: int | str | None, action: str = "set"
    ) -> tuple[Place, ...]:
        """The places an edit with the selection ``at`` would touch (empty: the format
        has one spot per knob, or the file does not have it)."""
        return ()

    def edit_places(self, text: str, knob: str, edits: Sequence[PlaceEdit]) -> str:
        """Give each selected place its own value; only formats with places take it."""
        raise FormatError(f"{self.name} targets have no places to select: edit the knob whole")

    # -- exact sources --------------------------------------------------------------
    def parse_exact(self, text: str) -> dict[str, str]:
        """:meth:`parse`, plus each knob whose one value the file computes, as the text it
        is computed from (``${MEM_FRACTION_STATIC}``): what the ledger records of it."""
        return self.parse(text)

    def source(self, text: str, knob: str) -> str | None:
        """The exact text of ``knob``'s value as written (None: absent, or not kept)."""
        return None

    def set_exact(self, text: str, knob: str, value: str, source: str | None) -> str:
        """``set``, writing ``source`` verbatim where the format keeps sources and it
        reads back as ``value``; the value is rendered otherwise."""
        return self.set(text, knob, value)

    def outside_notes(self, text: str, path: str | None = None) -> list[str]:
        """Notes on the files ``text`` names (and, with ``path``, the files beside it)
        that also reach the process (read now)."""
        return []

    def refuse_outside(self, path: str, text: str, knobs: Sequence[str]) -> None:
        """FormatError where a file beside ``path`` would override an edit of ``knobs``."""
        return None

    # -- batch edits ----------------------------------------------------------------
    def edit_many(
        self, text: str, edits: Mapping[str, str | None],
        sources: Mapping[str, str | None] | None = None,
    ) -> str:
        """Unset (None) or set each knob of ``edits`` that the file has: removals first,
        then changes, each verified; a format may do it in one pass (same text)."""
        for knob, value in edits.items():
            if value is None:
                text = self.unset(text, knob)
        for knob, value in edits.items():
            if value is not None:
                text = self.set_exact(text, knob, value, (sources or {}).get(knob))
        return text

    def add_many(self, text: str, values: Mapping[str, str]) -> str:
        """``set`` each knob of ``values``, all absent from the file, in order; a format
        may add them in one pass (same text)."""
        for knob, value in values.items():
            text = self.set(text, knob, value)
        return text


__all__ = ["FormatError", "TargetFormat"]
