"""Launch flags on a unit's ``ExecStart=`` line, read with the bash format's launch reader.

The command's words (:mod:`.unit`) are translated to the shell words that mean the same
(:func:`.words.as_shell_word`) and handed to :func:`envknobs.formats.common.launch.launch_shape`
and :func:`~envknobs.formats.common.launch.scan_flags`: the same servers (``vllm serve``,
``python -m sglang.launch_server``, ``python3 -m dynamo.vllm`` ...), the same wrappers
(``/usr/bin/env``, ``numactl`` ...) and the same argparse rules (last occurrence wins,
switches, ``--no-x``, ``nargs``) as a serve script.  A flag's words are then edited in
the unit's text at their source spans, rendered by systemd's quoting rules, and the text
surgery of the bash format (:mod:`envknobs.formats.common.word_edit`) does the rest: systemd's
``\\``-newline continuation is the shell's, so a flag on its own continuation line is
added and removed as that whole line, a flag among others with the blanks around it.

A command the reader does not recognise as a server (``/opt/run-vllm.sh``, ``bash -c
'...'``) has no flags the ledger can see: ``target show`` names it, and a flag edit is
refused naming its line.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from envknobs.formats.common.argstring import ArgString
from envknobs.formats.common.word_edit import insert_continuation_line
from envknobs.formats.common.word_edit import insert_words
from envknobs.formats.common.word_edit import removal_span
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.launch import Shape
from envknobs.formats.common.launch import launch_shape
from envknobs.formats.common.launch import scan_flags
from envknobs.formats.common.shell_lexer import Word as ShellWord
from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import line_start
from envknobs.formats.systemd.service import Command
from envknobs.formats.systemd.service import Service
from envknobs.formats.systemd.unit import Word
from envknobs.formats.systemd.words import as_shell_word
from envknobs.formats.systemd.words import exec_literal
from envknobs.formats.systemd.words import render_exec_word


@dataclass
class Launch:
    """The one ``ExecStart=`` command, read as a launch."""

    command: Command
    shape: Shape | None
    uses: list[FlagUse]  # word.start: the index of the flag's word in command.words
    # every flag in argv order, with the string it is in (None: on the command itself)
    order: list[tuple[ArgString | None, FlagUse]] = field(default_factory=list)
    strings: dict[int, ArgString] = field(default_factory=dict)  # $NAME word index -> string
    notes: list[str] = field(default_factory=list)  # strings of flags not read, and why

    @property
    def engine(self) -> str | None:
        return self.shape.engine if self.shape else None

    def word(self, shell: ShellWord) -> Word:
        return self.command.words[shell.start]

    def program(self) -> str:
        return self.command.words[0].text.lstrip("-@:+!")


def _shell_words(cmd: Command) -> list[ShellWord]:
    first = cmd.words[0].text.lstrip("-@:+!")
    words = [ShellWord(0, 0, as_shell_word(first))]
    words += [ShellWord(i, i, as_shell_word(cmd.words[i].text)) for i in cmd.argv]
    return words


def read_launch(cmd: Command, svc: Service | None = None) -> Launch:
    """The command as a launch; with ``svc``, its ``$NAME`` words that hold strings of
    flags (:mod:`.strings`) are read as the arguments systemd splits them into."""
    from envknobs.formats.common.launch import flag_lookup
    from envknobs.formats.systemd.strings import unit_strings

    shape = launch_shape(_shell_words(cmd)) if cmd.error is None else None
    if shape is None:
        return Launch(cmd, None, [])
    lookup = flag_lookup(shape.engine)
    strings, notes = unit_strings(svc, cmd) if svc is not None else ({}, [])
    while True:
        argv: list[ShellWord] = []
        origin: dict[int, ArgString] = {}
        for w in shape.args:
            s = strings.get(w.start)
            argv += s.pieces if s is not None else [w]
            origin.update((id(p), s) for p in (s.pieces if s is not None else ()))
        uses = scan_flags(argv, lookup)
        # A flag whose value is on the other side of a string's edge cannot be edited
        # in one place: that string is left opaque.
        crossed = {origin.get(id(x)) for u in uses for x in u.values
                   if origin.get(id(x)) is not origin.get(id(u.word))} - {None}
        if not crossed:
            break
        strings = {i: s for i, s in strings.items() if s not in crossed}
    order = [(origin.get(id(u.word)), u) for u in uses]
    return Launch(cmd, shape, [u for s, u in order if s is None], order, strings, notes)


def the_launch(svc: Service, text: str) -> Launch:
    """The command flags are read from and written to; FormatError naming the lines when
    there is none, several, or one the reader does not recognise."""
    if not svc.commands:
        raise FormatError("the unit has no ExecStart= command to put a flag on")
    if len(svc.commands) > 1:
        lines = ", ".join(f"line {c.directive.line}" for c in svc.commands)
        raise FormatError(f"the unit runs {len(svc.commands)} ExecStart= commands ({lines}): "
                          "not picking one; edit the flag by hand")
    cmd = svc.commands[0]
    if cmd.error is not None:
        raise FormatError(f"line {cmd.directive.line}: ExecStart= has {cmd.error}: systemd "
                          "ignores it; fix it by hand")
    launch = read_launch(cmd, svc)
    if launch.shape is None:
        raise FormatError(unrecognised(launch))
    return launch


def unrecognised(launch: Launch) -> str:
    return (f"line {launch.command.directive.line}: ExecStart= runs {launch.program()!r}, "
            "which the ledger does not recognise as a server launch (vllm serve, python -m "
            "sglang.launch_server, python3 -m dynamo.vllm, ...): its flags are not read")


def opaque_words(launch: Launch) -> list[int]:
    """Indices (in ``command.words``) of the server's argument words systemd computes
    (``$OPTS``, ``${OPTS}``, a specifier) that are no flag's value: each may hold flags."""
    values = {w.start for u in launch.uses for w in u.values}
    assert launch.shape is not None
    return [w.start for w in launch.shape.args if w.start not in values and
            w.start not in launch.strings and
            exec_literal(launch.command.words[w.start].text) is None]


