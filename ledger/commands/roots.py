"""`ledger root add` and `ledger root list`: the named roots of a portable workspace.

``root add NAME DIR`` declares the root in ``ledger.yaml`` with DIR as the team's default
directory; ``--local`` puts DIR in this machine's git-ignored ``ledger.local.yaml``
instead (declaring the root in ``ledger.yaml`` with no default if it is new).  Either
way, every target path and the engine repo that ``ledger.yaml`` still writes as an
absolute path under the root's directory on this machine is rewritten as ``ROOT:PATH``
— in the same transaction (backups first, atomic writes, one commit), so an older
workspace becomes portable in one command.  The directory must exist.

Decisions: a relative DIR is taken from the current directory (like every path typed)
and written relative to the workspace (portable: a sibling checkout is ``../deploy`` on
every clone); a DIR under the user's home is written ``~/…``; any other is written
absolute (a team default such as ``/opt/sglang``).  Declaring a root twice is refused
(``ledger.yaml:LINE`` named): a committed default is changed by editing ``ledger.yaml``,
a machine's directory with ``--local``.  With ``LEDGER_ROOT_<NAME>`` set, the rewrite
follows the directory the variable gives, since that is where the root is here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path

from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.errors import Refused
from ledger.store import roots as roots_mod
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import Config
from ledger.store.config_file import dump_config
from ledger.store.config_file import read_text
from ledger.store.managed import refuse_symlinked_targets
from ledger.store.roots import LOCAL_NAME
from ledger.store.roots import check_root_name
from ledger.store.roots import contract_home
from ledger.store.txn import Transaction
from ledger.store.workspace import Workspace

GITIGNORE_NAME = ".gitignore"


@dataclass
class RootAdded:
    """What ``root add`` did (or would do)."""

    name: str
    written: str  # the value written (ledger.yaml's default or ledger.local.yaml's)
    local: bool
    directory: str  # where the root is on this machine now
    rewritten: dict[str, tuple[str, str]] = field(default_factory=dict)  # what -> (old, new)
    commit: str | None = None
    dry_run: bool = False


def _written_dir(directory: str, cwd: Path, root: Path) -> tuple[str, Path]:
    """(the spelling to store, the absolute directory) of a DIR the operator typed."""
    expanded = Path(os.path.expanduser(directory))
    absolute = Path(os.path.normpath(expanded if expanded.is_absolute() else cwd / expanded))
    if not absolute.is_dir():
        raise InvalidValue(f"root directory {directory}: {absolute} is not a directory")
    if directory.startswith("~"):
        return contract_home(absolute), absolute
    if not os.path.isabs(directory):
        return os.path.relpath(absolute, root), absolute
    return str(absolute), absolute


def add_root(s: Session, name: str, directory: str, cwd: Path, *, local: bool = False,
             dry_run: bool = False) -> RootAdded:
    """Declare root ``name`` (or set this machine's directory for it) and rewrite the
    absolute paths under it as ``NAME:PATH`` (see the module doc)."""
    check_root_name(name, "root name")
    with writing(s, dry_run, new_config=True) as ws:
        written, _ = _written_dir(directory, cwd, ws.root)
        declared = name in ws.config.roots
        if declared and not local:
            line = ws.roots.config_line(name)
            where = f"{CONFIG_NAME}:{line}" if line else CONFIG_NAME
            raise Refused(f"{where}: root {name} is declared already (default "
                          f"{ws.config.roots[name] or 'none'}): set this machine's "
                          f"directory with `ledger root add {name} DIR --local`, or edit "
                          f"the default in {CONFIG_NAME}")
        config = replace(ws.config, roots={**ws.config.roots}, targets=dict(ws.config.targets))
        if not declared:
            config.roots[name] = None if local else written
        local_roots = dict(ws.roots.local)
        if local:
            local_roots[name] = written
        after = _with_local(ws, config, local_roots)
        here = after.roots.directory(name)
        rewritten = _rewrite(after, config, name)
        refuse_symlinked_targets(after)
        result = RootAdded(name, written, local, str(here), rewritten, dry_run=dry_run)
        if dry_run:
            return result
        ledger_writes: dict[str, bytes | None] = {}
        if config != ws.config:
            text = dump_config(config, read_text(ws.config_path))
            ledger_writes[CONFIG_NAME] = text.encode()
        target_writes = {}
        if local:
            previous = read_text(ws.local_config_path) if ws.local_config_path.exists() else None
            target_writes[ws.local_config_path] = roots_mod.local_text(
                {name: written}, previous).encode()
            ignore = _gitignore_with_local(ws)
            if ignore is not None:
                ledger_writes[GITIGNORE_NAME] = ignore
        message = _message(result)
        outcome = Transaction(ws, s.command, s.now).execute(
            message=message, target_writes=target_writes, ledger_writes=ledger_writes,
            commit=bool(ledger_writes))
        ws.invalidate()
        result.commit = outcome.commit
        return result


def _with_local(ws: Workspace, config: Config, local_roots: dict[str, str]) -> Workspace:
    """The workspace as it will be: ``config``, and ledger.local.yaml's ``local_roots``."""
    after = Workspace.with_config(ws.root, config)
    current = ws.roots
    after._roots = roots_mod.Roots(ws.root, dict(config.roots), local_roots, current.env,
                                   current.config_line, dict(current.local_lines))
    return after


def _rewrite(after: Workspace, config: Config, name: str) -> dict[str, tuple[str, str]]:
    """Rewrite in ``config`` the absolute paths under root ``name``; what changed."""
    out: dict[str, tuple[str, str]] = {}
    for tname, t in list(config.targets.items()):
        new = _under(after, t.path, name)
        if new is not None:
            config.targets[tname] = replace(t, path=new)
            out[f"target {tname}"] = (t.path, new)
    if config.engine_repo:
        new = _under(after, config.engine_repo, name)
        if new is not None:
            out["engine_repo"] = (config.engine_repo, new)
            config.engine_repo = new
    return out


def _under(after: Workspace, spelling: str, name: str) -> str | None:
    if not os.path.isabs(spelling):
        return None
    for _, holder, rooted in after.roots.holders(Path(spelling)):
        if holder == name:
            return rooted
    return None


def _gitignore_with_local(ws: Workspace) -> bytes | None:
    """.gitignore with ``ledger.local.yaml`` in it; None when git ignores it already."""
    from ledger.store import wsgit

    if not wsgit.not_ignored(ws.root, [LOCAL_NAME]):
        return None
    path = ws.root / GITIGNORE_NAME
    return roots_mod.ignore_with_local(path.read_bytes() if path.is_file() else None)


def _message(r: RootAdded) -> str:
    where = f"{LOCAL_NAME} (this machine)" if r.local else CONFIG_NAME
    lines = [f"root add {r.name}: {r.written} in {where}", ""]
    lines += [f"- {what}: {old} -> {new}" for what, (old, new) in r.rewritten.items()]
    return "\n".join(lines).rstrip() + "\n"


@dataclass
class RootRow:
    """One root as this machine sees it."""

    name: str
    default: str | None
    directory: str | None  # resolved here, or None
    source: str | None  # "ledger.yaml:4", "ledger.local.yaml:2", "LEDGER_ROOT_DEPLOY"
    problem: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "default": self.default, "directory": self.directory,
                "from": self.source, "problem": self.problem}


def list_roots(ws: Workspace) -> list[RootRow]:
    """Each declared root: its default, its directory on this machine and where that
    comes from (or what is wrong with it here)."""
    rows = []
    for name, default in ws.config.roots.items():
        setting = ws.roots.setting(name)
        try:
            directory, problem = str(ws.roots.directory(name)), None
        except LedgerError as e:
            directory, problem = None, str(e)
        rows.append(RootRow(name, default, directory, setting.source if setting else None,
                            problem))
    return rows
