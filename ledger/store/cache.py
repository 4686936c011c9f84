"""A local cache of what is costly to derive from files that rarely change.

What is derived again by every command costs most of a read-only command at scale (10,000 entries over 100 serve scripts): the entries parsed and validated from
``entries.jsonl``, ``ledger.yaml`` as the YAML loader reads it, and each target file's
analysis (its knobs, places and launches); and the knob and flag catalogs, parsed from
their YAML (:func:`keep_catalogs`).
Each is a pure function of bytes, so they are kept in the user's cache directory
(``$LEDGER_CACHE_DIR``, else ``$XDG_CACHE_HOME/knob-ledger``, else
``~/.cache/knob-ledger``; ``LEDGER_CACHE_DIR=`` (empty) turns the cache off) keyed by
the SHA-256 of those bytes — together with everything else the result depends on (the
target's format settings, and a fingerprint of the code that reads them, so an upgraded
or edited ledger never reads an older build's results).

The rules:

* a cache file is only ever a copy of what reading the source gives; a missing, torn,
  foreign or unreadable one is a miss, and the source is read as if there were no cache;
* writing it is best effort and never fails a command (a read-only workspace, a full
  disk): it is written to a temporary name and renamed, so a reader sees a whole file or
  none, and never synced (a cache lost in a crash is only a miss);
* it lives outside every workspace: a read-only command changes nothing in the
  workspace, and nothing pulled from a colleague ever lands in the cache; it is the
  user's own directory (like ``~/.cache`` for any tool), which is why a cached file may
  be loaded with ``pickle``;
* at most ``KEEP`` files per kind are kept: when a write passes that, the oldest are
  removed (down to 7/8 of it, so a full cache is not sorted on every write).  The key holds the content, so one cache serves every workspace.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

KEEP = 1024
_FORMAT = 1  # the layout of a cache file; bump to retire every older one


def _code_fingerprint() -> str:
    """The size and mtime of every source file the cached results come from (the flag
    and knob catalogs included: a script's launch flags are read with them).  Every
    command computes it once: walked with ``os.walk`` and plain strings (some 300 files;
    ``Path.rglob`` took twice as long)."""
    import envknobs
    import ledger

    parts = [str(_FORMAT)]
    for package in (envknobs, ledger):
        base = os.path.dirname(package.__file__)
        found = []
        for directory, subdirs, names in os.walk(base):
            subdirs[:] = [d for d in subdirs if d != "__pycache__"]
            found += [os.path.join(directory, n) for n in names if n.endswith((".py", ".yaml"))]
        for path in sorted(found):
            try:
                st = os.stat(path)
            except OSError:
                continue
            parts.append(f"{os.path.relpath(path, os.path.dirname(base))}:{st.st_size}:"
                         f"{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


_FINGERPRINT: str | None = None


def key_of(*parts: bytes | str) -> str:
    """The cache key of a result derived from ``parts`` (and from this code)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = _code_fingerprint()
    h = hashlib.sha256(_FINGERPRINT.encode())
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def cache_dir() -> Path | None:
    """Where the cache is (None: turned off); see the module docstring."""
    chosen = os.environ.get("LEDGER_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "knob-ledger"


def _path(kind: str, key: str) -> Path | None:
    root = cache_dir()
    return root / kind / f"{key}.pickle" if root is not None else None


def load(kind: str, key: str) -> Any | None:
    """The cached result for ``key``, or None (a miss: see the module docstring)."""
    path = _path(kind, key)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        stored_key, value = pickle.loads(data)
    except Exception:  # a miss whatever went wrong: the caller reads the source
        return None
    return value if stored_key == key else None


def store(kind: str, key: str, value: Any) -> None:
    """Keep ``value`` for ``key``; never raises."""
    path = _path(kind, key)
    if path is None:
        return
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.write_bytes(pickle.dumps((key, value), protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
        _prune(path.parent, keep=path.name)
    except Exception:
        try:
            tmp.unlink()
        except OSError:
            pass


_COUNTS: dict[Path, int] = {}  # files per cache directory, as this process last counted


def _prune(directory: Path, keep: str) -> None:
    """Past ``KEEP`` files, remove the oldest down to 7/8 of it.  The directory is
    listed on a command's first write and whenever its own writes may have taken it past
    ``KEEP``: a command writing 100 target analyses lists it once, not 100 times, and a
    full cache is not listed and sorted on every write."""
    count = _COUNTS.get(directory)
    if count is not None and count < KEEP:
        _COUNTS[directory] = count + 1
        return
    names = [n for n in os.listdir(directory) if n.endswith(".pickle")]
    if len(names) <= KEEP:
        _COUNTS[directory] = len(names)
        return
    floor = KEEP - KEEP // 8
    _COUNTS[directory] = floor
    def mtime(name: str) -> int:
        try:
            return (directory / name).stat().st_mtime_ns
        except OSError:
            return 0
    for name in sorted(names, key=mtime)[: len(names) - floor]:
        if name != keep:
            try:
                (directory / name).unlink()
            except OSError:
                pass


def keep_catalogs() -> None:
    """Offer this cache to envknobs for the catalogs it parses (:mod:`envknobs.parse_cache`):
    a command that reads a launch line's flags, or a release's catalog, then loads them
    as one pickle instead of parsing YAML (40 ms for the bundled flag catalogs, 300 ms
    for a release's)."""
    from envknobs.parse_cache import keep_in

    keep_in(lambda k: load("catalogs", key_of("catalogs", k)),
            lambda k, v: store("catalogs", key_of("catalogs", k), v))


def cached_files() -> list[Path]:
    """Every cache file (for the tests)."""
    root = cache_dir()
    return sorted(root.rglob("*.pickle")) if root is not None and root.is_dir() else []


__all__ = ["KEEP", "cache_dir", "cached_files", "keep_catalogs", "key_of", "load", "store"]
