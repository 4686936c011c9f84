"""Words of a unit as another reader sees them, and words written so systemd reads them back.

:func:`as_shell_word` turns an ``ExecStart=`` word (already unquoted and unescaped by
:mod:`.unit`) into a shell word that means the same to the bash format's launch reader
(:mod:`envknobs.formats.common.launch`), which then finds the server and its flags exactly
as in a serve script.  Where systemd's command line differs from a shell, the
translation carries systemd's meaning:

* no shell runs: no globbing, pipes, ``&&``, redirections or ``~``; every literal word is
  passed as is (rendered single-quoted for the reader when it holds shell characters);
* ``$NAME`` is replaced only as a word of its own, split at blanks into zero or more
  arguments (a shell's unquoted ``$NAME``: opaque to the reader); ``${NAME}`` anywhere in
  a word is replaced by the value as one argument (a shell's ``"${NAME}"``: computed);
  ``$$`` is a literal ``$``; ``$NAME`` inside a longer word stays literal (``--x=$A`` is
  the text ``--x=$A``, unlike a shell);
* specifiers other than ``%%`` (``%i``, ``%n``, ``%h`` ...) are computed.

:func:`render_exec_word` and :func:`render_env_word` write a value so systemd reads it
back exactly: bare when it is only ``[A-Za-z0-9_@+=:,./-]``, else in the quotes the
old word used (double quotes by default) with ``\\``, the quote, ``%`` (as ``%%``), control
characters (C escapes) and, on a command line, ``$`` (as ``$$``) escaped.
"""

from __future__ import annotations

import re

from envknobs.formats.common.shellwords import quote_value

_BARE = re.compile(r"[A-Za-z0-9_@+=:,./-]+\Z")
_VAR_WORD = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)\Z")
_DOLLAR = re.compile(r"\$\$|\$\{([^}]*)\}|%(.)?", re.S)
_CONTROL = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\v": "\\v"}


def as_shell_word(text: str) -> str:
    """The shell word the bash launch reader should see for ``ExecStart=`` word ``text``."""
    if text.startswith("$") and text[1:2] not in ("{", "$"):
        m = _VAR_WORD.match(text)
        return f"${m.group(1)}" if m else '"${_SYSTEMD_UNSET}"'
    out, last = [], 0
    for m in _DOLLAR.finditer(text):
        literal = text[last : m.start()]
        last = m.end()
        token = m.group(0)
        if token == "$$":
            literal += "$"
        elif token == "%%":
            literal += "%"
        if literal:
            out.append(quote_value(literal))
        if token.startswith("${"):
            out.append('"${' + (m.group(1) or "_") + '}"' if re.fullmatch(
                r"[A-Za-z_][A-Za-z0-9_]*", m.group(1) or "") else '"${_SYSTEMD_VAR}"')
        elif token.startswith("%") and token != "%%":
            out.append('"${_SYSTEMD_SPECIFIER}"')
    if last < len(text) or not out:
        out.append(quote_value(text[last:]))
    return "".join(out)


def exec_literal(text: str) -> str | None:
    """The argument systemd passes for ``ExecStart=`` word ``text`` (None: computed)."""
    if text.startswith("$") and text[1:2] not in ("{", "$"):
        return None
    out, last = [], 0
    for m in _DOLLAR.finditer(text):
        out.append(text[last : m.start()])
        last = m.end()
        if m.group(0) == "$$":
            out.append("$")
        elif m.group(0) == "%%":
            out.append("%")
        else:
            return None
    out.append(text[last:])
    return "".join(out)


def _escaped(value: str, quote: str, dollars: bool) -> str:
    out = []
    for c in value:
        if c == "\\" or c == quote:
            out.append("\\" + c)
        elif c == "%":
            out.append("%%")
        elif c == "$" and dollars:
            out.append("$$")
        elif c in _CONTROL:
            out.append(_CONTROL[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return "".join(out)


def render_exec_word(value: str, quote: str = "") -> str:
    """``value`` as one ``ExecStart=`` argument; ``quote``: the old word's quote style."""
    if not quote and _BARE.match(value):
        return value
    q = quote or '"'
    return q + _escaped(value, q, dollars=True) + q


def render_env_word(name: str, value: str, style: str = "") -> str:
    """``NAME=value`` as one ``Environment=`` word.

    ``style``: how the old word was written: ``word`` (``"K=V"``), ``value``
    (``K="V"``), a quote character prefix (``'`` / ``"``: kept), or ``""`` (bare, quoted
    as a whole word where the value needs it)."""
    pair = f"{name}={value}"
    if style in ("", "bare") and _BARE.match(value or "x"):
        return pair
    q = "'" if style.startswith("'") else '"'
    if style.endswith("value"):
        return f"{name}={q}{_escaped(value, q, dollars=False)}{q}"
    return q + _escaped(pair, q, dollars=False) + q
