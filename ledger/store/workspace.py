"""The workspace: a git repository holding ``ledger.yaml`` and the entries.

Layout::

    ledger.yaml              version, roots, targets, engine_repo, bench command (YAML)
    ledger.local.yaml        this machine's root directories (git-ignored, optional)
    entries.jsonl            the entries, one JSON object per line, in record order
    patches/<id>.patch       the body of each patch entry (its sha256 is in the entry)
    evidence/<id>/<run>/     A/B evidence (runs.csv, meta.yaml, summary.yaml)
    .ledger/                 local state, not in git: lock, intent record, backups
    .gitignore               keeps .ledger/ out of git

The entries live in one JSON Lines file, one entry per line, not in a YAML file per
entry: a ledger of ten thousand entries must load in a fraction of a second for
``status`` and ``diff`` (Python's YAML parsers are one to two orders of magnitude slower
than its JSON parser), and ``revert --perf-only`` over thousands of entries must be one
atomic file write and one small git commit, not thousands of renames.  One line per
entry still gives a readable ``git diff`` of what each command changed, and an error in
the file is reported with its line number.

Paths in ledger.yaml never need an absolute path of one machine: inside the workspace
they are relative, outside it ``ROOT:PATH`` under a named root (:mod:`ledger.store.roots`).
:meth:`Workspace.target_path` and :attr:`Workspace.engine_repo_path` are the one place
that turns them into this machine's files; :meth:`Workspace.spell` goes the other way.

What ledger.yaml says, and how it is read and written: :mod:`ledger.store.config_file`.
The workspace is found like git finds a repository: ``-C DIR``, else ``LEDGER_WORKSPACE``,
else the nearest directory at or above the current one holding ``ledger.yaml``.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime
from datetime import timezone
from pathlib import Path
from typing import Iterable

from ledger.core.managed_file import Target
from ledger.core.model import Entry
from ledger.core.names import close_matches
from ledger.core.names import close_slug_parts
from ledger.errors import AmbiguousEntry
from ledger.errors import EntryNotFound
from ledger.errors import InvalidValue
from ledger.errors import WorkspaceNotFound
from ledger.store import roots as roots_mod
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import Config
from ledger.store.config_file import config_line
from ledger.store.config_file import decode_text
from ledger.store.config_file import load_config
from ledger.store.config_file import read_bytes
from ledger.store.config_file import read_text
from ledger.store.entries_file import KnownLines
from ledger.store.entries_file import parse_entries
from ledger.store.entries_file import written_lines
from ledger.store.roots import LOCAL_NAME
from ledger.store.roots import Roots

__all__ = ["ENTRIES_NAME", "STATE_DIR", "Workspace", "cached_entries", "find_root",
           "load_roots", "new_entry_id", "utc_now"]

ENTRIES_NAME = "entries.jsonl"
STATE_DIR = ".ledger"


def utc_now() -> str:
    """Now, as the ledger stamps history: ISO 8601, UTC, seconds."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_entry_id(taken: Iterable[str]) -> str:
    """A fresh 8-hex-digit id, like a short git hash, not already in ``taken``."""
    taken = set(taken)
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken and not candidate.isdigit():
            return candidate


def find_root(start: Path | None = None, explicit: str | None = None) -> Path:
    """The workspace root: explicit (-C), LEDGER_WORKSPACE, or search upward like git."""
    if explicit is None:
        explicit = os.environ.get("LEDGER_WORKSPACE") or None
    if explicit is not None:
        root = Path(explicit).absolute()
        if not (root / CONFIG_NAME).is_file():
            raise WorkspaceNotFound(str(root))
        return root
    here = (start or Path.cwd()).absolute()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_NAME).is_file():
            return candidate
    raise WorkspaceNotFound(str(here))


def cached_entries(data: bytes, where: Path | str) -> tuple[list[Entry], bool]:
    """The entries ``data`` (an ``entries.jsonl``'s bytes, from ``where``) holds, parsed
    and validated once per content (:mod:`ledger.store.cache`); and whether the bytes are
    what :func:`~ledger.store.entries_file.entries_bytes` wrote for them."""
    from ledger.store import cache

    key = cache.key_of("entries", data)
    found = cache.load("entries", key)
    if not (isinstance(found, tuple) and len(found) == 2):  # a miss (or not ours)
        entries = parse_entries(decode_text(Path(where), data), str(where))
        cache.store("entries", key, (entries, False))
        return entries, False
    return found


