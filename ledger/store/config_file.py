"""``ledger.yaml``: the workspace's config file, read and written.

:class:`Config` is what the file says: the targets, the engine repo and release, the
bench command and its tolerance, the roots, the docs' title.  :func:`parse_config_text`
checks every field and names the file and line of the first wrong one;
:func:`dump_config` writes a Config back keeping the operator's comments (ruamel's
round-trip mode).  :func:`read_text`/:func:`read_bytes` read any workspace file with
errors that name it.  Where the workspace lives and what it holds beside this file:
:mod:`ledger.store.workspace`.
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from ledger.core.identifiers import ENGINE_SPEC_RE
from ledger.core.managed_file import Target
from ledger.core.service import parse_service
from ledger.errors import ConfigError
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.store import roots as roots_mod

__all__ = ["CONFIG_NAME", "Config", "config_line", "decode_text", "dump_config",
           "load_config", "parse_config_text", "read_bytes", "read_text"]

CONFIG_NAME = "ledger.yaml"
CONFIG_VERSION = 1


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


def config_line(path: Path, keys: tuple[str, ...]) -> int | None:
    """The 1-based line of ``keys`` (a path of mapping keys) in the ledger.yaml at
    ``path``; None where the file cannot be read or has no such key."""
    try:
        return _line_of(_yaml_rt().load(read_text(path)), keys)
    except LedgerError:
        return None
