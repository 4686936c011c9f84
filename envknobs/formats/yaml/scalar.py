"""YAML scalars as the formats write them: safe for YAML 1.1 and 1.2 readers alike.

Two families of readers matter: YAML 1.1 (PyYAML, and ruamel's 1.1 rules: ``no``, ``on``,
``0777``, ``1_000`` are not strings) and YAML 1.2 (ruamel.yaml, Go's yaml.v3 as kubectl uses
it: ``0o777`` is an int).  PyYAML's resolver is asked too, because it departs from the 1.1
spec in places (``1e3`` is a string to it).  A value
is written *plain* only when its text is a plain scalar in every context (block and flow)
and both versions resolve it to the same tag; otherwise it is quoted.

Styles are chosen, never imposed: :func:`render` takes the style wanted (the style of the
scalar being replaced, or the one most of its neighbours use) and falls back to a quoted
form only where that style cannot carry the value.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from envknobs.formats.common import FormatError

STR_TAG = "tag:yaml.org,2002:str"
NULL_TAG = "tag:yaml.org,2002:null"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
NUMBER_TAGS = frozenset({INT_TAG, FLOAT_TAG})

PLAIN, SINGLE, DOUBLE = None, "'", '"'

# A plain scalar that reads the same in block and flow context and in both versions:
# no indicator first (a leading '-' only before a non-blank, for -1), no ':' or '#' at all,
# no flow indicators, single inner blanks, no blank at either end.
_PLAIN_SYNTAX = re.compile(
    r"(?:[^\s\-?:,\[\]{}#&*!|>'\"%@`]|-(?=[^\s,\[\]{}#:]))"
    r"[^\s,\[\]{}#:]*(?: [^\s,\[\]{}#:]+)*\Z"
)
# Characters YAML allows unescaped (the spec's c-printable)...
# NEL, LS and PS are line breaks to YAML 1.1 and a BOM is special: escape them too.
_NEEDS_ESCAPE = re.compile(
    "[^\t\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_SAME_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_SAME_FLOAT = re.compile(
    r"[-+]?(?:(?:0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z"
    r"|[-+]?\.(?:inf|Inf|INF)\Z|\.(?:nan|NaN|NAN)\Z"
)
_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x00": "\\0"}
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))


def check_yaml_text(value: str) -> None:
    """Refuse strings that cannot be stored in a UTF-8 YAML file (lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(f"value {value!r} is not valid UTF-8 text") from None


def plain_tag(text: str) -> str | None:
    """The tag both YAML 1.1 and 1.2 give ``text`` written plain, or None.

    None when ``text`` is not safe as a plain scalar at all, or when the two versions
    disagree (``no`` is a bool to 1.1 and a string to 1.2).
    """
    if not _PLAIN_SYNTAX.match(text) or _NEEDS_ESCAPE.search(text):
        return None
    tag = _agreed_tag(text)
    # Same tag is not enough for numbers: 0777 is 511 to YAML 1.1 and 777 to 1.2.
    if tag == INT_TAG and not _SAME_INT.match(text):
        return None
    if tag == FLOAT_TAG and not _SAME_FLOAT.match(text):
        return None
    return tag


def _agreed_tag(text: str) -> str | None:
    tags = {str(r.resolve(ScalarNode, text, (True, False))) for r in _RESOLVERS}
    tags.add(_pyyaml_resolver().resolve(_pyyaml_scalar_node(), text, (True, False)))
    return tags.pop() if len(tags) == 1 else None


def _pyyaml_resolver():
    """PyYAML's own resolver: the YAML 1.1 reader most tools use (``1e3`` is a string to it)."""
    global _PYYAML
    if _PYYAML is None:
        import yaml

        _PYYAML = (yaml.resolver.Resolver(), yaml.nodes.ScalarNode)
    return _PYYAML[0]


def _pyyaml_scalar_node():
    _pyyaml_resolver()
    return _PYYAML[1]


_PYYAML = None


def plain_is_string(text: str) -> bool:
    """True if ``text`` written plain is the string ``text`` to YAML 1.1 and 1.2 readers."""
    return plain_tag(text) == STR_TAG


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


def single_quoted(value: str) -> str | None:
    """``value`` in single quotes, or None where single quotes cannot carry it."""
    if _NEEDS_ESCAPE.search(value) or "\t" in value:
        return None
    return "'" + value.replace("'", "''") + "'"


def quoted(value: str, style: str | None = DOUBLE) -> str:
    """``value`` quoted: in single quotes when ``style`` asks and they can carry it."""
    if style == SINGLE:
        return single_quoted(value) or double_quoted(value)
    return double_quoted(value)


def render(value: str, style: str | None = PLAIN, fallback_quote: str | None = DOUBLE) -> str:
    """``value`` as a string scalar in ``style`` (plain, ``'`` or ``"``) where it can be.

    A plain value that YAML would read as anything but that string (``no``, ``0777``,
    ``1e3``, ``~``, ``512``, ``a: b``) is quoted instead, in ``fallback_quote``.
    """
    check_yaml_text(value)
    if style in (SINGLE, DOUBLE):
        return quoted(value, style)
    if plain_is_string(value):
        return value
    return quoted(value, fallback_quote)


def render_scalar(value: str, old_style: str | None = None) -> str:
    """``value`` as a string scalar, keeping a quoted ``old_style``; plain when safe."""
    return render(value, old_style if old_style in (SINGLE, DOUBLE) else PLAIN)


def node_style(node: ScalarNode | None) -> str | None:
    """The quoting of a scalar node: ``'``, ``"``, or None (plain, block or absent)."""
    if isinstance(node, ScalarNode) and node.style in (SINGLE, DOUBLE):
        return node.style
    return PLAIN


def neighbour_style(nodes: Iterable[ScalarNode | None]) -> tuple[str | None, str | None]:
    """(style most neighbours use, the quote most quoted neighbours use).

    Empty and absent values do not vote; a tie goes to plain, then to double quotes.
    """
    styles = Counter(
        node_style(n) for n in nodes if isinstance(n, ScalarNode) and n.value != ""
    )
    quotes = Counter({q: styles[q] for q in (DOUBLE, SINGLE) if styles[q]})
    quote = quotes.most_common(1)[0][0] if quotes else DOUBLE
    if not styles or styles[PLAIN] >= max(styles[SINGLE], styles[DOUBLE]):
        return PLAIN, quote
    return (SINGLE if styles[SINGLE] > styles[DOUBLE] else DOUBLE), quote


def resolved_tag(node: ScalarNode) -> str | None:
    """The tag YAML 1.1 and 1.2 agree on for a scalar node as written, or None."""
    if node.style is not None:
        return STR_TAG
    return _agreed_tag(node.value) if node.value else NULL_TAG


__all__ = [
    "DOUBLE",
    "NULL_TAG",
    "NUMBER_TAGS",
    "PLAIN",
    "SINGLE",
    "STR_TAG",
    "check_yaml_text",
    "double_quoted",
    "neighbour_style",
    "node_style",
    "plain_is_string",
    "plain_tag",
    "quoted",
    "render",
    "render_scalar",
    "resolved_tag",
    "single_quoted",
]
