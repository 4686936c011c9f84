"""``entries.jsonl``: the ledger's entries, one compact JSON object per line in record order.

Reading checks every line (its JSON, its fields' types, the entry's own rules, unique ids
and seqs) and names the file and line of the first problem; writing is deterministic, so
the same entries always make the same bytes (and a clean git diff).
"""

from __future__ import annotations

import json
from typing import Iterable

from ledger.core.model import Entry
from ledger.errors import ConfigError
from ledger.errors import LedgerError
from ledger.store.schema import entry_schema_problem


def parse_entries(text: str, where: str) -> list[Entry]:
    """Entries from the JSON Lines text of ``entries.jsonl``; errors name file and line."""
    out = []
    ids: dict[str, int] = {}
    seqs: dict[int, int] = {}
    # Split on "\n" only: str.splitlines() also breaks at U+0085/U+2028/U+2029, which
    # json.dumps(ensure_ascii=False) leaves unescaped inside a value.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        entry = _entry_from_line(line, where, lineno)
        if entry.id in ids:
            raise ConfigError(where, f"id {entry.id} is also used on line {ids[entry.id]}", lineno)
        if entry.seq in seqs:
            raise ConfigError(where, f"seq {entry.seq} is also used on line {seqs[entry.seq]}",
                              lineno)
        ids[entry.id] = seqs[entry.seq] = lineno
        out.append(entry)
    out.sort(key=lambda e: e.seq)
    return out


def _entry_from_line(line: str, where: str, lineno: int) -> Entry:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(where, f"not valid JSON: {e.msg} (column {e.colno})", lineno) from e
    except RecursionError:
        raise ConfigError(where, "nested too deeply to be an entry", lineno) from None
    if not isinstance(data, dict):
        raise ConfigError(where, "each line holds one JSON object (an entry)", lineno)
    problem = entry_schema_problem(data)
    if problem:
        raise ConfigError(where, problem, lineno)
    try:
        return Entry.from_dict(data)
    except KeyError as e:
        raise ConfigError(where, f"entry is missing field {e.args[0]!r}", lineno) from None
    except (TypeError, ValueError, OverflowError) as e:
        raise ConfigError(where, f"bad field value: {e}", lineno) from None
    except LedgerError as e:
        raise ConfigError(where, str(e), lineno) from None


def entries_bytes(entries: Iterable[Entry]) -> bytes:
    """``entries.jsonl``: one compact JSON object per entry, in record order."""
    lines = [_entry_line(e) for e in sorted(entries, key=lambda e: e.seq)]
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def _entry_line(e: Entry) -> str:
    """One entry as JSON: UTF-8 as is; an anchor line holding bytes that are not UTF-8
    (kept from the target file through surrogate escapes) is written ``\\udcXX``-escaped,
    which reads back to the same bytes."""
    line = json.dumps(e.to_dict(), ensure_ascii=False, separators=(", ", ": "))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(e.to_dict(), ensure_ascii=True, separators=(", ", ": "))
    return line
