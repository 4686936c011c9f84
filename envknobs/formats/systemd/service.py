"""What a unit's ``[Service]`` section gives the process it starts: env and command.

* ``Environment=``: each word ``K=V`` an assignment, later ones winning; an empty
  ``Environment=`` drops every assignment before it.  Words that are not ``NAME=...``
  are ignored (as systemd ignores them), and after a syntax error the rest of the line
  is.  A value holding a specifier other than ``%%`` is *computed*.
* ``UnsetEnvironment=``: ``K`` removes K from the final environment (``K=V`` only that
  exact assignment); it wins over everything, so a knob named there has no value.
* ``EnvironmentFile=[-]PATH``: read just before the start, it wins over ``Environment=``;
  the file is another target (``--format dotenv``): see :mod:`.envfiles`.
* ``ExecStart=``: the command; an empty assignment drops the ones before it, and only
  ``Type=oneshot`` takes more than one (systemd refuses the unit otherwise).  A lone
  ``;`` word separates commands, ``\\;`` is a literal ``;``.  The first word may carry
  the prefixes ``@ - : + !`` (``@``: the next word is argv[0], not an argument).

Only ``[Service]`` counts: ``Environment=`` elsewhere is ignored by systemd (it says
``Unknown key``).  Drop-ins (``NAME.service.d/*.conf``) are other files the ledger does
not read; a unit with drop-ins should be managed there.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from dataclasses import field

from envknobs.formats.systemd.unit import Directive
from envknobs.formats.systemd.unit import Word
from envknobs.formats.systemd.unit import directives
from envknobs.formats.systemd.unit import resolve_specifiers
from envknobs.formats.systemd.unit import split_words

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_EXEC_PREFIX = re.compile(r"[-@:+!]*")


@dataclass(frozen=True)
class Assignment:
    """One ``K=V`` word of an ``Environment=`` line."""

    name: str
    value: str | None  # None: computed (a specifier)
    word: Word
    directive: Directive
    index: int  # its position among the directive's words
    ordinal: int  # which Environment= directive of the unit (1-based)


@dataclass(frozen=True)
class EnvFile:
    path: str
    optional: bool
    line: int


@dataclass(frozen=True)
class Command:
    """One command of ``ExecStart=``: its words as written and the argv words."""

    directive: Directive
    words: tuple[Word, ...]  # every word of the command (the program first)
    argv: tuple[int, ...]  # indices into ``words`` of argv[1:], after the program
    error: str | None = None


@dataclass
class Service:
    env: dict[str, Assignment] = field(default_factory=dict)  # the effective assignment
    dead: list[Assignment] = field(default_factory=list)  # overridden or reset
    env_lines: list[Directive] = field(default_factory=list)  # Environment= after a reset
    all_env: list[Directive] = field(default_factory=list)
    unset: dict[str, int] = field(default_factory=dict)  # UnsetEnvironment= name -> line
    env_files: list[EnvFile] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    exec_lines: list[Directive] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, what systemd ignores)
    has_section: bool = False
    oneshot: bool = False


def _environment(svc: Service, d: Directive, ordinal: int) -> None:
    if not d.value:
        svc.dead += svc.env.values()
        svc.env.clear()
        svc.env_lines.clear()
        return
    svc.env_lines.append(d)
    for index, w in enumerate(split_words(d, relax=False)):
        if w.error is not None:
            svc.errors.append((d.line, f"{w.error}: systemd ignores the rest of this line"))
            break
        name, eq, raw = w.text.partition("=")
        if not eq or not _NAME.match(name):
            svc.errors.append((d.line, f"{w.text!r} is not an assignment: systemd ignores it"))
            continue
        if name in svc.env:
            svc.dead.append(svc.env.pop(name))
        svc.env[name] = Assignment(name, resolve_specifiers(raw), w, d, index, ordinal)


def _exec(svc: Service, d: Directive) -> None:
    if not d.value:
        svc.commands.clear()
        svc.exec_lines.clear()
        return
    svc.exec_lines.append(d)
    words = split_words(d, relax=True)
    bad = next((w.error for w in words if w.error), None)
    groups: list[list[Word]] = [[]]
    for w in words:
        if w.text == ";" and not w.quote:
            groups.append([])
        else:
            groups[-1].append(w)
    for group in (g for g in groups if g):
        prefix = _EXEC_PREFIX.match(group[0].text).group(0)  # type: ignore[union-attr]
        first = 2 if "@" in prefix else 1
        svc.commands.append(Command(d, tuple(group), tuple(range(first, len(group))), bad))


@functools.lru_cache(maxsize=64)
def read_service(text: str) -> Service:
    """The ``[Service]`` section(s) of ``text``, read (see the module docstring)."""
    svc = Service()
    ordinal = 0
    for d in directives(text):
        if d.section != "Service":
            continue
        svc.has_section = True
        if d.key == "Environment":
            ordinal += 1
            svc.all_env.append(d)
            _environment(svc, d, ordinal)
        elif d.key == "UnsetEnvironment":
            for w in split_words(d, relax=False):
                if w.error is None and _NAME.match(w.text):
                    svc.unset[w.text] = d.line
        elif d.key == "EnvironmentFile":
            if not d.value:
                svc.env_files.clear()
                continue
            path = d.value[1:] if d.value.startswith("-") else d.value
            svc.env_files.append(EnvFile(path.strip(), d.value.startswith("-"), d.line))
        elif d.key == "ExecStart":
            _exec(svc, d)
        elif d.key == "Type":
            svc.oneshot = d.value == "oneshot"
    return svc


def env_values(svc: Service) -> dict[str, str]:
    """Name -> value of every effective, literal assignment (computed ones left out)."""
    return {n: a.value for n, a in svc.env.items() if a.value is not None and n not in svc.unset}
