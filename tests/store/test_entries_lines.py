"""entries.jsonl written again reuses the lines of entries a command did not change."""

from __future__ import annotations

from dataclasses import replace

from ledger.store.entries_file import entries_bytes
from ledger.store.entries_file import parse_entries
from ledger.store.entries_file import written_lines
from tests.store.test_cache import _record
from tests.store.test_cache import own_cache  # noqa: F401  (fixture)


def test_known_lines_make_the_same_bytes_and_a_changed_entry_is_encoded_again(story, ledger):
    _record(story, ledger, "512")
    _record(story, ledger, "768", knob="SGLANG_TORCH_PROFILER_DIR")
    data = (story.root / "entries.jsonl").read_bytes()
    entries = parse_entries(data.decode(), "entries.jsonl")
    known = written_lines(entries, data.decode())
    assert entries_bytes(entries, known) == data == entries_bytes(entries)
    changed = [replace(entries[0], title="another title"), *entries[1:]]
    assert entries_bytes(changed, known) == entries_bytes(changed) != data
    # a lying map (another object with the same id) is never trusted: identity is checked
    fake = {id(e): (object(), "garbage") for e in entries}
    assert entries_bytes(entries, fake) == data


def test_a_line_count_that_does_not_match_is_no_map(story, ledger):
    _record(story, ledger, "512")
    data = (story.root / "entries.jsonl").read_text()
    entries = parse_entries(data, "entries.jsonl")
    assert written_lines(entries, data + "{}\n") is None


def test_a_workspace_knows_its_lines_only_when_the_ledger_wrote_the_file(story, ledger, own_cache):  # noqa: F811
    from ledger.store.workspace import Workspace

    _record(story, ledger, "512")
    ws = Workspace(story.root)
    entries = ws.entries()
    known = ws.written_lines()
    assert known is not None and all(known[id(e)][0] is e for e in entries)
    # a hand-written file (other spacing) is read, but its lines are never reused
    path = story.root / "entries.jsonl"
    path.write_text(path.read_text().replace(", ", ","))
    ws.reload()
    assert ws.entries() and ws.written_lines() is None
