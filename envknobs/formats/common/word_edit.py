"""Text surgery on serve scripts: removing and inserting words, flags and lines.

Every function returns new text and changes nothing but the bytes of the edit, so that
the inverse edit gives the original bytes back: a word removed with the blanks that
followed it is put back with exactly those blanks (:func:`removal_span` gives the span,
:func:`anchor_of` remembers the text in front of it), and a line inserted as a whole is
removed as a whole.
"""

from __future__ import annotations

from envknobs.formats.common.text import indent_at
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_start

_CONT = ("\\\n", "\\\r\n")


def _skip_gap(text: str, j: int) -> int:
    """Past blanks and ``\\``-newline continuations (and the next line's indentation)."""
    while True:
        if j < len(text) and text[j] in " \t":
            j += 1
        elif text.startswith(_CONT, j):
            j += 2 if text[j + 1] == "\n" else 3
        else:
            return j


def _rest_of_line_is_empty(text: str, j: int) -> bool:
    """Only blanks, a continuation backslash or a comment from ``j`` to the line break."""
    while j < len(text) and text[j] in " \t":
        j += 1
    return j >= len(text) or text[j] in "\r\n#" or text.startswith(_CONT, j)


def _ends_with_continuation(text: str, start: int) -> bool:
    """Whether the line before the one starting at ``start`` ends with a backslash."""
    if start == 0:
        return False
    prev_end = start - 1  # the \n
    if prev_end > 0 and text[prev_end - 1] == "\r":
        prev_end -= 1
    return prev_end > 0 and text[prev_end - 1] == "\\"


def removal_span(
    text: str, start: int, end: int, in_array: bool = False, lines: bool = True
) -> tuple[int, int]:
    """The span to delete to remove the words at ``start..end`` from their command/array.

    A flag alone on its line goes with its whole line (in an array, or a continuation
    line that ends with ``\\``); the last line of a continued command takes the
    continuation before it instead, so no dangling ``\\`` is left.  ``lines=False``
    (prefixes, assignment words) always takes the word with the blanks after it.  A word among others
    goes with the blanks after it, or before it when it is the last word.
    """
    first = line_start(text, start)
    blank_before = text[first:start].strip(" \t") == ""
    if lines and blank_before and _rest_of_line_is_empty(text, end):
        j = end
        while j < len(text) and text[j] in " \t":
            j += 1
        continued = text.startswith(_CONT, j)
        if in_array or continued:
            return first, line_end(text, end)
        if _ends_with_continuation(text, first):
            k = first - 1
            if k > 0 and text[k - 1] == "\r":
                k -= 1
            k -= 1  # the backslash
            while k > 0 and text[k - 1] in " \t":
                k -= 1
            return k, end
    j = _skip_gap(text, end)
    if j < len(text) and text[j] not in "\r\n;&|#)":
        return start, j
    k = start
    while k > 0 and text[k - 1] in " \t":
        k -= 1
    return k, end


def anchor_of(
    text: str, cut: tuple[int, int], context_start: int, context_end: int
) -> dict[str, str]:
    """What a removal needs to be undone: the removed text, the text just in front of it
    (from the previous word of its command or array) and just after it (to the end of the
    next word), so it can be found again when lines above have moved."""
    a, b = cut
    return {
        "before": text[max(context_start, 0) : a],
        "removed": text[a:b],
        "after": text[b : max(context_end, b)],
    }


def put_back(text: str, span: tuple[int, int], anchor: dict[str, str]) -> str | None:
    """Re-insert ``anchor['removed']`` right after the unique ``anchor['before']`` within
    ``span`` of ``text`` (else right before the unique ``anchor['after']``); None when
    neither context is found exactly once."""
    before, removed = anchor.get("before"), anchor.get("removed")
    after = anchor.get("after") or ""
    if not isinstance(before, str) or not isinstance(removed, str) or not removed:
        return None
    lo, hi = span
    if not before:  # it was the first word: it goes back in front of the next one
        if not after or not text.startswith(after, lo):
            return None
        return text[:lo] + removed + text[lo:]
    hits = _hits(text, before, lo, hi)
    if len(hits) == 1:
        at = hits[0] + len(before)
    else:
        # the word in front went in the same revert (a knob recorded after this one was
        # added there): the text after it places it as exactly
        later = _hits(text, after, lo, hi) if after.strip() else []
        if len(later) != 1:
            return None
        at = later[0]
    return text[:at] + removed + text[at:]


def _hits(text: str, needle: str, lo: int, hi: int) -> list[int]:
    hits = []
    pos = text.find(needle, lo)
    while 0 <= pos and pos + len(needle) <= hi:
        hits.append(pos)
        pos = text.find(needle, pos + 1)
    return hits


def insert_words(text: str, after: int, words: str) -> str:
    """Insert ``words`` inline after offset ``after`` (the end of a word), space-separated."""
    return text[:after] + " " + words + text[after:]


def insert_continuation_line(text: str, before_line_of: int, words: str) -> str:
    """A new ``indent words \\`` line before the line holding ``before_line_of``."""
    start = line_start(text, before_line_of)
    eol = "\r\n" if text.find("\r\n", start) == text.find("\n", start) - 1 else "\n"
    return text[:start] + indent_at(text, before_line_of) + words + " \\" + eol + text[start:]


def insert_line_before(text: str, before_line_of: int, line: str, indent: str) -> str:
    """A new whole line ``indent + line`` before the line holding ``before_line_of``."""
    start = line_start(text, before_line_of)
    eol = "\r\n" if "\r\n" in text else "\n"
    return text[:start] + indent + line + eol + text[start:]
