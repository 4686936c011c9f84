"""Where a knob's line goes back when the ledger re-adds it.

Reverting an entry that introduced a knob (or restoring one that removed it) takes the
knob's line out of the file; undoing that must put it back *where it was*, not wherever
the format appends new knobs — otherwise the file would not come back byte-identical,
and two command orders reaching the same set of applied entries could leave different
files.

The file is seen as a *skeleton* — every line that is not a line of a knob the ledger
manages; the ledger never touches those — with the managed knobs' lines in between.
Each knob entry carries an *anchor*, taken while its knob's line is in the file:

* ``{"knob": K}``: the knob sits right after managed knob K (whose own anchor takes over
  when K is absent too), or
* ``{"lines": [...], "below": [...]}``: the knob sits right after these skeleton lines
  (up to three, so a blank line or a repeated comment still pins one place), and right
  before those — used when the lines above can no longer be found.

Whatever the anchor says, a knob goes back before the knobs anchored to it.

Knobs that claim one place — two knobs recorded on two clones, each right below the
same line; two knobs anchored to the same knob — go there in the ledger's record order
(of their anchor chains: a knob anchored to another sorts as that one did, then by its
own order), whichever of them came back first.  So a set of present knobs has one
layout, whatever the order of the commands (or the pulls) that led to it: a clone that
jumps over intermediate states gets the bytes of one that went through them.  A knob
placed by the lines above it claims the top of its gap, one placed by the lines below
it the bottom, so the two never compete.

Re-adding a knob lets the format write its line(s), then moves that block to its
anchor.  The move is kept only if the file then parses to exactly the intended values;
otherwise the format's own placement stands.  Anchors work on lines, using the format's
own ``removed`` (the text ``unset`` gives) to learn which lines a knob occupies, so they serve every format.
"""

from __future__ import annotations

import difflib
from typing import Iterable
from typing import Mapping

CONTEXT = 3


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def knob_span(fmt, text: str, knob: str, removed: str | None = None) -> tuple[int, int] | None:
    """Line range [start, end) that ``knob`` occupies, if it is whole lines.  ``removed``:
    ``text`` without the knob, where the caller's edit already made it (the format is not
    asked again)."""
    old = _lines(text)
    new = _lines(fmt.removed(text, knob) if removed is None else removed)
    ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "delete":
        return None
    return ops[0][1], ops[0][2]


def _spans(fmt, text: str, knobs: Iterable[str]) -> dict[str, tuple[int, int]]:
    out = {}
    for k in knobs:
        span = knob_span(fmt, text, k)
        if span is not None:
            out[k] = span
    return out


def _skeleton(text: str, spans: Mapping[str, tuple[int, int]]) -> list[tuple[int, str]]:
    """(line index, line) for every line outside the managed knobs' spans."""
    inside = {i for a, b in spans.values() for i in range(a, b)}
    return [(i, line.rstrip("\r\n")) for i, line in enumerate(_lines(text)) if i not in inside]


def anchor_for(
    fmt, text: str, knob: str, values: Mapping[str, str], managed: Mapping[str, dict | None],
    removed: str | None = None,
) -> dict | None:
    """The anchor of ``knob`` in ``text`` (where it is present), or None.

    ``managed``: the target's other ledger knobs, with their anchors (None if unknown);
    ``removed``: ``text`` without ``knob``, where already made (:func:`knob_span`).
    """
    span = knob_span(fmt, text, knob, removed)
    if span is None:
        return None
    start = span[0]
    present = {k for k in managed if k in values and k != knob}
    spans = _spans(fmt, text, present)
    for k, (_, end) in spans.items():
        if end == start:
            return {"knob": k}
    absent = {k: a for k, a in managed.items() if k not in values and k != knob and a}
    here = [k for k, a in absent.items()
            if _position(fmt, text, a, absent, spans) == start]
    if here:
        # An absent knob that would go back exactly here was above this one.  Of
        # several, take the last of their chain: the one no other candidate anchors to.
        referenced = {absent[k].get("knob") for k in here}
        last = [k for k in here if k not in referenced] or here
        return {"knob": sorted(last)[-1]}
    skeleton = _skeleton(text, {**spans, knob: span})
    above = [line for i, line in skeleton if i < start]
    below = [line for i, line in skeleton if i >= span[1]]
    return {"lines": above[-CONTEXT:], "below": below[:CONTEXT]}


