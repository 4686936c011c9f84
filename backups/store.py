"""The backup store: a copy of every file the ledger is about to change.

Layout, under the store's root (``<workspace>/.ledger/backups`` by default)::

    objects/<sha256>          file contents, content-addressed (a file backed up by
                              a hundred commands unchanged is stored once)
    <backup-id>/manifest.json which files, with their sha256, mode and size, when,
                              and the command that made the backup

Backup ids carry the time and a counter (``20261202T160102Z-0007``); listing is in
the order backups were taken.  A manifest is written last and
atomically, so a backup that is listed is complete.  A caller that must name the backup
before taking it (the ledger's intent record does) reserves an id with :meth:`new_id`
and passes it to :meth:`snapshot`; :meth:`load` reads that one manifest only, so one
damaged manifest never blocks the use of another backup (``list`` and ``get`` read them
all and report the damaged one).  An existing object whose size is wrong is rewritten,
never trusted.  The store is local safety state,
not history: it is kept out of the workspace's git history (see ``.gitignore`` written
by ``ledger init``).

This package depends on nothing of the ledger's: its errors are :class:`BackupError`, or
the class the caller hands in (``BackupStore(root, error=...)``; the ledger hands in its
own ``ledger.errors.BackupError`` so the CLI's one ``LedgerError`` handler reports them).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from backups.fsio import atomic_write
from backups.fsio import write_many


class BackupError(Exception):
    """The backup store cannot do what was asked; the message names the file or backup."""

    exit_code = 1


@dataclass(frozen=True)
class BackedUpFile:
    path: str  # absolute
    sha256: str | None  # None: the file did not exist when the backup was taken
    mode: int | None
    size: int

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "mode": self.mode, "size": self.size}


@dataclass(frozen=True)
class Backup:
    id: str
    time: str
    command: str
    files: tuple[BackedUpFile, ...]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "time": self.time,
            "command": self.command,
            "files": [f.to_dict() for f in self.files],
        }

    def file(self, path: str | Path) -> BackedUpFile | None:
        wanted = str(Path(path).absolute())
        for f in self.files:
            if f.path == wanted:
                return f
        return None


def _backup_from(d) -> Backup:
    """A manifest's record, every field type-checked (TypeError/KeyError on a bad one)."""
    if not isinstance(d, dict) or not isinstance(d["files"], list):
        raise TypeError("expected an object with a files list")
    files = []
    for f in d["files"]:
        if not isinstance(f, dict):
            raise TypeError("each file is an object")
        sha, mode, size = f["sha256"], f["mode"], f["size"]
        if not isinstance(f["path"], str) or not os.path.isabs(f["path"]):
            raise TypeError(f"path {f['path']!r} is not an absolute path")
        if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                    and all(c in "0123456789abcdef" for c in sha)):
            raise TypeError(f"sha256 {sha!r} of {f['path']} is not a sha256")
        for name, v in (("mode", mode), ("size", size)):
            if v is not None and (type(v) is not int or v < 0):
                raise TypeError(f"{name} {v!r} of {f['path']} is not a count")
        files.append(BackedUpFile(f["path"], sha, mode, size or 0))
    for key in ("id", "time", "command"):
        if not isinstance(d[key], str):
            raise TypeError(f"{key} is not a string")
    return Backup(d["id"], d["time"], d["command"], tuple(files))


def _size_or_none(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path, error: type[Exception]) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise error(f"{path}: cannot read for backup: {e.strerror}") from e


