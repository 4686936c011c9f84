"""The backup store: a copy of every file the ledger is about to change.

Layout, under the store's root (``<workspace>/.ledger/backups`` by default)::

    objects/<sha256>          file contents, content-addressed (a file backed up by
                              a hundred commands unchanged is stored once)
    <backup-id>/manifest.json which files, with their sha256, mode and size, when,
                              and the command that made the backup

Backup ids carry the time and a counter (``20261202T160102Z-0007``); listing is in
the order backups were taken.  A manifest is written last and
atomically, so a backup that is listed is complete.  The store is local safety state,
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

    def _new_id(self, time: str) -> str:
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

    def snapshot(self, paths: Iterable[str | Path], *, command: str, time: str) -> Backup:
        """Copy each of ``paths`` into the store; return the (complete) backup record."""
        files = []
        self.objects.mkdir(parents=True, exist_ok=True)
        for p in paths:
            path = Path(p).absolute()
            data = _read_bytes(path, self.error)
            if data is None:
                files.append(BackedUpFile(str(path), None, None, 0))
                continue
            digest = sha256_bytes(data)
            blob = self.objects / digest
            if not blob.exists():
                atomic_write(blob, data, 0o600)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            files.append(BackedUpFile(str(path), digest, mode, len(data)))
        backup = Backup(self._new_id(time), time, command, tuple(files))
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
            d = json.loads(manifest.read_text())
            files = tuple(
                BackedUpFile(f["path"], f["sha256"], f["mode"], int(f["size"])) for f in d["files"]
            )
            return Backup(d["id"], d["time"], d["command"], files)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise self.error(f"{manifest}: unreadable backup manifest ({e})") from e

    def get(self, ref: str) -> Backup:
        """A backup by id or unambiguous id prefix (``latest`` for the newest)."""
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