def _position(
    fmt, text: str, anchor: dict, anchors: Mapping[str, dict],
    spans: Mapping[str, tuple[int, int]], depth: int = 0,
) -> int | None:
    """Index of the line before which the block goes (0: top of file), or None."""
    return _resolve(text, anchor, anchors, spans, depth)[0]


def _resolve(
    text: str, anchor: dict, anchors: Mapping[str, dict],
    spans: Mapping[str, tuple[int, int]], depth: int = 0,
) -> tuple[int | None, str]:
    """(:func:`_position`, side): ``"above"`` where the place is found from what is above
    it (a knob, or the skeleton lines above), ``"below"`` where from the lines below."""
    if depth > 32:
        return None, "above"
    if "knob" in anchor:
        other = anchor["knob"]
        if other in spans:
            return spans[other][1], "above"
        if anchors.get(other):
            return _resolve(text, anchors[other], anchors, spans, depth + 1)
        return None, "above"
    context = anchor.get("lines")
    if not isinstance(context, list):
        return None, "above"
    if not context:
        return 0, "above"
    skeleton = _skeleton(text, spans)
    lines = [line for _, line in skeleton]
    # The longest run of the skeleton lines that were above the knob that occurs once...
    for k in range(len(context), 0, -1):
        tail = context[-k:]
        hits = [j for j in range(k, len(lines) + 1) if lines[j - k:j] == tail]
        if len(hits) == 1:
            return skeleton[hits[0] - 1][0] + 1, "above"
    # ...else of those that were below it (a line above may have become a knob's since).
    below = anchor.get("below")
    if isinstance(below, list):
        for k in range(len(below), 0, -1):
            head = below[:k]
            hits = [j for j in range(len(lines) - k + 1) if lines[j:j + k] == head]
            if len(hits) == 1:
                return skeleton[hits[0]][0], "below"
    return None, "above"


def _order_key(knob: str, anchors: Mapping[str, dict], order: Mapping[str, int]
               ) -> tuple[int, ...]:
    """The record order of ``knob``'s anchor chain, from its first knob down to ``knob``:
    knobs claiming one place sort by it (a knob just after another sorts with it)."""
    chain: list[str] = []
    k: str | None = knob
    while k in order and k not in chain and len(chain) <= 32:
        chain.append(k)
        k = (anchors.get(k) or {}).get("knob")
    return tuple(order[c] for c in reversed(chain))


def _claim(text: str, knob: str, anchors: Mapping[str, dict],
           spans: Mapping[str, tuple[int, int]]) -> tuple[int | None, str]:
    """Where present ``knob`` would go back in the file without it (:func:`_resolve`)."""
    a, b = spans[knob]
    lines = _lines(text)
    shift = b - a
    rest = {k: (s, e) if s < a else (s - shift, e - shift)
            for k, (s, e) in spans.items() if k != knob}
    return _resolve("".join(lines[:a] + lines[b:]), anchors[knob], anchors, rest)


def _in_order(text: str, knob: str, pos: int, side: str, anchors: Mapping[str, dict],
              spans: Mapping[str, tuple[int, int]], order: Mapping[str, int]) -> int:
    """``pos``, moved past the present knobs that claim the same place and come first in
    record order (above: those starting there; below: those ending there come after)."""
    key = _order_key(knob, anchors, order)
    starts = {s: k for k, (s, _) in spans.items()}
    ends = {e: k for k, (_, e) in spans.items()}
    for _ in range(len(spans)):
        other = (starts if side == "above" else ends).get(pos)
        if other is None or not anchors.get(other):
            break
        if _claim(text, other, anchors, spans) != (spans[other][0], side):
            break
        first = _order_key(other, anchors, order) < key
        if side == "above" and first:
            pos = spans[other][1]
        elif side == "below" and not first:
            pos = spans[other][0]
        else:
            break
    return pos