class BackupStore:
    def __init__(self, root: str | Path, error: type[Exception] = BackupError) -> None:
        self.root = Path(root)
        self.error = error

    @property
    def objects(self) -> Path:
        return self.root / "objects"

    def new_id(self, time: str) -> str:
        """``<UTC stamp>-<n>``: n counts up, so ids sort in the order backups were taken."""
        stamp = time.replace("-", "").replace(":", "").split(".")[0]
        if not stamp.endswith("Z"):
            stamp += "Z"
        n = 1 + sum(1 for c in self.root.iterdir() if c.name != "objects") if self.root.is_dir() else 1
        candidate = f"{stamp}-{n:04d}"
        while (self.root / candidate).exists():
            n += 1
            candidate = f"{stamp}-{n:04d}"
        return candidate

    def snapshot(
        self, paths: Iterable[str | Path], *, command: str, time: str, backup_id: str | None = None
    ) -> Backup:
        """Copy each of ``paths`` into the store; return the (complete) backup record.

        ``backup_id``: an id reserved with :meth:`new_id` (default: a new one)."""
        files = []
        blobs: dict[Path, bytes] = {}
        self.objects.mkdir(parents=True, exist_ok=True)
        for p in paths:
            path = Path(p).absolute()
            data = _read_bytes(path, self.error)
            if data is None:
                files.append(BackedUpFile(str(path), None, None, 0))
                continue
            digest = sha256_bytes(data)
            blob = self.objects / digest
            if _size_or_none(blob) != len(data):
                blobs[blob] = data
            mode = stat.S_IMODE(os.stat(path).st_mode)
            files.append(BackedUpFile(str(path), digest, mode, len(data)))
        # every copy durable before the manifest that names them (one sync for many)
        write_many(blobs, {blob: 0o600 for blob in blobs})
        bid = self.check_id(backup_id) if backup_id else self.new_id(time)
        backup = Backup(bid, time, command, tuple(files))
        bdir = self.root / backup.id
        bdir.mkdir(parents=True, exist_ok=False)
        manifest = json.dumps(backup.to_dict(), indent=2, sort_keys=True) + "\n"
        atomic_write(bdir / "manifest.json", manifest.encode(), 0o644)
        return backup

    def list(self) -> list[Backup]:
        """Every complete backup, oldest first."""
        if not self.root.is_dir():
            return []
        out = []
        for child in sorted(self.root.iterdir(), key=lambda c: (c.name.rsplit("-", 1)[-1].zfill(9), c.name)):
            if child.name == "objects" or not (child / "manifest.json").is_file():
                continue
            out.append(self._load(child / "manifest.json"))
        return out

    def _load(self, manifest: Path) -> Backup:
        try:
            d = json.loads(manifest.read_bytes().decode("utf-8"))
            return _backup_from(d)
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
            raise self.error(f"{manifest}: unreadable backup manifest ({e})") from e

    def check_id(self, backup_id: str) -> str:
        """``backup_id`` if it is a plain backup id (a name, never a path)."""
        if (not isinstance(backup_id, str) or not backup_id or backup_id in (".", "..", "objects")
                or "/" in backup_id or "\\" in backup_id or "\0" in backup_id):
            raise self.error(f"invalid backup id {backup_id!r}")
        return backup_id

    def manifest_path(self, backup_id: str) -> Path:
        return self.root / self.check_id(backup_id) / "manifest.json"

    def load(self, backup_id: str) -> Backup | None:
        """Exactly the backup ``backup_id`` (reading no other manifest); None if absent."""
        manifest = self.manifest_path(backup_id)
        if not manifest.is_file():
            return None
        backup = self._load(manifest)
        if backup.id != backup_id:
            raise self.error(f"{manifest}: holds backup {backup.id!r}, not {backup_id!r}")
        return backup

    def manifests(self) -> list[Path]:
        """Every manifest file in the store (for checks that must not stop at the first)."""
        if not self.root.is_dir():
            return []
        return sorted(c / "manifest.json" for c in self.root.iterdir()
                      if c.name != "objects" and (c / "manifest.json").is_file())

    def get(self, ref: str) -> Backup:
        """A backup by id or unambiguous id prefix (``latest`` for the newest)."""
        if ref != "latest" and (self.root / ref).is_dir() and "/" not in ref:
            exact = self.load(ref)
            if exact is not None:
                return exact
        backups = self.list()
        if ref == "latest":
            if not backups:
                raise self.error("the backup store is empty")
            return backups[-1]
        matches = [b for b in backups if b.id == ref] or [b for b in backups if b.id.startswith(ref)]
        if not matches:
            raise self.error(f"no backup matches {ref!r} (see `ledger backups list`)")
        if len(matches) > 1:
            ids = ", ".join(b.id for b in matches[:6])
            raise self.error(f"backup {ref!r} is ambiguous: {ids}")
        return matches[0]

    def content(self, f: BackedUpFile) -> bytes | None:
        """The bytes a backed-up file had (None if it did not exist then)."""
        if f.sha256 is None:
            return None
        blob = self.objects / f.sha256
        try:
            data = blob.read_bytes()
        except FileNotFoundError as e:
            raise self.error(f"backup object {f.sha256[:12]} for {f.path} is missing") from e
        if sha256_bytes(data) != f.sha256:
            raise self.error(f"backup object {f.sha256[:12]} for {f.path} is corrupt")
        return data

    def diff(self, backup: Backup, path: str | Path | None = None) -> str:
        """Unified diff from the backup's content to the live file, per file."""
        files = backup.files
        if path is not None:
            f = backup.file(path)
            if f is None:
                raise self.error(f"backup {backup.id} holds no copy of {path}")
            files = (f,)
        chunks = []
        for f in files:
            old = self.content(f)
            new = _read_bytes(Path(f.path), self.error)
            if old == new:
                continue
            old_lines = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
            new_lines = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
            chunks.append(
                "".join(
                    difflib.unified_diff(
                        old_lines,
                        new_lines,
                        fromfile=f"{f.path} (backup {backup.id})" if old is not None else "/dev/null",
                        tofile=f"{f.path} (live)" if new is not None else "/dev/null",
                    )
                )
            )
        return "".join(c if c.endswith("\n") else c + "\n" for c in chunks)
