"""Parsed catalogs kept between processes, where the application offers a place.

Reading a catalog is YAML parsing plus building and checking every declaration: the
bundled flag catalogs cost some 40 ms, a release catalog (``sglang==0.5.23``: 770 env
vars, 531 flags) some 300 ms, and a command-line tool pays that on every command.
envknobs imports nothing of the programs that use it, so it keeps nothing on disk by
itself: an application with a cache of its own (the ledger's local cache,
``ledger.store.cache``) hands over two functions with :func:`keep_in`, and
:func:`kept` then asks it before building.  Without them everything is built as
before.

A key names what was built and the file it was built from, with the file's size and
modification time; the application's cache is expected to add what else the result
depends on (the ledger's keys hold a fingerprint of this package's code and data).
A value is stored wrapped in a one-item tuple and used only when it comes back in that
shape: anything else the cache returns is a miss, and the catalog is built again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from typing import Callable
from typing import TypeVar

T = TypeVar("T")

_HOOK: tuple[Callable[[str], Any], Callable[[str, Any], None]] | None = None


def keep_in(load: Callable[[str], Any] | None, store: Callable[[str, Any], None] | None = None,
            ) -> None:
    """Keep parsed catalogs where ``load(key)`` (None: not kept) and ``store(key, value)``
    say; ``keep_in(None)`` stops."""
    global _HOOK
    _HOOK = (load, store) if load is not None and store is not None else None


def kept(what: str, path: Path, build: Callable[[], T], *also: Path) -> T:
    """``build()``, or what the application kept of it for ``path`` as it is now (and the
    files ``also`` read by the build)."""
    hook = _HOOK
    if hook is None:
        return build()
    parts = [what]
    for p in (path, *also):
        try:
            st = Path(p).stat()
        except OSError:
            return build()
        parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
    key = "\0".join(parts)
    found = hook[0](key)
    if isinstance(found, tuple) and len(found) == 1:
        return found[0]
    value = build()
    hook[1](key, (value,))
    return value


__all__ = ["keep_in", "kept"]
