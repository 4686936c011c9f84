"""envknobs.parse_cache: parsed catalogs kept where the application offers a place give what
parsing the files gives, are built once per file as it is, and again when it changes."""

from __future__ import annotations

import shutil

import pytest

from envknobs import parse_cache as kept_mod
from envknobs.catalog import bundled_flag_catalogs
from envknobs.catalog import load_flag_catalog
from envknobs.catalog_release import bundled_releases
from envknobs.catalog_release import load_release


@pytest.fixture
def place(monkeypatch):
    """A dict as the application's cache, counting what is stored."""
    kept: dict = {}
    stored: list[str] = []

    def store(k, v):
        stored.append(k)
        kept[k] = v

    kept_mod.keep_in(kept.get, store)
    yield kept, stored
    kept_mod.keep_in(None)


def _flags(registry):
    return [(f.name, f.type, f.default, f.aliases, f.negatable) for f in registry]


def test_a_kept_flag_catalog_is_what_parsing_gives_and_is_built_once(place):
    kept, stored = place
    path = bundled_flag_catalogs()[0]
    kept_mod.keep_in(None)
    parsed = load_flag_catalog(path)
    kept_mod.keep_in(kept.get, lambda k, v: (stored.append(k), kept.__setitem__(k, v)))
    first = load_flag_catalog(path)
    second = load_flag_catalog(path)
    assert _flags(first) == _flags(second) == _flags(parsed)
    assert len(stored) == 1 and second is first  # the second came from the place


def test_a_changed_catalog_file_is_parsed_again(place, tmp_path):
    kept, stored = place
    path = tmp_path / "sglang_flags.yaml"
    shutil.copy(bundled_flag_catalogs()[0], path)
    before = load_flag_catalog(path)
    text = path.read_text()
    path.write_text(text.replace("flags:\n", "flags:\n  - name: --zz-new-flag\n    type: int\n", 1))
    after = load_flag_catalog(path)
    assert len(stored) == 2
    assert "--zz-new-flag" in after and "--zz-new-flag" not in before


def test_a_kept_release_is_what_building_it_gives(place):
    kept, stored = place
    version = bundled_releases("sglang")[-1]
    knobs, flags, removed = load_release.__wrapped__("sglang", version)
    again = load_release.__wrapped__("sglang", version)
    assert [k.name for k in again[0]] == [k.name for k in knobs]
    assert _flags(again[1]) == _flags(flags) and again[2] == removed
    assert sum(k.startswith(f"release sglang {version}") for k in stored) == 1


def test_without_a_place_nothing_is_kept():
    kept_mod.keep_in(None)
    assert _flags(load_flag_catalog(bundled_flag_catalogs()[0]))
