"""`ledger init`, `ledger target add` and `target show`: create a workspace, put files
under management, and say what the ledger understood of one."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from envknobs.formats import FormatError
from ledger.commands.session import Session
from ledger.commands.session import edit_config
from ledger.core.managed_file import Target
from ledger.core.identifiers import check_target_name
from ledger.errors import InvalidValue
from ledger.errors import Refused
from ledger.evidence.runner import DEFAULT_BENCH_COMMAND
from ledger.store import wsgit
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import Config
from ledger.store.config_file import dump_config
from ledger.store.entries_file import entries_bytes
from ledger.store.managed import check_target_file
from ledger.store.roots import contract_home
from ledger.store.roots import new_root_name
from ledger.store.roots import split_rooted
from ledger.store.targets import target_format
from ledger.store.targets import read_target
from ledger.store.workspace import ENTRIES_NAME

GITIGNORE = ("# local state of knob ledger: lock, intent record, backups\n.ledger/\n"
             "# this machine's root directories (see `ledger root list`)\nledger.local.yaml\n")


def _is_bundled_engine(repo: Path) -> bool:
    """Whether ``repo`` is a checkout of the bundled engine (the package ``ledger demo``
    copies: ``engine/__main__.py`` beside ``engine/knobs.py``)."""
    return (repo / "engine" / "__main__.py").is_file() and (repo / "engine" / "knobs.py").is_file()


def init_workspace(directory: Path, engine_repo: str | None = None, dry_run: bool = False,
                   roots: Mapping[str, str] | None = None) -> Path:
    """Create a workspace in ``directory`` (a new git repo with ledger.yaml).

    ``roots``: NAME -> directory, declared in ledger.yaml as given (a relative directory
    is relative to the workspace, as in ledger.yaml); the engine repo
    is written under the root holding it, or relative inside the workspace; one outside
    the workspace under no root gets a root of its own, ``engine`` (its directory as the
    default), as ``target add`` does for a file."""
    root = Path(directory).absolute()
    if (root / CONFIG_NAME).exists():
        raise Refused(f"{root} is already a ledger workspace")
    if root.exists() and not root.is_dir():
        raise InvalidValue(f"{root} exists and is not a directory")
    repo_setting = None
    if engine_repo is not None:
        repo_path = Path(engine_repo).absolute()
        if not (repo_path / ".git").exists():
            raise InvalidValue(f"engine repo {engine_repo}: not a git checkout (no .git)")
    declared = _init_roots(roots or {}, root)
    if engine_repo is not None:
        from ledger.store.roots import Roots

        repo_path = Path(os.path.normpath(repo_path))
        roots_here = Roots(root, declared, env={})
        if roots_here.is_stray(repo_path):  # a root of its own, as target add does
            name = new_root_name(repo_path, declared, preferred="engine")
            declared[name] = contract_home(repo_path)
            repo_setting = f"{name}:"
        else:
            repo_setting = roots_here.place(repo_path)
    if dry_run:
        return root
    root.mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        wsgit.init(root)
    # The bundled engine's bench only where the engine is the bundled one (issue 52): on
    # SGLang/vLLM targets it would measure an engine that never reads their knobs.  With
    # no engine repo `ab` still falls back to it, and refuses it for another engine's knob.
    bundled = engine_repo is not None and _is_bundled_engine(repo_path)
    config = Config(engine_repo=repo_setting,
                    bench_command=DEFAULT_BENCH_COMMAND if bundled else None, roots=declared)
    (root / CONFIG_NAME).write_text(dump_config(config), encoding="utf-8")
    (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    (root / ENTRIES_NAME).write_bytes(entries_bytes([]))
    # The merge driver for entries.jsonl (see ledger.commands.sync): a plain `git pull`
    # merges the ledger as `ledger pull` does.
    from ledger.commands.sync import register

    extra = register(root)
    for rel, data in extra.items():
        (root / rel).write_bytes(data)
    wsgit.commit(root, [CONFIG_NAME, ".gitignore", ENTRIES_NAME, *extra],
                 "init: new ledger workspace\n")
    return root


def _init_roots(roots: Mapping[str, str], root: Path) -> dict[str, str | None]:
    from ledger.store.roots import check_root_name

    out: dict[str, str | None] = {}
    for name, directory in roots.items():
        check_root_name(name, "--root")
        given = Path(os.path.expanduser(directory))
        absolute = Path(os.path.normpath(given if given.is_absolute() else root / given))
        if not absolute.is_dir():
            raise InvalidValue(f"--root {name}={directory}: {absolute} is not a directory")
        out[name] = directory
    return out


def add_target(
    s: Session, name: str, path: str, fmt: str, container: str | None, cwd: Path, dry_run: bool,
    key_path: str | None = None, flags: str | None = None, root: str | None = None,
) -> tuple[Target, tuple[str, str] | None]:
    """Put a file under management (it must exist, parse, and not be a symlink).

    ``container``: the k8s container address; ``key_path``/``flags``: where a yaml-map's
    map is, and the engine whose server flags its keys are (an ``--config`` file).
    The name is checked against ``ledger.yaml`` as it is once the writer lock is held, so
    two concurrent adds of different targets both land (see :func:`edit_config`).

    The path is written relative inside the workspace and ``ROOT:PATH`` under a root
    outside it (``root``: that root; else the root holding it most deeply); a file held
    equally by two is refused (:meth:`~ledger.store.roots.Roots.place`).  A file outside
    the workspace under no root gets a root of its own, declared in the same commit
    (:func:`~ledger.store.roots.new_root_name`, the directory as its default): returned
    as ``(name, default)`` beside the target, for the CLI to say so."""
    check_target_name(name)
    _refuse_taken(s.ws.config, name)
    abs_path = Path(path) if Path(path).is_absolute() else (cwd / path)
    abs_path = Path(os.path.normpath(abs_path))
    check_target_file(abs_path)
    new_root = None
    if root is None and s.ws.roots.is_stray(abs_path):
        new_root = (new_root_name(abs_path.parent, s.ws.config.roots),
                    contract_home(abs_path.parent))
        spelled = f"{new_root[0]}:{abs_path.name}"
    else:
        spelled = s.ws.place(abs_path, root)
    try:
        target = Target(name, spelled, fmt, container, key_path, flags)
        target_format(target)  # a malformed container address or key path fails here
    except FormatError as e:
        raise InvalidValue(f"target {name}: {e}") from None
    # parses (by its path on this machine), so a bad file or a missing container fails now
    read_target(s.ws, replace(target, path=str(abs_path)))
    if dry_run:
        return target, new_root

    def add(config: Config) -> None:
        _refuse_taken(config, name)
        if new_root is not None:
            if new_root[0] in config.roots:  # declared meanwhile by a concurrent command
                raise Refused(f"root {new_root[0]} was declared while target {name} was "
                              "being added: run the command again")
            config.roots[new_root[0]] = new_root[1]
        config.targets[name] = target

    # A file inside the workspace is committed with the ledger (a GitOps engine applies
    # what the repository holds), unless .gitignore keeps it this machine's.
    inside = [] if split_rooted(target.path) else wsgit.not_ignored(s.ws.root, [target.path])
    declared = f"; root {new_root[0]} = {new_root[1]}" if new_root else ""
    edit_config(s, f"target add {name}: {target.path} ({fmt}){declared}\n", add, inside)
    return target, new_root


def _refuse_taken(config: Config, name: str) -> None:
    if name in config.targets:
        raise Refused(f"a target named {name!r} exists already ({config.targets[name].path})")


def target_summary(s: Session, name: str, target: Target | None = None) -> dict:
    """What the ledger sees in a target: every knob and launch flag with its value, the
    lines of its places, and whether it is conditional, repeated, computed by the shell
    or on a launch line; the launch commands; notes (``--env-file``, ``"$@"`` ...)."""
    t = target or s.ws.target(name)
    tf = read_target(s.ws, t)
    base = {"target": t.name, "path": str(tf.path), "format": t.format}
    if tf.summary is None:
        knobs = [{"knob": k, "flag": False, "state": "static", "value": v, "conditional": False,
                  "repeated": False, "computed": False, "on_launch": False, "absent_on": [],
                  "places": []} for k, v in tf.values.items()]
        d = {**base, "knobs": knobs, "launches": [], "notes": []}
    else:
        d = {**base, **tf.summary.to_dict()}
    # files it names or that sit beside it (a unit's drop-ins), read now (not cached)
    outside = target_format(t).outside_notes(tf.text, str(tf.path))
    if outside:
        d["notes"] = [*d["notes"], *outside]
    from ledger.commands.catalog import engine_of
    from ledger.commands.catalog import name_defaults

    spec = engine_of(s.ws, t, tf.text)
    defaults = name_defaults(spec, [k["knob"] for k in d["knobs"]])
    for k in d["knobs"]:
        k["default"] = defaults[k["knob"]]
    return {**d, "engine": spec}


def set_service(s: Session, name: str, changes: dict, dry_run: bool = False) -> Target:
    """Change the live probe, restart command or health check of target ``name``.

    ``changes`` maps service keys of ledger.yaml (``live``, ``restart``, ``shell``,
    ``health``) to their new value, or None to remove the key; the result is validated
    as ledger.yaml would be (see :mod:`ledger.core.service`).  Applied to ledger.yaml as
    it is once the writer lock is held."""
    new = _with_service(s.ws.config, name, changes)
    if dry_run or new == s.ws.target(name):
        return new

    def change(config: Config) -> None:
        config.targets[name] = _with_service(config, name, changes)

    edit_config(s, f"target set {name}: live probe, restart and health\n", change)
    return new


def _with_service(config: Config, name: str, changes: dict) -> Target:
    from dataclasses import replace

    from ledger.core.service import parse_service

    target = config.targets.get(name)
    if target is None:
        known = ", ".join(sorted(config.targets)) or "none yet"
        raise InvalidValue(f"no target named {name!r} (known: {known})")
    spec = target.service.to_dict() if target.service else {}
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    if not isinstance(spec.get("restart"), str):
        spec.pop("shell", None)
    return replace(target, service=parse_service(spec, name) if spec else None)
