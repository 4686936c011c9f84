"""Setting and removing one launch flag among argument words, whatever holds the words.

The words of a launch are YAML list items (a container's ``args:``, a Helm values list, a
compose ``command:`` list) or shell words inside a string scalar (a compose ``command:``
string); an :class:`Words` editor knows how to change its own kind, and the rules of which
words change live here once:

* the occurrence that takes effect (the last: argparse) is the one edited; ``--x=v`` keeps
  its ``=``, a split value word is replaced, an ``nargs`` run is replaced as a whole;
* a switch is present or absent (``--no-x`` where the catalog says it is negatable);
* a new flag goes after the last word, in the form most flags with a value there use
  (``--x=v``, or the flag and its value as two words; switches do not vote); ``unset`` removes every occurrence and its value words.
"""

from __future__ import annotations

from typing import Protocol

from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common import FormatError


class Words(Protocol):
    """Edits of a launch's words (indices into the words ``scan_flags`` was given)."""

    count: int

    def value(self, i: int) -> str: ...

    def line(self, text: str, i: int) -> int: ...

    def replace(self, text: str, i: int, value: str) -> str: ...

    def insert_after(self, text: str, i: int, values: list[str]) -> str: ...

    def replace_run(self, text: str, indices: list[int], values: list[str]) -> str: ...

    def remove(self, text: str, indices: list[int]) -> str: ...


def set_flag(text: str, words: Words, uses: list[FlagUse], knob: str, value: str, flag) -> str:
    """``text`` with flag ``knob`` set to ``value`` (see the module docstring)."""
    mine = [u for u in uses if u.knob == knob]
    switch = flag is not None and getattr(flag, "type", None) == "bool"
    if mine:
        use = mine[-1]
        i = use.word.start
        if use.form == "equals":
            name = words.value(i).partition("=")[0]
            return words.replace(text, i, f"{name}={value}")
        if use.form == "space" and len(use.values) == 1:
            return words.replace(text, use.values[0].start, value)
        if use.form == "nargs":
            indices = [w.start for w in use.values]
            if not indices:
                return words.insert_after(text, i, value.split())
            return words.replace_run(text, indices, value.split())
        return _set_switch(text, words, use, value, flag)
    if not words.count:
        raise FormatError("there is no command or argument list to add a flag to; "
                          "add the arguments by hand")
    last = words.count - 1
    if switch or value == "true" and flag is None:
        return words.insert_after(text, last, [knob]) if value == "true" else text
    valued = [u for u in uses if u.form in ("equals", "space")]  # switches have no form
    equals = sum(u.form == "equals" for u in valued) > len(valued) / 2
    new = [f"{knob}={value}"] if equals else [knob, *(value.split(" ") if getattr(
        flag, "nargs", None) else [value])]
    return words.insert_after(text, last, new)


def _set_switch(text: str, words: Words, use: FlagUse, value: str, flag) -> str:
    from envknobs.formats.common.launch import bool_of

    wanted = bool_of(value)
    line = words.line(text, use.word.start)
    if wanted is None or use.form not in ("switch", "negated"):
        raise FormatError(f"line {line}: {use.knob} is a switch here (present or absent), "
                          f"not {value!r}")
    if wanted == (use.form == "switch"):
        return text
    if wanted:  # --no-x -> --x
        return words.replace(text, use.word.start, use.knob)
    if flag is None or not getattr(flag, "negatable", False):
        raise FormatError(f"line {line}: {use.knob} is a switch without a --no- form; "
                          "unset it instead")
    return words.replace(text, use.word.start, "--no-" + use.knob[2:])


def unset_flag(text: str, words: Words, uses: list[FlagUse], knob: str) -> str:
    """``text`` without any occurrence of flag ``knob`` (its value words too)."""
    doomed = [w.start for u in uses if u.knob == knob for w in (u.word, *u.values)]
    return words.remove(text, doomed) if doomed else text


def repeated_note(uses: list[FlagUse], line_of_word, what: str) -> list[str]:
    """A note for each flag written more than once: the last occurrence takes effect
    (argparse); an edit changes that one, an unset removes them all."""
    seen: dict[str, list[int]] = {}
    for u in uses:
        seen.setdefault(u.knob, []).append(line_of_word(u.word.start))
    return [f"{knob} is given {len(lines)} times in {what} (lines "
            f"{', '.join(map(str, lines))}): the last takes effect; record flag edits that "
            "one, --unset removes them all"
            for knob, lines in seen.items() if len(lines) > 1]


__all__ = ["Words", "repeated_note", "set_flag", "unset_flag"]
