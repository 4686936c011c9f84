"""A unit's argument strings: ``Environment="OPTS=--port 8000 --tp 2"`` that ``ExecStart=``
expands with ``$OPTS`` (a word of its own: systemd splits the value at blanks into
arguments, see :mod:`envknobs.formats.common.argstring`).

Only an assignment that is the one systemd takes (the last, literal, not removed by
``UnsetEnvironment=``) and holds flags (its first word is ``--x``) is a string; ``$MODEL``
holding a model path stays an env knob.  Whether an ``EnvironmentFile=`` sets the same
name (it would win) is checked when the unit is edited, and said by ``target show``
(those files change on their own: they are read then, never cached with the unit).
``${OPTS}`` is one argument to systemd, never split: it is not a string of flags.
"""

from __future__ import annotations

import re

from envknobs.formats.common.argstring import ArgString
from envknobs.formats.common.text import holds_flags
from envknobs.formats.common.argstring import read_string
from envknobs.formats.systemd.service import Assignment
from envknobs.formats.systemd.service import Command
from envknobs.formats.systemd.service import Service

_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)\Z")


def content_span(text: str, a: Assignment) -> tuple[int, int]:
    """The file span of an assignment's value, without the quotes around the word
    (``"K=V"``) or around the value (``K="V"``)."""
    start, end = a.word.start, a.word.end
    raw = text[start:end]
    if len(raw) >= 2 and raw[0] in "'\"" and raw[-1] == raw[0]:
        start, end = start + 1, end - 1
    start += len(a.name) + 1
    if end - start >= 2 and text[start] in "'\"" and text[end - 1] == text[start]:
        start, end = start + 1, end - 1
    return start, end


def unit_strings(svc: Service, cmd: Command) -> tuple[dict[int, ArgString], list[str]]:
    """The ``$NAME`` words of ``cmd`` (index in ``cmd.words``) whose value is a string of
    flags, and notes on the ones holding flags that are not read."""
    strings: dict[int, ArgString] = {}
    notes: list[str] = []
    for i in cmd.argv:
        m = _VAR.match(cmd.words[i].text)
        a = svc.env.get(m.group(1)) if m else None
        if a is None or a.value is None or a.name in svc.unset or not holds_flags(a.value):
            continue
        where = (f"{a.name} in Environment= (line {a.directive.line}), expanded by "
                 f"${a.name} on ExecStart= (line {cmd.directive.line})")
        s, why = read_string(svc.text, a.name, *content_span(svc.text, a), a.value, where)
        if s is None:
            notes.append(f"line {a.directive.line}: {why}")
        else:
            strings[i] = s
    return strings, notes
