"""``entries.jsonl``: the ledger's entries, one compact JSON object per line in record order.

Reading checks every line (its JSON, its fields' types, the entry's own rules, unique ids
and seqs) and names the file and line of the first problem; writing is deterministic, so
the same entries always make the same bytes (and a clean git diff).
"""

from __future__ import annotations

import json
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.core.model import Entry
from ledger.errors import ConfigError
from ledger.errors import LedgerError
from ledger.store.schema import entry_schema_problem


def parse_entries(text: str, where: str) -> list[Entry]:
    """Entries from the JSON Lines text of ``entries.jsonl``; errors name file and line."""
    out = []
    ids: dict[str, int] = {}
    seqs: dict[int, int] = {}
    shared: dict = {}  # equal history actions, built once (Entry.from_dict)
    # Split on "\n" only: str.splitlines() also breaks at U+0085/U+2028/U+2029, which
    # json.dumps(ensure_ascii=False) leaves unescaped inside a value.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        entry = _entry_from_line(line, where, lineno, shared)
        if entry.id in ids:
            raise ConfigError(where, f"id {entry.id} is also used on line {ids[entry.id]}", lineno)
        if entry.seq in seqs:
            raise ConfigError(where, f"seq {entry.seq} is also used on line {seqs[entry.seq]}",
                              lineno)
        ids[entry.id] = seqs[entry.seq] = lineno
        out.append(entry)
    out.sort(key=lambda e: e.seq)
    return out


def _entry_from_line(line: str, where: str, lineno: int, shared: dict | None = None) -> Entry:
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
        return Entry.from_dict(data, shared)
    except KeyError as e:
        raise ConfigError(where, f"entry is missing field {e.args[0]!r}", lineno) from None
    except (TypeError, ValueError, OverflowError) as e:
        raise ConfigError(where, f"bad field value: {e}", lineno) from None
    except LedgerError as e:
        raise ConfigError(where, str(e), lineno) from None


KnownLines = Mapping[int, tuple[Entry, str]]  # id(entry) -> (that entry, its line)


def entries_bytes(entries: Iterable[Entry], known: KnownLines | None = None) -> bytes:
    """``entries.jsonl``: one compact JSON object per entry, in record order.

    ``known``: lines already written for these very entry objects (see
    :func:`written_lines`); an entry found there *as the same object* (entries are
    frozen) gets that line instead of being encoded again -- the same bytes, since the
    encoding is deterministic.  A command that changes a few of 10,000 entries then
    encodes only those.
    """
    ordered = sorted(entries, key=lambda e: e.seq)
    if known:
        lines = [hit[1] if (hit := known.get(id(e))) is not None and hit[0] is e
                 else _entry_line(e) for e in ordered]
    else:
        lines = [_entry_line(e) for e in ordered]
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def written_lines(entries: Sequence[Entry], text: str) -> dict[int, tuple[Entry, str]] | None:
    """Each entry's line in ``text``, where ``text`` is what :func:`entries_bytes` wrote for
    exactly ``entries`` (None when the line count says otherwise)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(entries):
        return None
    return {id(e): (e, line) for e, line in zip(entries, lines)}


def _entry_line(e: Entry) -> str:
    """One entry as JSON: UTF-8 as is; an anchor line holding bytes that are not UTF-8
    (kept from the target file through surrogate escapes) is written ``\\udcXX``-escaped,
    which reads back to the same bytes.

    What ``_ENCODE(e.to_dict())`` writes, its history (the last key) made of each action's
    own JSON, encoded once per distinct action (:func:`_action_json`): a bulk revert gives
    thousands of entries one and the same action."""
    fields = _ENCODE(e.fields_dict())
    line = f"{fields[:-1]}, \"history\": [{', '.join(map(_action_json, e.history))}]}}"
    if line.isascii():
        return line
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(e.to_dict(), ensure_ascii=True, separators=(", ", ": "))
    return line


# One encoder for every line (json.dumps with options builds one a call: thousands of
# lines in a bulk revert).
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode

_ACTIONS: dict = {}  # action -> its JSON (actions are frozen, equal ones encode alike)


def _action_json(a) -> str:
    found = _ACTIONS.get(a)
    if found is None:
        if len(_ACTIONS) >= 4096:
            _ACTIONS.clear()
        found = _ACTIONS[a] = _ENCODE(a.to_dict())
    return found
