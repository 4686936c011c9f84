"""Knob layering: the value the entries imply for each (target, knob).  Pure.

For one (target, knob) pair, knob entries stack in record order (``seq``).  The value the
ledger expects live is the ``after`` of the last *applied* entry; with none applied it is
the ``before`` of the first entry (the base).  Any subset of applied entries therefore has
exactly one correct value per pair, whatever the order of the commands that led there
(docs/ARCHITECTURE.md §2).

An entry recorded at selected places (``--at``/``--all``) is in one layer per place, keyed
``knob@place``; an entry across several targets (``also``) in one layer per target, each
seen with that target's own before and texts.  Besides the value, a layer gives the exact
text of the value (``*_source``) and the knob's whole lines (``*_lines``) to write back.
:func:`find_drift` compares what the layers imply with what a caller read from the files.

The planner (:mod:`ledger.core.planner`) decides which entries are applied; this module
says what follows from that for the files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.core.identifiers import place_knob
from ledger.core.model import Entry
from ledger.errors import Drift

KnobKey = tuple[str, str]  # (target name, knob name, or knob@place for a selected place)


def entry_keys(e: Entry) -> list[KnobKey]:
    """The layers a knob entry belongs to: its knob, or each place it selected."""
    if e.places:
        return [(e.target, place_knob(e.knob, key)) for key in e.places]  # type: ignore[arg-type]
    return [(t, e.knob) for t in e.targets]  # type: ignore[misc]


_ALSO_FIELDS = ("anchor", "before_source", "after_source", "before_lines", "after_lines")


def target_view(e: Entry, name: str, other: Mapping) -> Entry:
    """Entry ``e`` as seen in its other target ``name`` (a change across several targets):
    that target's own before, anchor and exact texts."""
    return replace(e, target=name, before=other.get("before"), also=None,
                   **{k: other.get(k) for k in _ALSO_FIELDS})


# The last entries :func:`knob_layers` grouped, with their layers.  One command asks for
# the layers of the same entries many times (drift, anchors, order, expected values, the
# plan), and of two lists in turn (the ledger before and after its change): at 10,000
# entries grouping them is ~25 ms each time.  Entries are frozen, so the same objects in
# the same order have the same layers; the entries are held here, so their ids cannot be
# reused while they are remembered.
_LAST_LAYERS: list[tuple[tuple[Entry, ...], dict[KnobKey, list[Entry]]]] = []


def knob_layers(entries: Iterable[Entry]) -> dict[KnobKey, list[Entry]]:
    """Knob entries grouped by (target, knob), each group in record order.

    An entry recorded at selected places (``--at``/``--all``) is in one layer per place,
    keyed ``knob@place``, as a view whose ``before`` is that place's own old value; so
    each place reverts to exactly what it held.  The caller gets its own dict and lists.
    """
    given = tuple(entries)
    for seen, layers in _LAST_LAYERS:
        if len(seen) == len(given) and all(a is b for a, b in zip(seen, given)):
            break
    else:
        layers = _group_layers(given)
        _LAST_LAYERS[:] = [(given, layers), *_LAST_LAYERS[:1]]
    return {key: list(layer) for key, layer in layers.items()}


def _group_layers(entries: Sequence[Entry]) -> dict[KnobKey, list[Entry]]:
    layers: dict[KnobKey, list[Entry]] = {}
    # an upgrade entry is one layer of its target's engine release (RELEASE_KNOB)
    for e in sorted((e for e in entries if e.kind != "patch"), key=lambda e: e.seq):
        if not e.places:
            layers.setdefault((e.target, e.knob), []).append(e)  # type: ignore[arg-type]
            for name, other in (e.also or {}).items():
                layers.setdefault((name, e.knob), []).append(target_view(e, name, other))  # type: ignore[arg-type]
            continue
        for key, place in e.places.items():
            view = replace(e, knob=place_knob(e.knob, key), before=place.get("before"),  # type: ignore[arg-type]
                           places=None, at=None)
            layers.setdefault((e.target, view.knob), []).append(view)  # type: ignore[arg-type]
    return layers


