"""`ledger knob NAME`: a knob's or flag's history across the catalogued engine releases.

Reads the engines' timelines (:mod:`envknobs.timeline`) only: no workspace, no network.
Without ``--engine`` every engine that knows the name answers; a name no engine knows is
an error naming the closest catalogued names.
"""

from __future__ import annotations

from envknobs.timeline import ENGINES
from envknobs.timeline import KnobHistory
from envknobs.timeline import all_names
from envknobs.timeline import knob_history
from ledger.core.names import close_names
from ledger.errors import InvalidValue


def knob_histories(name: str, engine: str | None = None) -> list[KnobHistory]:
    """The history of ``name`` in ``engine`` (or in every engine that knows it)."""
    engines = [engine] if engine else list(ENGINES)
    found = [h for h in (knob_history(e, name) for e in engines) if h is not None]
    if found:
        return found
    close = close_names(name, [n for e in engines for n in all_names(e)])
    where = f"the {engine} timeline" if engine else "any catalogued engine release"
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise InvalidValue(f"{name}: not in {where}{hint}")
