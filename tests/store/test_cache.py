"""The local cache (.ledger/cache): a copy of what reading the files gives, never more.

Every test compares against reading the source with no cache at all, on real
workspaces through the real CLI."""

from __future__ import annotations

import pickle
import shutil

import pytest

from ledger.commands.session import open_session
from ledger.store import cache
from ledger.store.entries_file import parse_entries
from ledger.store.targets import parse_target
from ledger.store.targets import read_target
from tests.store.kit import tree

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


def _record(story, ledger, value="512", knob=KNOB):
    r = ledger("-C", story.root, "record", "knob", "decode", f"{knob}={value}", "--class", "perf",
               "--title", f"{knob} {value}", "--no-validate")
    assert r.exit_code == 0, r.stderr


def _fresh(story):
    """Entries and the target read from the files alone."""
    ws = open_session(str(story.root), "status").ws
    entries = parse_entries(ws.entries_path.read_text(), "x")
    t = ws.target("decode")
    tf = parse_target(t, ws.target_path(t), ws.target_path(t).read_bytes())
    return entries, (tf.values, tf.summary, tf.place_values)


def _cached(story):
    ws = open_session(str(story.root), "status").ws
    tf = read_target(ws, ws.target("decode"))
    return ws.entries(), (tf.values, tf.summary, tf.place_values)


def test_what_a_mutation_leaves_in_the_cache_equals_reading_the_files(story, ledger):
    _record(story, ledger)
    _record(story, ledger, "1", "SGLANG_OTHER")
    assert ledger("-C", story.root, "revert", "--perf-only", "--why", "x").exit_code == 0
    files = cache.cached_files()
    assert any("entries" in str(p) for p in files) and any("targets" in str(p) for p in files)
    assert _cached(story) == _fresh(story)
    assert ledger("-C", story.root, "restore", "--perf-only").exit_code == 0
    assert _cached(story) == _fresh(story)


def test_a_hand_edit_is_seen_at_once(story, ledger):
    _record(story, ledger)
    assert ledger("-C", story.root, "status", "--json").json()["clean"]
    story.script.write_text(story.script.read_text().replace(f"{KNOB}=512", f"{KNOB}=64"))
    st = ledger("-C", story.root, "status", "--json")
    assert not st.json()["clean"] and [d["found"] for d in st.json()["drift"]] == ["64"]


def test_a_damaged_or_foreign_cache_file_is_a_miss(story, ledger, own_cache):
    _record(story, ledger)
    ledger("-C", story.root, "status", "--json")
    files = cache.cached_files()
    assert files
    for i, path in enumerate(files):
        if i % 2:
            path.write_bytes(b"not a pickle")
        else:  # a whole, valid file stored under another key: never taken for this one
            path.write_bytes(pickle.dumps(("0" * 64, {"planted": True})))
    st = ledger("-C", story.root, "status", "--json")
    assert st.exit_code == 0 and st.json()["clean"], st.stderr
    assert _cached(story) == _fresh(story)


def test_an_unwritable_cache_never_fails_a_command(story, ledger, own_cache):
    shutil.rmtree(own_cache)
    own_cache.write_text("a file where the cache directory goes")
    _record(story, ledger)
    assert ledger("-C", story.root, "status", "--json").json()["clean"]
    assert ledger("-C", story.root, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f"{KNOB}=256" in story.script.read_text()


def test_the_key_covers_the_bytes_the_target_settings_and_the_code():
    a = cache.key_of("target", "Target(name='d', format='bash')", b"export K=1\n")
    assert a == cache.key_of("target", "Target(name='d', format='bash')", b"export K=1\n")
    assert a != cache.key_of("target", "Target(name='d', format='bash')", b"export K=2\n")
    assert a != cache.key_of("target", "Target(name='d', format='dotenv')", b"export K=1\n")
    # parts are length-prefixed: moving bytes from one part to the next is another key
    assert cache.key_of("ab", "c") != cache.key_of("a", "bc")


def test_old_files_are_pruned(own_cache, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 3)
    for i in range(6):
        cache.store("targets", f"{i:064x}", i)
    kept = cache.cached_files()
    assert len(kept) == 3 and cache.load("targets", f"{5:064x}") == 5


def test_a_full_cache_is_pruned_to_seven_eighths_and_not_listed_on_every_write(own_cache, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 16)
    listed = []
    real = cache.os.listdir
    monkeypatch.setattr(cache.os, "listdir", lambda d: listed.append(d) or real(d))
    for i in range(17):
        cache.store("targets", f"{i:064x}", i)
    assert len(cache.cached_files()) == 14 and cache.load("targets", f"{16:064x}") == 16
    assert len(listed) == 2  # the first write and the one past KEEP
    for i in range(17, 19):
        cache.store("targets", f"{i:064x}", i)
    assert len(listed) == 2 and len(cache.cached_files()) == 16


def test_a_read_only_command_changes_nothing_in_the_workspace(story, ledger):
    _record(story, ledger)
    before = tree(story.root, story.script)
    for command in (("status", "--json"), ("diff",), ("list",), ("target", "show", "decode")):
        assert ledger("-C", story.root, *command).exit_code == 0
    assert tree(story.root, story.script) == before


def test_the_cache_can_be_turned_off(story, ledger, monkeypatch, own_cache):
    monkeypatch.setenv("LEDGER_CACHE_DIR", "")
    _record(story, ledger)
    assert ledger("-C", story.root, "status", "--json").json()["clean"]
    assert not list(own_cache.rglob("*.pickle"))


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache directory of this test's own (the session's is shared by every test)."""
    path = tmp_path / "cache"
    path.mkdir()
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(path))
    return path


def test_the_catalogs_a_command_parses_are_kept_in_the_local_cache(own_cache):
    """keep_catalogs (what the CLI calls at start) hands envknobs this cache: a catalog
    parsed once is a cache file, and read back it is what parsing the file gives."""
    from envknobs.catalog import bundled_flag_catalogs
    from envknobs.catalog import load_flag_catalog
    from envknobs.parse_cache import keep_in

    path = bundled_flag_catalogs()[0]
    parsed = [(f.name, f.type, f.default) for f in load_flag_catalog(path)]
    cache.keep_catalogs()
    try:
        load_flag_catalog(path)
        assert [p.parent.name for p in cache.cached_files()] == ["catalogs"]
        again = [(f.name, f.type, f.default) for f in load_flag_catalog(path)]
    finally:
        keep_in(None)
    assert again == parsed