class Workspace:
    """An opened workspace: its config, its entries, and where things live."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self.config = load_config(self.config_path)
        self._entries: list[Entry] | None = None
        self._written: tuple[list[Entry], bytes] | None = None  # see written_lines
        self._roots: Roots | None = None

    @classmethod
    def open(cls, explicit: str | None = None, start: Path | None = None) -> "Workspace":
        return cls(find_root(start, explicit))

    @classmethod
    def with_config(cls, root: Path, config: Config) -> "Workspace":
        """A workspace with ``config`` given (``ledger doctor`` opens one whose
        ledger.yaml is damaged this way)."""
        ws = cls.__new__(cls)
        ws.root = Path(root).absolute()
        ws.config = config
        ws._entries = None
        ws._written = None
        ws._roots = None
        return ws

    # -- places -------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def entries_path(self) -> Path:
        return self.root / ENTRIES_NAME

    @property
    def evidence_dir(self) -> Path:
        return self.root / "evidence"

    def rel(self, path: Path) -> str:
        return os.path.relpath(path, self.root)

    # -- entries ------------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """All entries in record order (loaded once per Workspace)."""
        if self._entries is None:
            self._entries = self._load_entries()
        return self._entries

    def _load_entries(self) -> list[Entry]:
        """The entries of ``entries.jsonl``, parsed and validated once per content of the
        file (:mod:`ledger.store.cache`)."""
        self._written = None
        if not self.entries_path.exists():
            return []
        data = read_bytes(self.entries_path)
        entries, ours = cached_entries(data, self.entries_path)
        if ours:  # the file is what entries_bytes wrote for these entries: keep its lines
            self._written = (entries, data)
        return entries

    def written_lines(self) -> KnownLines | None:
        """The loaded entries' own lines, where ``entries.jsonl`` is as the ledger wrote it
        (:func:`~ledger.store.entries_file.entries_bytes` reuses them)."""
        if self._written is None:
            return None
        entries, data = self._written
        return written_lines(entries, data.decode("utf-8", "surrogateescape"))

    def remember_entries(self, data: bytes | None, entries: list[Entry]) -> None:
        """``entries`` are what ``data``, just written to ``entries.jsonl`` by
        :func:`~ledger.store.entries_file.entries_bytes`, parses to: kept for the next
        command (:mod:`ledger.store.cache`), marked as written by the ledger."""
        from ledger.store import cache

        if data is not None:
            cache.store("entries", cache.key_of("entries", data), (list(entries), True))

    def invalidate(self) -> None:
        self._entries = None
        self._written = None

    def reload(self) -> None:
        """Read ledger.yaml and the entries again (after taking the writer lock: what a
        command modifies must be what is on disk now, not what it saw when it opened)."""
        self.config = load_config(self.config_path)
        self._entries = None
        self._written = None
        self._roots = None

    def resolve(self, ref: str) -> Entry:
        """An entry by full id or slug, or by a prefix of either that only one entry has.

        Several entries with that prefix: refused, naming each (``AmbiguousEntry``).  None:
        ``EntryNotFound`` with the closest ids and slugs as "did you mean".
        """
        entries = self.entries()
        for e in entries:
            if e.id == ref or e.slug == ref:
                return e
        matches = [e for e in entries if ref and (e.id.startswith(ref) or
                                                  e.slug.startswith(ref))]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousEntry(ref, [f"{e.id} ({e.slug}: {e.title})" for e in matches])
        close = close_matches(ref, {
            **{e.slug: f"{e.slug} ({e.id})" for e in entries},
            **{e.id: f"{e.id} ({e.slug})" for e in entries}})
        raise EntryNotFound(ref, close or close_slug_parts(ref, entries))

    # -- targets ------------------------------------------------------------------------
    def target(self, name: str) -> Target:
        try:
            return self.config.targets[name]
        except KeyError:
            known = ", ".join(sorted(self.config.targets)) or "none yet"
            close = close_matches(name, {t: t for t in self.config.targets})
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise InvalidValue(
                f"no target named {name!r} ({hint}known: {known}; add one with "
                "`ledger target add`)"
            ) from None

    @property
    def local_config_path(self) -> Path:
        return self.root / LOCAL_NAME

    @property
    def roots(self) -> Roots:
        """The roots on this machine: ledger.yaml, ledger.local.yaml, LEDGER_ROOT_*."""
        if self._roots is None:
            self._roots = load_roots(self.root, self.config, self.config_path,
                                     self.local_config_path)
        return self._roots

    def target_path(self, target: Target) -> Path:
        """The file ``target`` is on this machine (RootError if its root is not here)."""
        return self.roots.path_of(target.path)

    def target_paths_here(self) -> dict[str, Path]:
        """Each target's file on this machine, leaving out targets whose root has no
        directory here (they have no file on this machine to touch)."""
        from ledger.store.roots import RootError

        out = {}
        for name, t in self.config.targets.items():
            try:
                out[name] = self.target_path(t)
            except RootError:
                pass
        return out

    @property
    def engine_repo_path(self) -> Path | None:
        """The engine repo on this machine, or None when ledger.yaml names none."""
        if not self.config.engine_repo:
            return None
        return self.roots.path_of(self.config.engine_repo)

    def spell(self, path: Path) -> str | None:
        """How ledger.yaml writes this machine's ``path`` (see :meth:`Roots.spell`)."""
        return self.roots.spell(Path(path).absolute())

    def place(self, path: Path, root: str | None = None) -> str:
        """How ledger.yaml writes ``path``, or refused (see :meth:`Roots.place`)."""
        return self.roots.place(Path(path).absolute(), root)


def load_roots(root: Path, config: Config, config_path: Path, local_path: Path) -> Roots:
    """The workspace's roots as this machine resolves them."""
    local, local_lines = {}, {}
    if local_path.exists():
        local, local_lines = roots_mod.parse_local_roots(
            read_text(local_path), str(local_path), config.roots)

    def config_line_of(name: str) -> int | None:
        return config_line(config_path, ("roots", name))

    return Roots(root, dict(config.roots), local, dict(os.environ), config_line_of,
                 local_lines)
