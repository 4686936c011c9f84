"""Notes and links as evidence: ``<workspace>/evidence/<entry-id>/notes.yaml``.

A note is what an operator wrote about a change (the markdown A/B table of a tuning
session) or a link to it (a dashboard, a PR).  It is kept beside the entry's bench runs
but never read as one: no summary, no verdict, nothing judged as numbers.  A file's text
is copied in (the ledger keeps what it said when attached); a link is kept as given.

Decisions where the issue is silent: a link is ``http://`` or ``https://`` only (other
schemes, ``javascript:`` above all, are refused, so nothing odd reaches the rendered
HTML; the docs escape it as well); a note file must be UTF-8
text of at most 256 KiB; its title is its first markdown heading, else its first line.

Notes carry their numbers (issue 52): a note's markdown A/B table (``| conc | A | B | delta
|``) is read for *showing* only: each note's line ends with the changes it says, beside the
ledger's measured evidence, and an entry whose only evidence is such a note is headlined
``note: +12.8% @c64, +5.7% @c96 (not measured by the ledger)``; no verdict is drawn from it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ledger.errors import EvidenceError
from ledger.evidence.store import load_yaml
from ledger.evidence.store import write_file
from ledger.evidence.store import dump_yaml
from ledger.evidence.store import evidence_dir

NOTES_YAML = "notes.yaml"
# http(s) only, and none of what would end a Markdown autolink or an HTML attribute early
# (the docs escape it anyway): blanks, control characters, quotes, backquotes, <, >.
_LINK_RE = re.compile(r"https?://[^\s\x00-\x1f\x7f<>\"'`]+\Z")
MAX_NOTE_BYTES = 256 * 1024


def load_notes(ws_root: Path, entry_id: str) -> list[dict[str, Any]]:
    """The entry's notes, in the order they were attached (empty when none)."""
    path = evidence_dir(ws_root, entry_id) / NOTES_YAML
    if not path.is_file():
        return []
    notes = load_yaml(path).get("notes")
    if not isinstance(notes, list):
        raise EvidenceError(f"{path}: 'notes' must be a list")
    return [n for n in notes if isinstance(n, dict)]


def make_note(source: str, side: str | None, when: str) -> dict[str, Any]:
    """A note from ``source`` (a file or an http(s) link), refused when unreadable."""
    note: dict[str, Any] = {"when": when}
    if side:
        note["side"] = side
    if "://" in source:
        if not _LINK_RE.match(source):
            raise EvidenceError(f"{source!r}: a link must be an http:// or https:// URL "
                                "without blanks, quotes, backquotes or angle brackets")
        note["link"] = source
        return note
    path = Path(source)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise EvidenceError(f"{path}: no such note file") from None
    except OSError as e:
        raise EvidenceError(f"{path}: cannot read: {e.strerror}") from e
    if len(data) > MAX_NOTE_BYTES:
        raise EvidenceError(f"{path}: a note is at most {MAX_NOTE_BYTES // 1024} KiB "
                            f"({len(data)} bytes): link to it instead")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EvidenceError(f"{path}: a note must be UTF-8 text") from None
    if not text.strip():
        raise EvidenceError(f"{path}: the note is empty")
    note.update(file=path.name, title=_title(text), text=text)
    return note


