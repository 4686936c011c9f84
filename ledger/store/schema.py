"""The shape of one line of ``entries.jsonl``, checked before it becomes an Entry.

``Entry.from_dict`` converts what it is given (``str(...)``, ``int(...)``), which is
right for the ledger's own output and wrong for a hand-edited or damaged file: ``"seq":
1e400`` would crash in ``int()``, ``"seq": "7"`` or ``"title": ["x"]`` would be silently
changed into something else, and a list where an anchor's knob name belongs would crash
much later, mid-command.  So every field's JSON type is checked here first; a mismatch
is reported with the field's name (the caller adds file and line).
"""

from __future__ import annotations

from typing import Any

REQUIRED_STR = ("id", "kind", "class", "title", "recorded")
OPTIONAL_STR = ("slug", "state", "why", "suspicion", "suspect_why", "clear_why", "revert_why",
                "target",
                "knob", "before", "after", "patch", "sha256", "commit")
ACTION_STR = ("at", "action")
ACTION_OPTIONAL_STR = ("why", "command")
MAX_SEQ = 2**53  # what every JSON reader agrees on as an integer


def _type(v: Any) -> str:
    return "null" if v is None else {dict: "object", list: "list", str: "string",
                                     bool: "boolean", int: "integer", float: "number"}.get(
                                         type(v), type(v).__name__)


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def anchor_problem(anchor: Any) -> str | None:
    """Why ``anchor`` is not one the ledger writes (see :mod:`ledger.core.layout`), or None."""
    if anchor is None:
        return None
    if not isinstance(anchor, dict):
        return f"field 'anchor' must be an object or null, not {_type(anchor)}"
    if "place" in anchor:  # a knob or flag at one place of a bash target (store.targets)
        place = anchor["place"]
        if not isinstance(place, dict) or not isinstance(place.get("key"), str):
            return "anchor place must be an object with a string 'key'"
        for key in ("value", "raw"):
            if place.get(key) is not None and not isinstance(place[key], str):
                return f"anchor place {key} must be a string or null, not {_type(place[key])}"
        if place.get("anchor") is not None and not isinstance(place["anchor"], dict):
            return f"anchor place anchor must be an object or null, not {_type(place['anchor'])}"
        return None
    if "knob" in anchor:
        if not isinstance(anchor["knob"], str):
            return f"anchor knob must be a string, not {_type(anchor['knob'])}"
        return None
    for key in ("lines", "below"):
        if key in anchor and not _strings(anchor[key]):
            return f"anchor {key} must be a list of strings"
    if "lines" not in anchor:
        return "an anchor needs 'knob' or 'lines'"
    return None


def _action_problem(i: int, a: Any) -> str | None:
    if not isinstance(a, dict):
        return f"history item {i + 1} must be an object, not {_type(a)}"
    for key in ACTION_STR:
        if not isinstance(a.get(key), str):
            return f"history item {i + 1}: {key!r} must be a string, not {_type(a.get(key))}"
    for key in ACTION_OPTIONAL_STR:
        if a.get(key) is not None and not isinstance(a[key], str):
            return f"history item {i + 1}: {key!r} must be a string, not {_type(a[key])}"
    return None


def entry_schema_problem(d: dict) -> str | None:
    """What is wrong with the types of entry ``d``'s fields, or None (missing required
    fields other than the checked ones are left to ``Entry.from_dict``)."""
    for key in REQUIRED_STR:
        if key in d and not isinstance(d[key], str):
            return f"field {key!r} must be a string, not {_type(d[key])}"
    seq = d.get("seq")
    if "seq" in d and (type(seq) is not int or not 0 < seq <= MAX_SEQ):
        return f"field 'seq' must be a whole number from 1 to {MAX_SEQ}, not {seq!r:.40}"
    for key in OPTIONAL_STR:
        if d.get(key) is not None and not isinstance(d[key], str):
            return f"field {key!r} must be a string or null, not {_type(d[key])}"
    if d.get("files") is not None and not _strings(d["files"]):
        return "field 'files' must be a list of paths"
    history = d.get("history")
    if history is not None:
        if not isinstance(history, list):
            return f"field 'history' must be a list, not {_type(history)}"
        for i, a in enumerate(history):
            problem = _action_problem(i, a)
            if problem:
                return problem
    return anchor_problem(d.get("anchor"))
