"""The names an entry and a target go by, and the rules they follow: pure, no files.

Target names and entry ids name files (``patches/<id>.patch``, ``evidence/<id>/``,
``entries/<id>.md``) and URL fragments: no separators, no leading dot, nothing a shell or
a URL would need to quote.  A knob entry's knob is an env variable, a launch flag or a key
of a YAML map, possibly at one place of its file (``CUDA_VISIBLE_DEVICES@launch 2``, the
layer key of an entry recorded with ``--at``/``--all``); an upgrade entry's is
:data:`RELEASE_KNOB`, and its values are release specs (:data:`ENGINE_SPEC_RE`).
"""

from __future__ import annotations

import re

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import check_knob_name
from ledger.errors import InvalidValue

CLASSES = ("perf", "bugfix")
# The layer key of upgrade entries: no format has a knob of that name (a space in it).
RELEASE_KNOB = "engine release"
ENGINE_SPEC_RE = re.compile(r"(sglang|vllm|knob-ledger-engine)==[0-9][A-Za-z0-9.+-]*\Z")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
# '@' is in no env knob or flag name.
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


__all__ = [
    "CLASSES",
    "ENGINE_SPEC_RE",
    "NAME_RE",
    "PLACE_SEP",
    "RELEASE_KNOB",
    "check_class",
    "check_entry_id",
    "check_entry_knob",
    "check_target_name",
    "place_knob",
    "slugify",
    "split_place",
]