def refuse_opaque_after(launch: Launch, knob: str) -> None:
    """FormatError where a computed word after ``knob``'s last occurrence may set it
    again: an edit there could take no effect (a new flag goes last: it wins)."""
    uses = [u for u in launch.uses if u.knob == knob]
    if not uses:
        return
    last = uses[-1].end
    after = [launch.command.words[i] for i in opaque_words(launch) if i > last]
    if after:
        raise FormatError(
            f"line {launch.command.directive.line}: ExecStart= passes "
            f"{', '.join(w.text for w in after)} after {knob}, which systemd expands into "
            f"arguments the ledger cannot see (they may set {knob} again): edit it by hand")


def flag_values(launch: Launch) -> dict[str, str]:
    """Flag -> value; the last occurrence wins; computed values left out, and so are
    flags set in more than one place (:func:`spread`): they have no single value."""
    out: dict[str, str] = {}
    for s, use in launch.order:
        value = use.value
        if s is None and value is not None and use.form in ("space", "equals", "nargs"):
            words = [launch.word(w) for w in use.values] or [launch.word(use.word)]
            literal = [exec_literal(w.text) for w in words]
            value = None if any(v is None for v in literal) else value
        out.pop(use.knob, None)
        if value is not None:
            out[use.knob] = value
    for knob in spread(launch):
        out.pop(knob, None)
    return out


def holders(launch: Launch, knob: str) -> tuple[list[tuple[ArgString, FlagUse]], list[FlagUse]]:
    """The last use of ``knob`` in each string that has it, and its uses on the command."""
    last: dict[int, tuple[ArgString, FlagUse]] = {}
    for s, u in launch.order:
        if s is not None and u.knob == knob:
            last[id(s)] = (s, u)
    return list(last.values()), [u for u in launch.uses if u.knob == knob]


def spread(launch: Launch) -> set[str]:
    """Flags set in a string and on the command, or in several strings."""
    origins: dict[str, set[int]] = {}
    for s, u in launch.order:
        origins.setdefault(u.knob, set()).add(id(s))
    return {k for k, o in origins.items() if len(o) > 1 and o != {id(None)}}