def _pick(layer: Sequence[Entry], applied: Mapping[str, bool] | None, after: str, before: str):
    """A field of the last applied entry (``after``), else the first entry's ``before``."""
    for e in reversed(layer):
        is_applied = applied.get(e.id, e.applied) if applied is not None else e.applied
        if is_applied:
            return getattr(e, after)
    return getattr(layer[0], before)


def layer_value(layer: Sequence[Entry], applied: Mapping[str, bool] | None = None) -> str | None:
    """The value a layer implies: after of the last applied entry, else the base.

    ``applied`` overrides entries' states by id (to ask "what if"), without copying.
    """
    return _pick(layer, applied, "after", "before")


def layer_source(layer: Sequence[Entry], applied: Mapping[str, bool] | None = None) -> str | None:
    """The exact text of :func:`layer_value`'s value, where the entries kept it.

    The ``after_source`` of the last applied entry, else the first entry's
    ``before_source``: a revert to the base writes the base's original text back.
    """
    return _pick(layer, applied, "after_source", "before_source")


def layer_lines(layer: Sequence[Entry], applied: Mapping[str, bool] | None = None) -> str | None:
    """The exact lines of :func:`layer_value`'s knob when it has to be written back whole:
    the ``after_lines`` of the last applied entry, else the first entry's ``before_lines``."""
    return _pick(layer, applied, "after_lines", "before_lines")


def removed_lines(layer: Sequence[Entry]) -> str | None:
    """The lines a knob had where the last applied entry of ``layer`` removed it (its
    ``before_lines``), else None: what a knob that comes back with a new value is written
    as, so that removing and re-adding it leaves the bytes a change in place would."""
    last = next((e for e in reversed(layer) if e.applied), None)
    return last.before_lines if last is not None and last.after is None else None


def knob_sources(entries: Iterable[Entry], *, full: bool = False) -> dict[KnobKey, str | None]:
    """The value text per (target, knob) with the entries' states (``full``: all applied)."""
    return {
        key: layer[-1].after_source if full else layer_source(layer)
        for key, layer in knob_layers(entries).items()
    }


def knob_lines(entries: Iterable[Entry], *, full: bool = False) -> dict[KnobKey, str | None]:
    """The knob lines per (target, knob) with the entries' states (``full``: all applied)."""
    return {
        key: layer[-1].after_lines if full else layer_lines(layer)
        for key, layer in knob_layers(entries).items()
    }


def expected_knobs(entries: Iterable[Entry]) -> dict[KnobKey, str | None]:
    """What the ledger expects live for every (target, knob) it knows."""
    return {key: layer_value(layer) for key, layer in knob_layers(entries).items()}


def full_knobs(entries: Iterable[Entry]) -> dict[KnobKey, str | None]:
    """The values with every entry applied: the configuration with nothing off the table."""
    return {key: layer[-1].after for key, layer in knob_layers(entries).items()}


def find_drift(
    entries: Iterable[Entry],
    live: Mapping[KnobKey, str | None],
    paths: Mapping[str, str],
    expected: Mapping[KnobKey, str | None] | None = None,
) -> list[Drift]:
    """Pairs whose live value differs from the ledger's expectation.

    ``live`` holds the values read from the targets for (at least) the pairs checked;
    pairs absent from ``live`` are not checked.  ``paths`` maps target name to its file,
    for the message.  ``expected``: :func:`expected_knobs` of ``entries``, where the
    caller has it already.
    """
    drifts = []
    if expected is None:
        expected = expected_knobs(entries)
    for key, expected_value in expected.items():
        if key not in live:
            continue
        found = live[key]
        if found != expected_value:
            target, knob = key
            drifts.append(Drift(paths.get(target, target), knob, expected_value, found, target))
    return drifts


__all__ = [
    "KnobKey",
    "entry_keys",
    "expected_knobs",
    "find_drift",
    "full_knobs",
    "knob_layers",
    "knob_lines",
    "knob_sources",
    "layer_lines",
    "layer_source",
    "layer_value",
    "removed_lines",
    "target_view",
]
