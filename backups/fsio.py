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

Temporary files are named so crash recovery can find them: ``.ledger-tmp-<tag>-<name>``
next to the file they replace (:func:`temp_path`), where ``<tag>`` is the id of the
operation writing them (set with :func:`temp_tag`; a transaction sets its own id and lists
the temporaries in its intent record) or ``p<pid>`` outside any operation.  A process
killed between creating and renaming one leaves it behind; the next command's recovery,
or ``ledger doctor --repair``, removes every ``.ledger-tmp-`` file of a dead operation.
The name is deterministic for a given (tag, file), so the intent record can name it
before it exists; it is created exclusively and never followed if it is a link.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator
from typing import Mapping

TEMP_PREFIX = ".ledger-tmp-"
_TAG: ContextVar[str | None] = ContextVar("ledger_temp_tag", default=None)

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


@contextmanager
def temp_tag(tag: str) -> Iterator[None]:
    """Name every temporary file written inside the block after operation ``tag``."""
    if not tag or "/" in tag or "-" in tag:
        raise ValueError(f"invalid temp tag {tag!r}")
    token = _TAG.set(tag)
    try:
        yield
    finally:
        _TAG.reset(token)


def current_tag() -> str:
    return _TAG.get() or f"p{os.getpid()}"


def temp_path(path: Path, tag: str | None = None) -> Path:
    """Where the temporary copy of ``path`` is written by operation ``tag``."""
    path = Path(path)
    return path.parent / f"{TEMP_PREFIX}{tag or current_tag()}-{path.name}"


def temp_owner(name: str) -> str | None:
    """The tag of a temporary file's name (``.ledger-tmp-<tag>-…``), or None if not one."""
    if not name.startswith(TEMP_PREFIX):
        return None
    tag, sep, _ = name[len(TEMP_PREFIX):].partition("-")
    return tag if sep and tag else None


def _create_exclusive(tmp: Path) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(tmp, flags, 0o600)
    except FileExistsError:
        # Left by this same operation (the name carries its id): a retry after a failure.
        _unlink_quietly(tmp)
        return os.open(tmp, flags, 0o600)


def _write_temp(path: Path, data: bytes, mode: int | None, fsync: bool) -> Path:
    tmp = temp_path(path)
    fd = _create_exclusive(tmp)
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
