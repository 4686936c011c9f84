"""Small helpers shared by the target formats: lines, line endings, argument checks."""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from envknobs.formats.common import FormatError
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value


# The deepest nesting any reader of a target follows before refusing the file: ``$(...)``
# and compound commands in bash, mappings and sequences in YAML (dotenv has none).  No
# serve script or manifest comes near it (a Deployment is ~12 deep, a CRD schema ~40);
# each level is a recursion of the reader, and a file past it is refused naming its line
# rather than ending in a RecursionError.
MAX_NESTING = 100


def line_of(text: str, pos: int) -> int:
    """1-based line number of offset ``pos``."""
    return text.count("\n", 0, pos) + 1


def line_start(text: str, pos: int) -> int:
    """Offset of the first character of the line holding ``pos``."""
    return text.rfind("\n", 0, pos) + 1


def line_end(text: str, pos: int) -> int:
    """Offset just past the line break that ends the line holding ``pos`` (or len(text))."""
    nl = text.find("\n", pos)
    return len(text) if nl < 0 else nl + 1


def newline_of(text: str) -> str:
    """The file's line ending: the first one found, LF for a file without any."""
    nl = text.find("\n")
    if nl > 0 and text[nl - 1] == "\r":
        return "\r\n"
    return "\n"


def indent_at(text: str, pos: int) -> str:
    """The leading blanks of the line holding ``pos``."""
    start = line_start(text, pos)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def insert_line(text: str, pos: int, line: str) -> str:
    """Insert ``line`` (without its line break) as a whole line at offset ``pos``.

    ``pos`` is a line start or len(text).  The file's line ending is used, and a file
    that ended without a final newline still does after the insertion (so that
    :func:`remove_lines` of the new line gives the original text back).
    """
    eol = newline_of(text)
    if pos >= len(text) and text and not text.endswith("\n"):
        return text + eol + line
    return text[:pos] + line + eol + text[pos:]


def remove_lines(text: str, start: int, end: int) -> str:
    """Remove the whole lines spanning offsets ``start``..``end`` (the inverse of insert_line)."""
    first = line_start(text, start)
    last = line_end(text, max(end - 1, start))
    if last >= len(text) and not text.endswith("\n") and first > 0:
        # The last line had no line break: take the one before it instead, so the
        # file still ends without one.
        brk = first - 1
        if brk > 0 and text[brk - 1] == "\r":
            brk -= 1
        return text[:brk]
    return text[:first] + text[last:]


def check_assignment_args(knob: str, value: str | None = None) -> None:
    """Validate a knob name (and value); raises KnobError."""
    check_knob_name(knob)
    if value is not None:
        check_knob_value(value)


def verified(
    before: Mapping[str, str], after: Mapping[str, str], knob: str, value: str | None, out: str
) -> str:
    """Return ``out`` if re-reading it shows exactly the intended change, else FormatError.

    A last line of defence: an unclosed quote or here-document elsewhere in the file could
    swallow a new line, or an edit could shift what another knob reads.  Better to refuse
    than to write a file that does not say what the ledger thinks it says.
    """
    return verified_many(before, after, {knob: value}, out)


def each_in_turn(text: str, knobs: Sequence[str], edit: Callable[[str, str], str]) -> str:
    """``edit(text, knob)`` for each knob, each verified on its own; one refused only
    because another edit of the same batch is not made yet is tried again after the rest
    (removing ``--model "$MODEL"`` before ``MODEL`` would leave MODEL read by nothing, a
    change the check refuses; after it, it is the change asked for).  So the batch does
    not depend on the order its edits are given in.  A round that makes no edit raises a
    refusal, nothing written: the first pending knob's as it reads in the file as given
    (its lines are the file's, not those of the batch half made), else the one it met."""
    original, pending = text, list(knobs)
    while pending:
        refused: list[tuple[str, FormatError]] = []
        for knob in pending:
            try:
                text = edit(text, knob)
            except FormatError as e:
                refused.append((knob, e))
        if len(refused) == len(pending):
            for knob, _ in refused:
                edit(original, knob)  # raises, where it does, with the file's own lines
            raise refused[0][1]
        pending = [knob for knob, _ in refused]
    return text


_FIRST_FLAG = re.compile(r"--[A-Za-z][A-Za-z0-9_.-]*(=|\Z)")


def holds_flags(value: str) -> bool:
    """Whether a value reads as argument words that start with a flag (``--x ...``)."""
    first = value.split(None, 1)[:1]
    return bool(first) and _FIRST_FLAG.match(first[0]) is not None


def flags_string_refusal(knob: str) -> FormatError:
    """The refusal of an edit that makes ``knob``'s value a string of launch flags (every
    format says it alike): the file would read the string's flags as knobs of their own,
    and the ledger's entry would name a knob the file no longer has."""
    return FormatError(f"{knob}: the new value is a string of launch flags, whose flags are "
                       "knobs of their own: record them as flags (ledger record flag TARGET "
                       "--FLAG=V) once the string holds one, or edit it by hand")


def verified_many(
    before: Mapping[str, str], after: Mapping[str, str], edits: Mapping[str, str | None],
    out: str,
) -> str:
    """:func:`verified` for several knobs set (or unset, for None) at once."""
    expected = dict(before)
    for knob, value in edits.items():
        if value is None:
            expected.pop(knob, None)
        else:
            expected[knob] = value
    if dict(after) != expected:
        wrong = sorted(k for k in set(after) | set(expected) if after.get(k) != expected.get(k))
        for knob, value in edits.items():
            # The value made a string of launch flags (``--x 1``): the file now reads its
            # flags as knobs instead of the knob; say that, not "an unclosed quote".
            if value is not None and not knob.startswith("-") and holds_flags(value) and \
                    knob in wrong and \
                    all(k == knob or (k.startswith("-") and k not in before) for k in wrong):
                raise flags_string_refusal(knob)
        what = " and ".join(f"{'unset' if v is None else 'set'} {k}"
                            for k, v in list(edits.items())[:3])
        if len(edits) > 3:
            what += f" (and {len(edits) - 3} more)"
        raise FormatError(
            f"cannot {what} safely: re-reading the edited file changes "
            f"{', '.join(wrong)} (is there an unclosed quote or block near the edit?)"
        )
    return out


_LINE = re.compile(r"\b(lines?) (\d+)((?: and |, )(\d+))?")


def shift_said(message: str, shift: int) -> str:
    """A message about text embedded in a file (a script in a YAML block, in a quoted
    word) with its ``line N`` as the file line it is on (``line N+shift``)."""
    def moved(m: re.Match) -> str:
        tail = f"{m.group(3)[:-len(m.group(4))]}{int(m.group(4)) + shift}" if m.group(4) else ""
        return f"{m.group(1)} {int(m.group(2)) + shift}{tail}"
    return _LINE.sub(moved, message)


def shifted(action, inner: str, shift: int):
    """``action(inner)``, its errors naming the file's lines (``shift`` lines down)."""
    from dataclasses import replace

    from envknobs.formats.common.places import AmbiguousKnob

    try:
        return action(inner)
    except AmbiguousKnob as e:
        places = tuple(replace(p, line=p.line + shift) for p in e.places)
        raise AmbiguousKnob(e.knob, places, e.action, e.reason,
                            tuple(n + shift for n in e.candidates)) from e
    except FormatError as e:
        raise FormatError(shift_said(str(e), shift)) from e