# -- edits ----------------------------------------------------------------------------
def _splice(text: str, w: Word, new: str) -> str:
    return text[: w.start] + new + text[w.end :]


def _style(text: str, w: Word) -> str:
    return text[w.start] if text[w.start] in "'\"" else ""


def set_flag(text: str, launch: Launch, knob: str, value: str, flag) -> str:
    """``text`` with ``knob`` set to ``value`` on the launch (added when absent)."""
    from envknobs.formats.common.launch import bool_of

    uses = [u for u in launch.uses if u.knob == knob]
    if not uses:
        return add_flag(text, launch, knob, value, flag)
    use = uses[-1]
    w = launch.word(use.word)
    if use.form == "equals":
        name = w.text.partition("=")[0]
        return _splice(text, w, render_exec_word(f"{name}={value}", _style(text, w)))
    if use.form == "space" and len(use.values) == 1:
        v = launch.word(use.values[0])
        return _splice(text, v, render_exec_word(value, _style(text, v)))
    if use.form == "nargs" and use.values:
        first, last = launch.word(use.values[0]), launch.word(use.values[-1])
        new = " ".join(render_exec_word(p) for p in value.split())
        return text[: first.start] + new + text[last.end :]
    wanted = bool_of(value)
    line = line_of(text, w.start)
    if wanted is None or use.form not in ("switch", "negated"):
        raise FormatError(f"line {line}: {knob} is a switch here (present or absent), "
                          f"not {value!r}")
    if wanted == (use.form == "switch"):
        return text
    if wanted:
        return _splice(text, w, knob)
    if flag is None or not getattr(flag, "negatable", False):
        raise FormatError(f"line {line}: {knob} is a switch without a --no- form; unset it")
    return _splice(text, w, "--no-" + knob[2:])


def flag_span(text: str, launch: Launch, use: FlagUse) -> tuple[int, int]:
    """What removing one occurrence deletes: its words, with its line or blanks."""
    first = launch.word(use.word)
    last = launch.word(use.values[-1]) if use.values else first
    return removal_span(text, first.start, last.end)


def unset_flag(text: str, launch: Launch, knob: str) -> str:
    """``text`` without any occurrence of ``knob`` (its value words too)."""
    for use in sorted((u for u in launch.uses if u.knob == knob),
                      key=lambda u: -launch.word(u.word).start):
        start, end = flag_span(text, launch, use)
        text = text[:start] + text[end:]
    return text


def new_flag_words(knob: str, value: str, flag, equals: bool) -> str:
    """The words a new flag is written as: the bash format's, rendered by systemd's rules."""
    from envknobs.formats.common.launch import flag_text

    return flag_text(knob, value, lambda _: flag, equals, quote=render_exec_word)


def add_flag(text: str, launch: Launch, knob: str, value: str, flag) -> str:
    """A new flag at the end of the command: on a continuation line of its own where the
    command's last argument starts one (before the line of the flag that owns a value
    standing on its own line), else after the last word."""
    valued = [u for u in launch.uses if u.form in ("space", "equals")]
    equals = sum(u.form == "equals" for u in valued) * 2 > len(valued)
    new = new_flag_words(knob, value, flag, equals)
    words = launch.command.words
    last = words[-1]
    owner = next((u for u in launch.uses if u.values and launch.word(u.values[-1]) is last), None)
    anchor = launch.word(owner.word) if owner is not None else last
    first_line = line_of(text, words[0].start)
    starts_line = text[line_start(text, anchor.start) : anchor.start].strip() == ""
    if line_of(text, anchor.start) > first_line and starts_line:
        return insert_continuation_line(text, anchor.start, new)
    return insert_words(text, last.end, new)


def launch_of(svc: Service) -> Launch | None:
    """The unit's one launch (None: no ``ExecStart=``, several, or one that does not read)."""
    if len(svc.commands) != 1 or svc.commands[0].error is not None:
        return None
    return read_launch(svc.commands[0], svc)


def launch_strings(launch: Launch | None) -> dict[str, ArgString]:
    """The launch's strings of flags by variable name (their flags are the unit's knobs,
    not the variable itself)."""
    return {s.name: s for s in launch.strings.values()} if launch is not None else {}
