"""Render a string as a YAML scalar that every loader reads back as that exact string."""

from __future__ import annotations

import re

from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from envknobs.formats import FormatError

STR_TAG = "tag:yaml.org,2002:str"
NULL_TAG = "tag:yaml.org,2002:null"
# Conservative plain scalars: start with a letter, '_' or '/', no indicator characters
# (',', ':', '#', brackets...), so it reads the same in block and flow context.
_PLAIN_CANDIDATE = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@%+=-]*\Z")
# Characters YAML allows unescaped (the spec's c-printable)...
# NEL, LS and PS are line breaks to YAML 1.1 and a BOM is special: escape them too.
_NEEDS_ESCAPE = re.compile(
    "[^\t\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x00": "\\0"}
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))


def plain_is_string(text: str) -> bool:
    """True if a plain scalar ``text`` is a string in both YAML 1.1 and YAML 1.2."""
    return all(r.resolve(ScalarNode, text, (True, False)) == STR_TAG for r in _RESOLVERS)


def check_yaml_text(value: str) -> None:
    """Refuse strings that cannot be stored in a UTF-8 YAML file (lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(f"value {value!r} is not valid UTF-8 text") from None


def _escape(ch: str) -> str:
    if ch in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def double_quoted(value: str) -> str:
    body = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _escape(m.group(0)), body) + '"'


def render_scalar(value: str, old_style: str | None = None) -> str:
    """``value`` as a YAML scalar that YAML 1.1 and 1.2 loaders read as that string.

    Plain when it is unambiguous (``sglang``, ``/models/x``), else double-quoted: ``no``,
    ``on``, ``0777``, ``1e3``, ``~``, ``512`` all get quotes.  ``old_style`` is the style
    of the scalar being replaced: a single-quoted value stays single-quoted when it can,
    a double-quoted one stays double-quoted.
    """
    check_yaml_text(value)
    if old_style == "'" and not _NEEDS_ESCAPE.search(value):
        return "'" + value.replace("'", "''") + "'"
    if old_style != '"' and _PLAIN_CANDIDATE.match(value) and plain_is_string(value):
        return value
    return double_quoted(value)
