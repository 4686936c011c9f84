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

The workspace is found like git finds a repository: ``-C DIR``, else ``LEDGER_WORKSPACE``,
else the nearest directory at or above the current one holding ``ledger.yaml``.
"""

from __future__ import annotations

import copy
import io
import os
import secrets
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from datetime import timezone
from pathlib import Path
from typing import Any
from typing import Iterable

from ledger.core.model import Entry
from ledger.core.model import ENGINE_SPEC_RE
from ledger.core.model import Target
from ledger.core.service import parse_service
from ledger.errors import AmbiguousEntry
from ledger.errors import ConfigError
from ledger.errors import EntryNotFound
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.errors import WorkspaceNotFound
from ledger.store import roots as roots_mod
from ledger.store.entries_file import entries_bytes  # noqa: F401  (re-exported)
from ledger.store.entries_file import KnownLines
from ledger.store.entries_file import parse_entries
from ledger.store.entries_file import written_lines
from ledger.store.roots import LOCAL_NAME
from ledger.store.roots import Roots

__all__ = ["Config", "Workspace"]

CONFIG_NAME = "ledger.yaml"
ENTRIES_NAME = "entries.jsonl"
CONFIG_VERSION = 1
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


@dataclass
class Config:
    targets: dict[str, Target] = field(default_factory=dict)
    engine_repo: str | None = None
    bench_command: str | None = None
    # ``bench: tolerance_pct`` (the practical tolerance of A/B verdicts, default 2) and
    # ``bench: guards`` (metrics whose regression vetoes a gain): ledger.evidence.stats
    bench_tolerance_pct: float | None = None
    bench_guards: tuple = ()  # names (str) or ledger.core.guards.Guard
    # the engine release of every target that names none (``engine: sglang==0.5.23`` at the
    # top of ledger.yaml); a target's own ``engine:`` wins (ledger.commands.catalog.engine_of)
    engine: str | None = None
    # root name -> the team's default directory (None: each machine sets its own)
    roots: dict[str, str | None] = field(default_factory=dict)
    # what the rendered docs are titled (``title:``); None: "Change history — <engines>"
    title: str | None = None

    def to_dict(self) -> dict:
        d: dict = {"version": CONFIG_VERSION}
        if self.title:
            d["title"] = self.title
        if self.roots:
            d["roots"] = dict(self.roots)
        d["engine_repo"] = self.engine_repo
        if self.engine:
            d["engine"] = self.engine
        d["targets"] = {name: t.to_dict() for name, t in self.targets.items()}
        bench = {"command": self.bench_command} if self.bench_command else {}
        if self.bench_tolerance_pct is not None:
            bench["tolerance_pct"] = self.bench_tolerance_pct
        if self.bench_guards:
            bench["guards"] = [g if isinstance(g, str) else g.to_config()
                               for g in self.bench_guards]
        if bench:
            d["bench"] = bench
        return d


def _yaml_rt():
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.preserve_quotes = True
    return yaml


def _mark_line(err: Exception) -> int | None:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    return mark.line + 1 if mark is not None else None


def read_text(path: Path, error: type[ConfigError] = ConfigError) -> str:
    """A workspace file's text; a missing/unreadable file or invalid UTF-8 names the
    file (and the line of the first bad byte)."""
    return decode_text(path, read_bytes(path, error), error)


def read_bytes(path: Path, error: type[ConfigError] = ConfigError) -> bytes:
    """A workspace file's bytes; a missing or unreadable file names the file."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise error(str(path), f"cannot read: {e.strerror}") from e


