"""backups.fsio on real files: atomic replacement keeps modes and leaves no temporaries,
the batch path (16 files and more: one os.sync, then the renames) writes every file or,
when a temporary cannot be written, renames none; temporaries never follow a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from backups import fsio
from backups.fsio import TEMP_PREFIX
from backups.fsio import atomic_write
from backups.fsio import remove_file
from backups.fsio import temp_owner
from backups.fsio import temp_path
from backups.fsio import temp_tag
from backups.fsio import write_many


def leftovers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.startswith(TEMP_PREFIX))


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def make_files(root: Path, n: int, mode: int = 0o640) -> dict[Path, bytes]:
    files = {}
    for i in range(n):
        sub = root / f"d{i % 3}"
        sub.mkdir(exist_ok=True)
        p = sub / f"serve_{i:02d}.sh"
        p.write_bytes(f"old {i}\n".encode())
        p.chmod(mode + (0o100 if i % 2 else 0))
        files[p] = f"#!/bin/bash\nexport K={i}\n".encode()
    return files


def test_atomic_write_replaces_content_and_keeps_the_mode(tmp_path):
    p = tmp_path / "serve.sh"
    p.write_text("old\n")
    p.chmod(0o751)
    atomic_write(p, b"new\n")
    assert p.read_bytes() == b"new\n"
    assert mode_of(p) == 0o751
    assert leftovers(tmp_path) == []


def test_atomic_write_creates_a_new_file_0644_or_as_asked(tmp_path):
    atomic_write(tmp_path / "a", b"x")
    atomic_write(tmp_path / "b", b"y", 0o600)
    assert (mode_of(tmp_path / "a"), mode_of(tmp_path / "b")) == (0o644, 0o600)


@pytest.mark.parametrize("n", [fsio._BATCH_SYNC_THRESHOLD - 1, fsio._BATCH_SYNC_THRESHOLD, 40])
def test_write_many_writes_every_file_keeping_modes(tmp_path, n):
    files = make_files(tmp_path, n)
    modes = {p: mode_of(p) for p in files}
    forced = next(iter(files))
    write_many(files, {forced: 0o600})
    for p, data in files.items():
        assert p.read_bytes() == data
        assert mode_of(p) == (0o600 if p == forced else modes[p])
    assert leftovers(tmp_path) == []


def test_the_batch_path_syncs_once_before_any_rename(tmp_path, monkeypatch):
    files = make_files(tmp_path, 20)
    seen = []
    real_sync = os.sync

    def sync():  # watches the real sync: what is on disk each time it runs
        seen.append((len(leftovers(tmp_path)), sum(p.read_bytes() == d for p, d in files.items())))
        real_sync()

    monkeypatch.setattr(os, "sync", sync)
    write_many(files)
    # first every temporary written and no file renamed; then every file, no temporary
    assert seen == [(20, 0), (0, 20)]


def test_the_batch_path_renames_nothing_when_a_temporary_cannot_be_written(tmp_path):
    files = make_files(tmp_path, 20)
    old = {p: p.read_bytes() for p in files}
    missing = tmp_path / "gone" / "serve_99.sh"  # its directory does not exist
    items = list(files.items())
    items.insert(17, (missing, b"x"))
    with pytest.raises(FileNotFoundError):
        write_many(dict(items))
    assert {p: p.read_bytes() for p in files} == old
    assert leftovers(tmp_path) == []


def test_a_file_can_be_created_by_the_batch_path(tmp_path):
    files = make_files(tmp_path, 17)
    new = tmp_path / "d0" / "fresh.env"
    write_many({**files, new: b"A=1\n"})
    assert new.read_bytes() == b"A=1\n" and mode_of(new) == 0o644


def test_a_planted_link_at_the_temporary_name_is_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    target = tmp_path / "serve.sh"
    target.write_text("old\n")
    temp_path(target).symlink_to(victim)
    atomic_write(target, b"new\n")
    assert victim.read_text() == "keep me\n"
    assert target.read_bytes() == b"new\n" and not target.is_symlink()
    assert leftovers(tmp_path) == []


def test_temporaries_are_named_after_their_operation(tmp_path):
    with temp_tag("op42"):
        assert temp_path(tmp_path / "x.sh").name == f"{TEMP_PREFIX}op42-x.sh"
    assert temp_path(tmp_path / "x.sh").name == f"{TEMP_PREFIX}p{os.getpid()}-x.sh"
    assert temp_owner(f"{TEMP_PREFIX}op42-x.sh") == "op42"
    assert temp_owner("x.sh") is None and temp_owner(f"{TEMP_PREFIX}nodash") is None
    for bad in ("", "a/b", "a-b"):
        with pytest.raises(ValueError):
            with temp_tag(bad):
                pass


def test_remove_file_is_quiet_about_an_absent_file(tmp_path):
    p = tmp_path / "f"
    p.write_text("x")
    remove_file(p)
    remove_file(p)
    assert not p.exists()
