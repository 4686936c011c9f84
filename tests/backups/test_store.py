"""backups.store on real files: snapshots hold exact bytes and modes (a missing file is
recorded as missing), objects are shared and checked, ids sort in the order taken and are
never paths, a damaged manifest is named and blocks no other backup."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from backups.store import BackupError
from backups.store import BackupStore
from backups.store import sha256_bytes

T1 = "2026-12-02T16:01:02Z"
T2 = "2026-12-02T16:01:03.123456Z"


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    serve = tmp_path / "serve.sh"
    serve.write_bytes(b"#!/bin/bash\nexport K=1\n\xff raw byte\n")
    serve.chmod(0o750)
    env = tmp_path / "decode.env"
    env.write_text("K=1\n")
    return {"serve": serve, "env": env, "absent": tmp_path / "later.yaml"}


@pytest.fixture
def store(tmp_path) -> BackupStore:
    return BackupStore(tmp_path / "store")


def test_a_snapshot_holds_exact_bytes_modes_and_absence(store, files):
    b = store.snapshot(files.values(), command="revert --perf-only", time=T1)
    serve = b.file(files["serve"])
    assert store.content(serve) == files["serve"].read_bytes()
    assert serve.mode == 0o750 and serve.size == files["serve"].stat().st_size
    absent = b.file(files["absent"])
    assert absent.sha256 is None and store.content(absent) is None
    assert store.load(b.id) == b == store.get("latest")
    assert stat.S_IMODE((store.objects / serve.sha256).stat().st_mode) == 0o600


def test_ids_sort_in_the_order_taken_and_objects_are_shared(store, files):
    ids = [store.snapshot([files["env"]], command=f"c{i}", time=T1 if i % 2 else T2).id
           for i in range(12)]
    assert [b.id for b in store.list()] == ids
    assert ids[0].startswith("20261202T160103Z-") and ids[1].startswith("20261202T160102Z-")
    assert len(list(store.objects.iterdir())) == 1


def test_get_by_prefix_and_the_ways_it_refuses(tmp_path, files):
    empty = BackupStore(tmp_path / "empty")
    with pytest.raises(BackupError, match="empty"):
        empty.get("latest")
    store = BackupStore(tmp_path / "store")
    a = store.snapshot([files["env"]], command="a", time=T1)
    b = store.snapshot([files["env"]], command="b", time=T1)
    assert store.get(b.id) == b and store.get(a.id[:-1] + a.id[-1]) == a
    with pytest.raises(BackupError, match="ambiguous"):
        store.get("20261202")
    with pytest.raises(BackupError, match="no backup matches"):
        store.get("1999")


@pytest.mark.parametrize("bad", ["", ".", "..", "objects", "../x", "a/b", "a\\b", "a\0b"])
def test_a_backup_id_is_never_a_path(store, files, bad):
    if bad:  # an empty reserved id means "take a new one"
        with pytest.raises(BackupError, match="invalid backup id"):
            store.snapshot([files["env"]], command="x", time=T1, backup_id=bad)
    with pytest.raises(BackupError, match="invalid backup id"):
        store.load(bad)
    assert not (store.root.parent / "x").exists()


def test_a_damaged_manifest_is_named_and_blocks_no_other_backup(store, files):
    good = store.snapshot([files["env"]], command="good", time=T1)
    bad = store.snapshot([files["serve"]], command="bad", time=T1)
    manifest = store.manifest_path(bad.id)
    d = json.loads(manifest.read_text())
    d["files"][0]["path"] = "relative/path"
    manifest.write_text(json.dumps(d))
    assert store.load(good.id) == good
    with pytest.raises(BackupError, match=f"{bad.id}/manifest.json: unreadable"):
        store.list()
    assert store.manifests() == sorted([store.manifest_path(good.id), manifest])


def test_a_corrupt_object_is_refused_and_a_short_one_rewritten(store, files):
    b = store.snapshot([files["serve"]], command="one", time=T1)
    blob = store.objects / b.files[0].sha256
    blob.write_bytes(b"tampered")
    with pytest.raises(BackupError, match="corrupt"):
        store.content(b.files[0])
    store.snapshot([files["serve"]], command="two", time=T1)  # size differs: rewritten
    assert sha256_bytes(blob.read_bytes()) == b.files[0].sha256
    blob.unlink()
    with pytest.raises(BackupError, match="missing"):
        store.content(b.files[0])


def test_diff_from_the_backup_to_the_live_file(store, files):
    b = store.snapshot([files["env"], files["absent"]], command="x", time=T1)
    files["env"].write_text("K=2\n")
    files["absent"].write_text("a: 1\n")
    text = store.diff(b)
    assert f"--- {files['env']} (backup {b.id})" in text and "-K=1\n+K=2\n" in text
    assert "--- /dev/null" in text and "+a: 1\n" in text
    assert store.diff(b, files["env"]).count("+++") == 1
    with pytest.raises(BackupError, match="holds no copy"):
        store.diff(b, files["serve"])


def test_the_callers_error_class_is_raised(tmp_path):
    class LedgerBackupError(Exception):
        pass

    store = BackupStore(tmp_path / "s", error=LedgerBackupError)
    with pytest.raises(LedgerBackupError):
        store.get("latest")
    unreadable = tmp_path / "dir-not-file"
    unreadable.mkdir()
    with pytest.raises(LedgerBackupError, match="cannot read for backup"):
        store.snapshot([unreadable], command="x", time=T1)


def test_a_snapshot_of_many_files_holds_each_ones_bytes_and_leaves_no_temporaries(store, tmp_path):
    """Past the batch threshold the copies are written together with one sync (a bulk
    revert backs up a hundred scripts): each object still holds exactly its file, read
    back by content, shared where two files are the same, with no temporary left."""
    many = {}
    for i in range(40):
        p = tmp_path / "scripts" / f"serve_{i:02d}.sh"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(f"#!/bin/bash\nexport K={i % 30}\n".encode())
        many[i] = p
    b = store.snapshot(many.values(), command="revert --perf-only", time=T1)
    for p in many.values():
        f = b.file(p)
        assert store.content(f) == p.read_bytes()
        assert stat.S_IMODE((store.objects / f.sha256).stat().st_mode) == 0o600
    assert len(list(store.objects.iterdir())) == 30  # ten files share their content
    assert not [c for c in store.objects.iterdir() if c.name.startswith(".")]
    assert store.load(b.id) == b