def decode_text(path: Path, raw: bytes, error: type[ConfigError] = ConfigError) -> str:
    """``raw`` (the content of ``path``) as UTF-8; invalid UTF-8 names the file and line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(str(path), f"not valid UTF-8 (byte {raw[e.start]:#04x} at offset "
                               f"{e.start})", line) from None


def load_config(path: Path) -> Config:
    """Parse ledger.yaml, with errors naming the file and line."""
    return parse_config_text(read_text(path), str(path))


def parse_config_text(text: str, path: str) -> Config:
    """ledger.yaml's text as a Config; every error names ``path`` (and the line).

    Read with the (faster) safe loader; only when the content is wrong is the file read
    again with the round-trip loader, which knows the line of every key.  Nesting deeper
    than any parser's recursion (``[[[[…``) is refused as such, not crashed on.
    """
    try:
        data = _safe_load(text)
    except RecursionError:
        raise ConfigError(path, "nested too deeply to be a ledger config") from None
    except Exception as e:
        # ruamel is imported here, not up front: a cached ledger.yaml never needs it
        from ruamel.yaml import YAMLError

        if isinstance(e, YAMLError):
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ConfigError(path, f"not valid YAML: {problem}", _mark_line(e)) from e
        # ruamel's own failures on odd input (a bad tag, a bad date…)
        raise ConfigError(path, f"not a readable YAML file ({type(e).__name__}: {e})") from e
    try:
        return _config_from(data, path, lambda *keys: None)
    except ConfigError:
        lines = _yaml_rt().load(text)
        return _config_from(data, path, lambda *keys: _line_of(lines, keys))


# The last ledger.yaml text read and what the safe loader made of it: a command reads the
# file when it opens the workspace and again under the writer lock (Workspace.reload),
# mostly unchanged; the second parse is then a copy (the Config built from it is the
# command's to change).
_LOADED: dict[str, Any] = {}


def _safe_load(text: str):
    """What the safe loader makes of ``text``; kept in the local cache
    (:mod:`ledger.store.cache`) by the text's hash: the pure-Python loader takes some 50 ms
    over a ledger.yaml of 100 targets, on every command."""
    if text not in _LOADED:
        from ledger.store import cache

        key = cache.key_of("config", text)
        found = cache.load("config", key)
        if isinstance(found, tuple) and len(found) == 1:
            data = found[0]
        else:
            from ruamel.yaml import YAML

            data = YAML(typ="safe", pure=True).load(text)
            cache.store("config", key, (data,))
        _LOADED.clear()
        _LOADED[text] = data
    return copy.deepcopy(_LOADED[text])


def _line_of(node, keys) -> int | None:
    """1-based line of the last of ``keys`` (a path of mapping keys) in a round-trip tree."""
    try:
        for key in keys[:-1]:
            node = node[key]
        return node.lc.key(keys[-1])[0] + 1
    except Exception:  # any shape problem: the message still names the file
        return None


def _bench_of(bench, path, line_of) -> tuple[str | None, float | None, list[str]]:
    """``bench:``'s command, tolerance_pct and guards, each checked (ConfigError naming it)."""
    if not isinstance(bench, dict):
        raise ConfigError(path, "bench must be a mapping", line_of("bench"))
    command = bench.get("command")
    if command is not None and not isinstance(command, str):
        raise ConfigError(path, "bench command must be a string", line_of("bench", "command"))
    tolerance = bench.get("tolerance_pct")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(
            tolerance, (int, float)) or not 0 < tolerance < 100):
        raise ConfigError(path, f"bench tolerance_pct {tolerance!r}: a number of percent "
                          "between 0 and 100 (e.g. 2)", line_of("bench", "tolerance_pct"))
    guards = bench.get("guards") or []
    if not isinstance(guards, list) or not all(isinstance(g, (str, dict)) for g in guards):
        raise ConfigError(path, "bench guards must be a list of metric names (e.g. "
                          "[p99_itl_ms]) or mappings {metric, max_change_pct, critical, "
                          "direction}", line_of("bench", "guards"))
    from ledger.core.guards import as_guard

    try:  # each checked here; a plain name stays a name (ledger.core.guards)
        checked = [as_guard(g if isinstance(g, str) else dict(g)) for g in guards]
        guards = [g if isinstance(g, str) else c for g, c in zip(guards, checked)]
    except InvalidValue as e:
        raise ConfigError(path, f"bench guards: {e}", line_of("bench", "guards")) from None
    return command, tolerance, guards