def _title(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    heading = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    return heading or lines[0]


def note_line(note: dict[str, Any]) -> str:
    """One line for ``show`` and ``diff``: side, what it is, when, and the changes its A/B
    table says (``— +12.8% @c64, +5.7% @c96``), beside whatever the ledger measured."""
    side = f"side {note['side']}: " if note.get("side") else ""
    what = note.get("link") or f"{note.get('file')} ({note.get('title')})"
    said = changes_said(note_numbers(note.get("text") or ""))
    return f"{side}{what}" + (f"  ({note['when']})" if note.get("when") else "") + \
        (f" — {said}" if said else "")


# A markdown A/B table: a load column (conc, concurrency, c, bs, batch), an A column (A,
# before, baseline) and a B column (B, after), and optionally a change column (delta,
# change, Δ, %).  Cells hold numbers with or without units (``1,234.5 tok/s``, ``+12.8%``).
_LOAD_HEADS = ("conc", "concurrency", "max_concurrency", "c", "bs", "batch", "batch size")
_A_HEADS = ("a", "before", "baseline", "old")
_B_HEADS = ("b", "after", "new")
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _head(cell: str) -> str:
    # "A (256)" / "B: 512" / "**delta**" -> "a", "b", "delta"
    return re.split(r"[\s(:=]", cell.strip().strip("*_`").lower(), maxsplit=1)[0]


def _number(cell: str) -> float | None:
    found = _NUMBER_RE.search(cell.replace(",", ""))
    return float(found.group()) if found else None


def note_numbers(text: str) -> list[dict[str, Any]]:
    """The rows of the first markdown A/B table of a note: ``{"load": 64, "a", "b",
    "delta_pct"}`` each (the table's own change column when it has one, else B/A - 1).
    Empty when the note holds no such table.  Only read to be shown: never judged."""
    lines = [line.strip() for line in text.splitlines()]
    for start, line in enumerate(lines):
        if not line.startswith("|"):
            continue
        heads = [_head(c) for c in line.strip("|").split("|")]
        load = next((i for i, h in enumerate(heads) if h in _LOAD_HEADS), None)
        a = next((i for i, h in enumerate(heads) if h in _A_HEADS), None)
        b = next((i for i, h in enumerate(heads) if h in _B_HEADS), None)
        delta = next((i for i, h in enumerate(heads) if h.startswith(("delta", "change", "δ",
                                                                      "%", "gain"))), None)
        if load is not None and (a is None or b is None):
            # Columns named by their values (``| concurrency | 256 (default) | 512 |``):
            # the first two beside the load and the change are A and B, in that order.
            rest = [i for i in range(len(heads)) if i not in (load, delta)]
            a, b = (rest[0], rest[1]) if len(rest) >= 2 else (None, None)
        if load is None or a is None or b is None:
            continue
        rows = []
        for row in lines[start + 1:]:
            if not row.startswith("|"):
                break
            cells = row.strip("|").split("|")
            if set(row) <= set("|-: ") or len(cells) < len(heads):
                continue  # the separator row
            point, va, vb = _number(cells[load]), _number(cells[a]), _number(cells[b])
            if point is None:
                continue
            change = _number(cells[delta]) if delta is not None else None
            if change is None and va and vb is not None:
                change = 100.0 * (vb / va - 1.0)
            rows.append({"load": int(point), "a": va, "b": vb, "delta_pct": change})
        if rows:
            return rows
    return []


def changes_said(rows: list[dict[str, Any]]) -> str:
    """``+12.8% @c64, +5.7% @c96`` of :func:`note_numbers` rows ("" for none)."""
    return ", ".join(f"{r['delta_pct']:+.1f}% @c{r['load']}" for r in rows
                     if r.get("delta_pct") is not None)


def notes_headline(notes: list[dict[str, Any]]) -> str | None:
    """The headline of an entry whose only evidence is notes with an A/B table:
    ``note: +12.8% @c64, +5.7% @c96 (not measured by the ledger)``; None without one."""
    for note in notes:
        said = changes_said(note_numbers(note.get("text") or ""))
        if said:
            return f"note: {said} (not measured by the ledger)"
    return None


def add_note(ws_root: Path, entry_id: str, note: dict[str, Any]) -> None:
    """Append ``note`` to the entry's notes: written whole to a temp file, then renamed."""
    parent = evidence_dir(ws_root, entry_id)
    parent.mkdir(parents=True, exist_ok=True)
    notes = load_notes(ws_root, entry_id) + [note]
    tmp = parent / f".{NOTES_YAML}.tmp"
    write_file(tmp, dump_yaml({"notes": notes}))
    os.replace(tmp, parent / NOTES_YAML)
