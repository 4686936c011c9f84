"""Notes and links as evidence: ``<workspace>/evidence/<entry-id>/notes.yaml``.

A note is what an operator wrote about a change (the markdown A/B table of a tuning
session) or a link to it (a dashboard, a PR).  It is kept beside the entry's bench runs
but never read as one: no summary, no verdict, nothing judged as numbers.  A file's text
is copied in (the ledger keeps what it said when attached); a link is kept as given.

Decisions where the issue is silent: a link is ``http://`` or ``https://`` only (other
schemes, ``javascript:`` above all, are refused, so nothing odd reaches the rendered
HTML; the docs escape it as well); a note file must be UTF-8
text of at most 256 KiB; its title is its first markdown heading, else its first line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ledger.errors import EvidenceError
from ledger.evidence.store import _load_yaml
from ledger.evidence.store import _write_file
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
    notes = _load_yaml(path).get("notes")
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
    """One line for ``show`` and ``diff``: side, what it is, when."""
    side = f"side {note['side']}: " if note.get("side") else ""
    what = note.get("link") or f"{note.get('file')} ({note.get('title')})"
    return f"{side}{what}" + (f"  ({note['when']})" if note.get("when") else "")


def add_note(ws_root: Path, entry_id: str, note: dict[str, Any]) -> None:
    """Append ``note`` to the entry's notes: written whole to a temp file, then renamed."""
    parent = evidence_dir(ws_root, entry_id)
    parent.mkdir(parents=True, exist_ok=True)
    notes = load_notes(ws_root, entry_id) + [note]
    tmp = parent / f".{NOTES_YAML}.tmp"
    _write_file(tmp, dump_yaml({"notes": notes}))
    os.replace(tmp, parent / NOTES_YAML)