def inserted_block(old_text: str, new_text: str) -> str | None:
    """The lines ``new_text`` adds to ``old_text``, when it adds one block and changes nothing
    else (None otherwise): what a knob's re-adding should put back."""
    old, new = _lines(old_text), _lines(new_text)
    ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "insert":
        return None
    return "".join(new[ops[0][3]:ops[0][4]])


def add_knob(
    fmt, text: str, knob: str, value: str, managed: Mapping[str, dict | None],
    source: str | None = None, lines: str | None = None,
) -> str:
    """``fmt.set`` for a knob absent from ``text``, placed at its anchor when possible.

    ``managed``: the target's ledger knobs in record order (of their layers) with their
    anchors: the order in which knobs claiming one place stand.
    ``source``: the exact text of the value, for formats that take one (k8s, yaml-map).
    ``lines``: the exact lines the knob had when it was removed; they replace the lines
    the format wrote, where the file then reads exactly the same (so an ``env:`` list or
    an item written in another style than the format's comes back byte for byte).
    """
    if text and not text.endswith(("\n", "\r")):
        # No final newline: placed as in the file with one, which then goes again, where
        # the file reads the same without it (issue 50: a knob removed from such a file
        # comes back where it was, not appended after a line that changed).
        eol = "\r\n" if "\r\n" in text else "\n"
        out = add_knob(fmt, text + eol, knob, value, managed, source, lines)
        try:
            if out.endswith(eol) and fmt.parse_exact(out[: -len(eol)]) == fmt.parse_exact(out):
                return out[: -len(eol)]
        except ValueError:
            pass
    placed = _add_at_anchor(fmt, text, knob, value, managed, source)
    if lines is None:
        return placed
    old, new = _lines(text), _lines(placed)
    ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "insert" or "".join(new[ops[0][3]:ops[0][4]]) == lines:
        return placed
    exact = "".join(old[:ops[0][1]]) + lines + "".join(old[ops[0][1]:])
    try:
        want = fmt.parse_exact(placed)
        if fmt.parse_exact(exact) == want:
            return exact
        # The knob comes back with another value than it had: its old lines (a comment
        # beside it, its quoting), given the new value, as a change in place would have
        # left them.  So unset-then-set and a set in place give the same bytes, whichever
        # way a clone reached them (a pull replays the layers; the operator recorded both).
        exact = fmt.set_exact(exact, knob, value, source)
        if fmt.parse_exact(exact) == want:
            return exact
    except ValueError:  # a format's FormatError too
        pass
    return placed


def _add_at_anchor(
    fmt, text: str, knob: str, value: str, managed: Mapping[str, dict | None],
    source: str | None,
) -> str:
    placed = fmt.set(text, knob, value, source=source) if source is not None else fmt.set(
        text, knob, value)
    anchor = managed.get(knob)
    if not anchor:
        return placed
    old, new = _lines(text), _lines(placed)
    ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "insert":
        return placed
    block = new[ops[0][3]:ops[0][4]]
    present = fmt.parse_exact(text)
    spans = _spans(fmt, text, [k for k in managed if k in present and k != knob])
    anchors = {k: a for k, a in managed.items() if a}
    pos, side = _resolve(text, anchor, anchors, spans)
    if pos is not None:
        order = {k: i for i, k in enumerate(managed)}
        pos = _in_order(text, knob, pos, side, anchors, spans, order)
    # Knobs that sit right after this one (anchored to it) must stay after it.
    followers = [spans[k][0] for k, a in anchors.items() if a.get("knob") == knob and k in spans]
    if followers:
        pos = min([p for p in (pos, *followers) if p is not None])
    if pos is None or pos == ops[0][1]:
        return placed
    if pos > 0 and not old[pos - 1].endswith(("\n", "\r")):
        return placed  # the anchor is a last line without a newline: keep the format's way
    moved = "".join(old[:pos] + block + old[pos:])
    try:
        if fmt.parse_exact(moved) != {**present, knob: value}:
            return placed
    except ValueError:
        return placed
    return moved
