"""Crash-safe file writes.

Every write the ledger makes goes through here (the backup store's too, which is why it
lives in this lowest package): the new content goes to a temporary file
in the same directory, is flushed to disk, and is renamed over the old file with
``os.replace`` (atomic on POSIX), then the directory is synced so the rename itself is
durable.  A reader — or a crash at any instant — sees the old bytes or the new bytes,
never an empty or half-written file.  The file's mode is kept.

:func:`write_many` does the same for many files at once with one ``os.sync()`` between
writing the temporaries and renaming them, instead of one ``fsync`` per file: a
``revert --perf-only`` over thousands of entries would otherwise spend seconds in fsync.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Mapping

# Above this many files, one os.sync() is cheaper than an fsync per file.
_BATCH_SYNC_THRESHOLD = 16


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes, mode: int | None, fsync: bool) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise
    return Path(tmp)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def existing_mode(path: Path) -> int | None:
    """Permission bits of ``path`` (to carry over to its replacement), or None if absent."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically and durably, keeping its mode."""
    path = Path(path)
    if mode is None:
        mode = existing_mode(path)
    tmp = _write_temp(path, data, mode if mode is not None else 0o644, fsync=True)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(path.parent)


def write_many(files: Mapping[Path, bytes], modes: Mapping[Path, int] | None = None) -> None:
    """Atomically replace each file in ``files``; all data is durable before any rename.

    Not atomic *across* files (nothing on POSIX is): the caller's transaction journal
    covers that.  Each single file is always old or new.
    """
    if len(files) < _BATCH_SYNC_THRESHOLD:
        for path, data in files.items():
            atomic_write(path, data, (modes or {}).get(path))
        return
    temps: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            mode = (modes or {}).get(path)
            if mode is None:
                mode = existing_mode(path)
            temps.append((_write_temp(path, data, mode if mode is not None else 0o644, False), path))
        os.sync()
        for tmp, path in temps:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in temps:
            _unlink_quietly(tmp)
        raise
    os.sync()


def remove_file(path: Path) -> None:
    """Remove ``path`` if present and sync its directory."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_dir(path.parent)
