"""The ledger's commands, as library functions.

One function per command; each returns data (dataclasses, dicts) and raises
:class:`~ledger.errors.LedgerError` subclasses.  Nothing here prints or prompts:
``ledger/cli.py`` parses arguments, calls one of these, and formats what comes back.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Sequence

from envknobs.registry import KnobError
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value
from ledger.core import planner
from ledger.store import wsgit
from ledger.store.apply import Applied
from ledger.store.apply import apply_plan
from ledger.store.apply import commit_message
from ledger.store.apply import layer_anchors
from ledger.errors import Drift
from ledger.errors import DriftError
from ledger.errors import InvalidValue
from ledger.errors import LockHeld
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.core.model import Action
from ledger.core.model import Entry
from ledger.core.model import Target
from ledger.core.model import check_class
from ledger.core.model import check_target_name
from ledger.core.model import slugify
from ledger.store.targets import anchor_in
from ledger.store.targets import edit_target
from ledger.store.targets import read_target
from ledger.store.txn import Transaction
from ledger.store.txn import WriterLock
from ledger.store.txn import recover
from ledger.store.workspace import CONFIG_NAME
from ledger.store.workspace import DEFAULT_BENCH_COMMAND
from ledger.store.workspace import Config
from ledger.store.workspace import Workspace
from ledger.store.workspace import check_target_file
from ledger.store.workspace import dump_config
from ledger.store.workspace import ENTRIES_NAME
from ledger.store.workspace import entries_bytes
from ledger.store.workspace import new_entry_id
from ledger.store.workspace import utc_now

GITIGNORE = "# local state of knob ledger: lock, intent record, backups\n.ledger/\n"


@dataclass
class Session:
    """One invocation: the workspace, the command line for history, notices to show."""

    ws: Workspace
    command: str
    now: str = field(default_factory=utc_now)
    notices: list[str] = field(default_factory=list)


def open_session(explicit: str | None, command: str, cwd: Path | None = None) -> Session:
    """Open the workspace and finish any operation a killed command left behind."""
    ws = Workspace.open(explicit, cwd)
    session = Session(ws, command)
    if (ws.state_dir / "intent.json").exists():
        try:
            with WriterLock(ws, f"{command} (recovering)"):
                notice = recover(ws)
        except LockHeld:
            # Not interrupted: still running.  A reader sees the state before it; a
            # writer will fail on the lock itself.
            notice = "another ledger command is changing this workspace right now"
        if notice:
            session.notices.append(notice)
    return session


# -- init / targets --------------------------------------------------------------------


def init_workspace(directory: Path, engine_repo: str | None = None, dry_run: bool = False) -> Path:
    """Create a workspace in ``directory`` (a new git repo with ledger.yaml)."""
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
        repo_setting = _relative_if_inside(repo_path, root)
    if dry_run:
        return root
    root.mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        wsgit.init(root)
    config = Config(engine_repo=repo_setting, bench_command=DEFAULT_BENCH_COMMAND)
    (root / CONFIG_NAME).write_text(dump_config(config), encoding="utf-8")
    (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    (root / ENTRIES_NAME).write_bytes(entries_bytes([]))
    wsgit.commit(root, [CONFIG_NAME, ".gitignore", ENTRIES_NAME], "init: new ledger workspace\n")
    return root


def _relative_if_inside(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _write_config(s: Session, message: str) -> str:
    text = dump_config(s.ws.config, s.ws.config_path.read_text(encoding="utf-8"))
    txn = Transaction(s.ws, s.command, s.now)
    return txn.execute(message=message, ledger_writes={CONFIG_NAME: text.encode()}).commit


def add_target(
    s: Session, name: str, path: str, fmt: str, container: str | None, cwd: Path, dry_run: bool
) -> Target:
    """Put a file under management (it must exist, parse, and not be a symlink)."""
    check_target_name(name)
    if name in s.ws.config.targets:
        raise Refused(f"a target named {name!r} exists already ({s.ws.config.targets[name].path})")
    abs_path = Path(path) if Path(path).is_absolute() else (cwd / path)
    abs_path = Path(os.path.normpath(abs_path))
    check_target_file(abs_path)
    target = Target(name, _relative_if_inside(abs_path, s.ws.root), fmt, container)
    read_target(s.ws, target)  # parses, so a bad file or a missing container fails now
    if dry_run:
        return target
    with WriterLock(s.ws, s.command):
        s.ws.config.targets[name] = target
        _write_config(s, f"target add {name}: {target.path} ({fmt})\n")
    return target


# -- record ----------------------------------------------------------------------------


def validate_knob(knob: str, value: str | None, no_validate: bool) -> list[str]:
    """Check a knob assignment against the catalogs; return warnings, raise on errors."""
    try:
        check_knob_name(knob)
        if value is not None:
            check_knob_value(value)
    except KnobError as e:
        raise InvalidValue(str(e)) from None
    if no_validate:
        return []
    from envknobs.catalog import check_assignment
    from envknobs.catalog import default_registry

    try:
        return check_assignment(default_registry(), knob, value)
    except KnobError as e:
        raise InvalidValue(f"{e} (pass --no-validate to record it anyway)") from None


def new_entry(s: Session, *, kind: str, cls: str, title: str, why: str, adopt: bool, **fields) -> Entry:
    entries = s.ws.entries()
    if not title or not title.strip():
        raise InvalidValue("--title must not be empty")
    action = Action(at=s.now, action="adopt" if adopt else "record", why=why, command=s.command)
    return Entry(
        id=new_entry_id(e.id for e in entries),
        seq=planner.next_seq(entries),
        kind=kind,
        cls=check_class(cls),
        title=title.strip(),
        slug=planner.unique_slug(entries, slugify(title)),
        recorded=s.now,
        why=why,
        history=(action,),
        **fields,
    )


@dataclass
class Recorded:
    entry: Entry
    applied: Applied
    warnings: list[str]


def record_knob(
    s: Session,
    *,
    target: str,
    knob: str,
    value: str | None,
    cls: str,
    title: str,
    why: str = "",
    adopt: bool = False,
    before: str | None = None,
    before_given: bool = False,
    no_validate: bool = False,
    force: bool = False,
    dry_run: bool = False,
) -> Recorded:
    """Change a knob in a target and record it; or, with ``adopt``, record a change made by hand."""
    check_class(cls)
    t = s.ws.target(target)
    warnings = validate_knob(knob, value, no_validate)
    if before is not None:
        validate_knob(knob, before, True)
    if before_given and not adopt:
        raise UsageError("--before/--before-unset only go with --adopt")
    if adopt and not before_given:
        raise UsageError("--adopt needs --before VALUE or --before-unset")
    with _maybe_lock(s, dry_run):
        entries = s.ws.entries()
        tf = read_target(s.ws, t)
        layer = planner.knob_layers(entries).get((target, knob))
        if adopt:
            entry_before = _adopted_before(tf, layer, knob, value, before)
        else:
            entry_before = _before_now(tf, layer, knob, force)
        if entry_before == value:
            raise Refused(f"{knob} in {target} is already {_show(value)}: nothing to record")
        # Where the knob's line sits while present, so a later revert/restore can put it back.
        holding = tf.text if value is None else edit_target(tf, {knob: value}).decode(
            "utf-8", "surrogateescape")
        entry = new_entry(s, kind="knob", cls=cls, title=title, why=why, adopt=adopt,
                          target=target, knob=knob, before=entry_before, after=value,
                          anchor=anchor_in(tf, holding, knob,
                                           layer_anchors(entries).get(target)))
        edits = {} if adopt else {(target, knob): (entry_before, value)}
        plan = planner.Plan("record", (), (), edits)
        message = f"record {cls} {knob}={_show(value)} in {target}: {entry.title}\n\n" \
                  f"- {entry.id} [{cls}] {entry.title}\n"
        applied = apply_plan(
            s.ws, plan, command=s.command, now=s.now, message=message, force=force,
            dry_run=dry_run,
            new_entries=[entry],
        )
        applied.changed = [entry]
        return Recorded(entry, applied, warnings)


def _adopted_before(tf, layer, knob: str, value: str | None, before: str | None) -> str | None:
    """The ``before`` of an adopted hand edit, checked against the file and the ledger."""
    live = tf.values.get(knob)
    if live != value:
        raise Refused(
            f"{tf.path}: {knob} is {_show(live)} in the file, not {_show(value)}: "
            "--adopt records a change already made; make it first (or drop --adopt)"
        )
    if layer and planner.layer_value(layer) != before:
        raise Refused(
            f"{knob} in {tf.target.name}: the ledger expects {_show(planner.layer_value(layer))} "
            f"before this change, not {_show(before)}"
        )
    return before


def _before_now(tf, layer, knob: str, force: bool) -> str | None:
    """The value in effect before a new change: the ledger's, which the file must agree
    with (drift is refused unless ``force``, which takes the file's)."""
    live = tf.values.get(knob)
    expected = planner.layer_value(layer) if layer else live
    if live != expected:
        if not force:
            raise DriftError([Drift(str(tf.path), knob, expected, live)])
        return live
    return expected


def _maybe_lock(s: Session, dry_run: bool):
    """The writer lock, except for a dry run (which writes nothing)."""
    return nullcontext() if dry_run else WriterLock(s.ws, s.command)


def _show(v: str | None) -> str:
    return "unset" if v is None else repr(v)


# -- revert / restore / suspect / clear --------------------------------------------------


def _resolve_all(s: Session, refs: Sequence[str]) -> list[Entry]:
    return [s.ws.resolve(r) for r in refs]


def revert(
    s: Session,
    *,
    refs: Sequence[str] = (),
    perf_only: bool = False,
    cls: str | None = None,
    why: str = "",
    force: bool = False,
    dry_run: bool = False,
) -> Applied:
    """Revert entries by id, or every applied entry of a class (--perf-only = --class perf)."""
    cls = _class_selector(refs, perf_only, cls)
    with _maybe_lock(s, dry_run):
        entries = s.ws.entries()
        chosen = _resolve_all(s, refs) if refs else planner.select(entries, cls=cls, state="applied")
        plan = planner.plan_revert(entries, chosen, why=why, at=s.now, command=s.command)
        return _apply(s, plan, why, force, dry_run)


def restore(
    s: Session,
    *,
    refs: Sequence[str] = (),
    perf_only: bool = False,
    cls: str | None = None,
    include_suspects: bool = False,
    force: bool = False,
    require_evidence: bool = False,
    why: str = "",
    dry_run: bool = False,
) -> Applied:
    """Re-apply reverted entries, holding back suspects and regressions (DESIGN §2)."""
    cls = _class_selector(refs, perf_only, cls)
    with _maybe_lock(s, dry_run):
        entries = s.ws.entries()
        chosen = _resolve_all(s, refs) if refs else planner.select(entries, cls=cls, state="reverted")
        from ledger.evidence.view import verdicts_for

        plan = planner.plan_restore(
            entries, chosen, why=why, at=s.now, command=s.command, explicit=bool(refs),
            include_suspects=include_suspects, force=force, require_evidence=require_evidence,
            verdicts=verdicts_for(s.ws, chosen),
        )
        return _apply(s, plan, why, force, dry_run)


def suspect(s: Session, ref: str, why: str, force: bool = False, dry_run: bool = False) -> Applied:
    """Revert an entry and mark it suspected, with the hypothesis written down."""
    if not why.strip():
        raise UsageError("suspect needs --why: write the hypothesis down")
    with _maybe_lock(s, dry_run):
        entries = s.ws.entries()
        plan = planner.plan_revert(entries, [s.ws.resolve(ref)], why=why, at=s.now,
                                   command=s.command, suspect=True)
        return _apply(s, plan, why, force, dry_run)


def clear(s: Session, ref: str, why: str, dry_run: bool = False) -> Applied:
    """Exonerate a suspect (does not re-apply it: `restore` does)."""
    if not why.strip():
        raise UsageError("clear needs --why: say what exonerated it")
    with _maybe_lock(s, dry_run):
        plan = planner.plan_clear(s.ws.resolve(ref), why=why, at=s.now, command=s.command)
        return _apply(s, plan, why, False, dry_run)


def _class_selector(refs: Sequence[str], perf_only: bool, cls: str | None) -> str | None:
    chosen = [x for x in (bool(refs), perf_only, cls is not None) if x]
    if len(chosen) != 1:
        raise UsageError("give entry ids, or --perf-only, or --class CLASS (exactly one)")
    if perf_only:
        return "perf"
    return check_class(cls) if cls is not None else None


def _apply(s: Session, plan: planner.Plan, why: str, force: bool, dry_run: bool) -> Applied:
    from ledger.patches.entries import engine_step_for

    message = commit_message(plan.op, why, [new for _, new in plan.changes])
    return apply_plan(
        s.ws, plan, command=s.command, now=s.now, message=message, force=force,
        dry_run=dry_run, engine=lambda entries, p: engine_step_for(s.ws, entries, p),
    )


__all__ = [
    "Recorded",
    "Session",
    "add_target",
    "clear",
    "init_workspace",
    "open_session",
    "record_knob",
    "restore",
    "revert",
    "suspect",
]