def _config_from(data, path: str, line_of) -> Config:
    if not isinstance(data, dict):
        raise ConfigError(path, "expected a mapping with version, targets, engine_repo", 1)

    version = data.get("version", CONFIG_VERSION)
    if version != CONFIG_VERSION:
        raise ConfigError(path, f"unsupported version {version!r}", line_of("version"))
    declared = roots_mod.parse_declared(data.get("roots"), path, line_of)
    targets_node = data.get("targets") or {}
    if not isinstance(targets_node, dict):
        raise ConfigError(path, "targets must be a mapping", line_of("targets"))
    targets = {}
    for name, spec in targets_node.items():
        line = line_of("targets", name)
        if not isinstance(spec, dict) or "path" not in spec or "format" not in spec:
            raise ConfigError(path, f"target {name!r} needs path and format", line)
        for key in ("path", "format", "container", "engine"):
            if spec.get(key) is not None and not isinstance(spec[key], str):
                raise ConfigError(path, f"target {name!r}: {key} must be a string", line)
        roots_mod.check_spelling(spec["path"], declared, path, line, f"target {name}")
        try:
            targets[str(name)] = Target(
                name=str(name),
                path=spec["path"],
                format=spec["format"],
                container=spec.get("container"),
                key_path=spec.get("key_path"),
                flags=spec.get("flags"),
                service=parse_service(spec, str(name)),
                engine=spec.get("engine"),
            )
        except InvalidValue as e:
            raise ConfigError(path, str(e), line) from None
    engine_repo = data.get("engine_repo")
    if engine_repo is not None and not isinstance(engine_repo, str):
        raise ConfigError(path, "engine_repo must be a path (a string)", line_of("engine_repo"))
    if engine_repo:
        roots_mod.check_spelling(engine_repo, declared, path, line_of("engine_repo"),
                                 "engine_repo")
    engine = data.get("engine")
    if engine is not None and not (isinstance(engine, str) and ENGINE_SPEC_RE.match(engine)):
        raise ConfigError(path, f"engine {engine!r}: write it as sglang==X or vllm==X",
                          line_of("engine"))
    command, tolerance, guards = _bench_of(data.get("bench") or {}, path, line_of)
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise ConfigError(path, "title must be a string", line_of("title"))
    return Config(
        title=title.strip() or None if title else None,
        targets=targets,
        engine_repo=None if engine_repo in (None, "") else engine_repo,
        bench_command=command,
        bench_tolerance_pct=None if tolerance is None else float(tolerance),
        bench_guards=tuple(guards),
        roots=declared,
        engine=engine,
    )


def dump_config(config: Config, previous_text: str | None = None) -> str:
    """ledger.yaml text for ``config``, keeping the operator's comments where possible."""
    yaml = _yaml_rt()
    data = yaml.load(previous_text) if previous_text else None
    if not isinstance(data, dict):
        from ruamel.yaml.comments import CommentedMap

        data = CommentedMap()
        data.yaml_set_start_comment("knob ledger workspace — see `ledger --help`")
    new = config.to_dict()
    for key in ("version", "engine_repo"):
        data[key] = new[key]
    if "engine" in new:
        data["engine"] = new["engine"]
    elif "engine" in data:
        del data["engine"]
    if "roots" in new and "roots" not in data:
        data.insert(1, "roots", new["roots"])
    elif "roots" in new:
        data["roots"] = new["roots"]
    elif "roots" in data:
        del data["roots"]
    targets = data.get("targets")
    if not isinstance(targets, dict):
        targets = data["targets"] = {}
    for name in list(targets):
        if name not in new["targets"]:
            del targets[name]
    for name, spec in new["targets"].items():
        targets[name] = spec
    if "bench" in new:
        data["bench"] = new["bench"]
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


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


def close_matches(typed: str, known: dict[str, str], n: int = 3) -> list[str]:
    """The shown forms of the ``known`` names closest to ``typed`` (a typo, a case slip),
    best first, for a "did you mean"."""
    import difflib

    lowered = {k.lower(): k for k in known}
    found = difflib.get_close_matches(typed.lower(), list(lowered), n=n, cutoff=0.6)
    return list(dict.fromkeys(known[lowered[f]] for f in found))


def _close_slug_parts(typed: str, entries, n: int = 3) -> list[str]:
    """Entries whose slug holds a run of words close to ``typed``: an operator types the
    part of a slug they remember (``targte-ctas`` for ``decode-target-ctas-2``), which is
    too short against the whole slug for :func:`close_matches`."""
    import difflib

    want = typed.lower().replace("_", "-")
    parts = want.count("-") + 1
    scored = []
    for e in entries:
        words = e.slug.split("-")
        runs = ["-".join(words[i:i + parts]) for i in range(max(len(words) - parts + 1, 1))]
        best = max(difflib.SequenceMatcher(None, want, r).ratio() for r in runs)
        if best >= 0.75:
            scored.append((-best, e.slug, f"{e.slug} ({e.id})"))
    return [shown for *_, shown in sorted(scored)][:n]


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
        raise EntryNotFound(ref, close or _close_slug_parts(ref, entries))

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

    def config_line(name: str) -> int | None:
        try:
            return _line_of(_yaml_rt().load(read_text(config_path)), ("roots", name))
        except LedgerError:
            return None

    return Roots(root, dict(config.roots), local, dict(os.environ), config_line, local_lines)
