"""The apply path shared by every mutating command.

A command builds a :class:`~ledger.core.planner.Plan` (pure), then :func:`apply_plan` turns it
into writes: it reads the target files the plan touches, refuses drift (unless
``force``), computes each file's new bytes, prepares the engine repo's patch-stack step,
and runs everything through one :class:`~ledger.store.txn.Transaction`.  With ``dry_run`` it
stops before writing and returns what it would have done.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import Callable
from typing import Mapping
from typing import Sequence

from ledger.core import layers
from ledger.core import planner
from ledger.core.model import Entry
from ledger.core.identifiers import place_knob
from ledger.errors import KEEPS
from ledger.errors import DriftError
from ledger.errors import PatchError
from ledger.errors import TargetError
from ledger.store.entries_file import entries_bytes
from ledger.store.targets import TargetFile
from ledger.store.targets import edit_target
from ledger.store.targets import read_target
from ledger.store.targets import parse_target
from ledger.store.targets import remember_target
from ledger.store.workspace import ENTRIES_NAME
from ledger.store.workspace import Workspace
from ledger.values import value_text


@dataclass
class Applied:
    """What a mutating command did (or, with dry_run, would do)."""

    op: str
    changed: list[Entry] = field(default_factory=list)
    skipped: list[planner.Skip] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> unified diff
    patch_diff: str = ""
    backup_id: str | None = None
    commit: str | None = None
    dry_run: bool = False
    notices: list[str] = field(default_factory=list)
    # entry id -> evidence headline, for the entries a restore brought back or held back
    evidence: dict[str, str] = field(default_factory=dict)
    # what the command did to the running services: a ledger.commands.live.LiveOutcome,
    # set by the commands that take ``restart`` (None for the others)
    live: object = None


def unified(path: str, old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    old_name, new_name = (path, path) if path.startswith("/") else (f"a/{path}", f"b/{path}")
    text = "".join(difflib.unified_diff(a, b, fromfile=old_name, tofile=new_name))
    return text if text.endswith("\n") or not text else text + "\n"


def read_targets(ws: Workspace, names: Sequence[str]) -> dict[str, TargetFile]:
    return {name: read_target(ws, ws.target(name)) for name in sorted(set(names))}


def drift_in(ws: Workspace, entries: Sequence[Entry], files: dict[str, TargetFile]):
    """Drift in the given target files, against the ledger's current expectation."""
    if not files:
        return []
    live = {}
    for key in layers.knob_layers(entries):
        target, knob = key
        # A knob with no single value (conditional, repeated) is not drift: its edit
        # refuses and names its places, and `ledger status` shows it.
        if target in files and files[target].ambiguity(knob) is None:
            live[key] = files[target].live(knob)
    paths = {name: str(tf.path) for name, tf in files.items()}
    return layers.find_drift(entries, live, paths)


def layer_anchors(entries: Sequence[Entry]) -> dict[str, dict[str, dict | None]]:
    """target -> every knob the ledger manages there -> its anchor (None if unknown).

    A layer's anchor is its first entry's that has one (see :mod:`ledger.core.layout`).
    """
    out: dict[str, dict[str, dict | None]] = {}
    for (target, knob), layer in layers.knob_layers(entries).items():
        anchor = next((e.anchor for e in layer if e.anchor is not None), None)
        out.setdefault(target, {})[knob] = anchor
    return out


def layer_places(entries: Sequence[Entry]) -> dict[str, dict[str, dict]]:
    """target -> ``knob@place`` -> that place as its first entry recorded it (old value,
    exact text, anchor): what a revert of the whole layer writes back."""
    out: dict[str, dict[str, dict]] = {}
    for e in sorted((e for e in entries if e.kind == "knob" and e.places), key=lambda e: e.seq):
        for key, place in (e.places or {}).items():
            out.setdefault(e.target, {}).setdefault(place_knob(e.knob, key), place)  # type: ignore[arg-type]
    return out


def new_target_bytes(
    files: dict[str, TargetFile],
    edits: dict[layers.KnobKey, tuple[str | None, str | None]],
    entries: Sequence[Entry] = (),
    sources: Mapping[layers.KnobKey, str | None] | None = None,
    lines: Mapping[layers.KnobKey, str | None] | None = None,
    edited: Mapping[str, bytes] | None = None,
) -> dict[Path, tuple[bytes, bytes]]:
    """(old, new) bytes per target path for the planned knob values.

    Knobs are edited in the record order of their layers, so re-added knobs go back in
    a deterministic order whatever the order of the commands that removed them.
    ``sources`` / ``lines``: the exact text of each new value, and the exact lines of a
    knob that comes back (see :func:`layers.knob_sources`, :func:`layers.knob_lines`).
    ``edited``: target -> its new bytes where the command already made the edit (``record``
    edits once, then applies that edit).
    """
    order = {key: layer[0].seq for key, layer in layers.knob_layers(entries).items()}
    by_target: dict[str, dict[str, str | None]] = {}
    for key, (_, new_value) in sorted(edits.items(), key=lambda kv: (order.get(kv[0], 0), kv[0])):
        by_target.setdefault(key[0], {})[key[1]] = new_value
    anchors = layer_anchors(entries)
    places = layer_places(entries)
    out = {}
    for target, knob_values in sorted(by_target.items()):
        tf = files[target]
        old = tf.raw
        if tf.path in out:  # another target of this file was edited first: edit its result
            old = out[tf.path][0]
            tf = parse_target(tf.target, tf.path, out[tf.path][1])
        texts = {k: (sources or {}).get((target, k)) for k in knob_values}
        blocks = {k: (lines or {}).get((target, k)) for k in knob_values}
        if edited and target in edited and tf.raw is files[target].raw:
            new = edited[target]
        else:
            new = edit_target(tf, knob_values, anchors.get(target), places.get(target), texts,
                              blocks)
        if new != tf.raw:
            out[tf.path] = (old, new)
            # Kept for the next command while the edit's verification is at hand (keyed
            # by content: a command that then fails leaves only an unused cache file).
            remember_target(tf.target, tf.path, new)
    return out


EngineStep = Callable[[], None]


@dataclass
class EnginePlan:
    """The engine repo part of a command, prepared by ``ledger.store.patch_entries``."""

    repo: Path
    head: str
    step: EngineStep
    diff: str = ""
    files: tuple[Path, ...] = ()  # engine files the step may change: backed up first


def apply_plan(
    ws: Workspace,
    plan: planner.Plan,
    *,
    command: str,
    now: str,
    message: str,
    force: bool = False,
    dry_run: bool = False,
    extra_ledger_writes: dict[str, bytes | None] | None = None,
    engine: Callable[[Sequence[Entry], planner.Plan], EnginePlan | None] | None = None,
    files: dict[str, TargetFile] | None = None,
    drifts: Sequence | None = None,
    edited: Mapping[str, bytes] | None = None,
) -> Applied:
    """Carry out ``plan``: all of it or none of it.

    The plan's ``added`` entries are what the command records (last in the result's
    ``changed``); ``extra_ledger_writes``, other workspace files it writes (a patch).
    ``files``/``drifts``: the targets the caller read under the lock and the drift it
    found in them, so that each file is read and checked once; ``edited``: the new bytes
    of targets the caller already edited (see :func:`new_target_bytes`).
    """
    entries = ws.entries()
    result = Applied(op=plan.op, changed=[*(new for _, new in plan.changes), *plan.added],
                     skipped=list(plan.skipped), dry_run=dry_run)
    files, found = _checked_targets(ws, entries, plan, files, drifts)
    if found:
        plan, message = _past_drift(plan, found, force, message)
        result.changed = [*(new for _, new in plan.changes), *plan.added]
    after = plan.new_entries(entries)
    writes = new_target_bytes(files, plan.knob_edits, entries, layers.knob_sources(after),
                              layers.knob_lines(after), edited)
    result.files = {str(path): unified(str(path), old, new) for path, (old, new) in writes.items()}
    engine_plan = _engine_plan(engine, entries, plan)
    if engine_plan is not None:
        result.patch_diff = engine_plan.diff
    if dry_run or plan.empty:
        return result
    _refuse_undecodable(ws, [new for _, new in plan.changes] + list(plan.added))
    ledger_writes = {ENTRIES_NAME: entries_bytes(after, ws.written_lines()),
                     **(extra_ledger_writes or {})}
    outcome = _commit(ws, command, now, message, {p: new for p, (_, new) in writes.items()},
                      ledger_writes, engine_plan)
    ws.remember_entries(ledger_writes[ENTRIES_NAME], after)  # for the next command
    result.backup_id = outcome.backup_id
    result.commit = outcome.commit
    return result


def _engine_plan(
    engine: Callable[[Sequence[Entry], planner.Plan], EnginePlan | None] | None,
    entries: Sequence[Entry], plan: planner.Plan,
) -> EnginePlan | None:
    """The engine repo's step for a plan that flips patch entries (None: no patch flips)."""
    if not plan.patch_flips:
        return None
    if engine is None:
        raise PatchError("this command changes patch entries but no engine repo is set up")
    return engine(entries, plan)


def _commit(ws: Workspace, command: str, now: str, message: str,
            target_writes: dict[Path, bytes], ledger_writes: dict[str, bytes | None],
            engine_plan: EnginePlan | None):
    """One transaction: backups, the writes, the engine step, the workspace commit."""
    from ledger.store.txn import Transaction  # the write machinery, for a write only

    txn = Transaction(ws, command, now)
    try:
        return txn.execute(
            message=message,
            target_writes=target_writes,
            ledger_writes=ledger_writes,
            engine_step=engine_plan.step if engine_plan else None,
            engine_repo=engine_plan.repo if engine_plan else None,
            engine_head=engine_plan.head if engine_plan else None,
            backup_also=engine_plan.files if engine_plan else (),
        )
    finally:
        ws.invalidate()


def _checked_targets(
    ws: Workspace, entries: Sequence[Entry], plan: planner.Plan,
    files: dict[str, TargetFile] | None, drifts: Sequence | None,
) -> tuple[dict[str, TargetFile], list]:
    """The target files ``plan`` touches, each read once (the caller's where it gave them),
    and their drift, checked once (the caller's ``drifts`` for those it read)."""
    touched = {target for target, _ in plan.knob_edits}
    have = {name: tf for name, tf in (files or {}).items() if name in touched}
    read = read_targets(ws, sorted(touched - set(have)))
    # the caller's drifts are of the files it gave: they count where the plan touches those
    found = list(drifts) if drifts is not None and have else drift_in(ws, entries, have)
    found += drift_in(ws, entries, read)
    return {**have, **read}, found


def _past_drift(plan: planner.Plan, found: Sequence, force: bool,
                message: str) -> tuple[planner.Plan, str]:
    """Drift refused, each with what ``--force`` would do there; or, forced, noted."""
    drifts = [d.planned(plan.op, plan.knob_edits[(d.target, d.knob)][1]
                        if (d.target, d.knob) in plan.knob_edits else KEEPS) for d in found]
    if not force:
        raise DriftError(drifts)
    return forced_over(plan, drifts, message)


def forced_over(plan: planner.Plan, drifts: Sequence, message: str) -> tuple[planner.Plan, str]:
    """``--force`` past drift: say in the commit, and in the history of each changed entry
    on that knob, what the file held (an overwritten hand edit, or a value it already had).

    Drift the command leaves as found (another knob of the file) is named in the commit
    only: no entry of this command touches it.
    """
    notes = {}
    for d in drifts:
        if d.outcome == "overwrites":
            text = (f"--force overwrote a hand edit: {d.knob} was {value_text(d.found, quote=True)}"
                    f" in {d.path} (the ledger expected {value_text(d.expected, quote=True)})")
        elif d.outcome == "marks":
            text = (f"--force: {d.path} already held {d.knob}={value_text(d.found, quote=True)} "
                    f"(the ledger expected {value_text(d.expected, quote=True)})")
        else:
            text = f"--force: left as found: {d.describe()}"
        notes[(d.target, d.knob)] = text
    def noted(old: Entry, new: Entry) -> Entry:
        mine = [notes[k] for k in layers.entry_keys(old) if k in notes] \
            if old.kind != "patch" else []
        if mine and new.history:
            last = new.history[-1]
            why = "; ".join(([last.why] if last.why else []) + mine)
            new = replace(new, history=new.history[:-1] + (replace(last, why=why),))
        return new

    changes = tuple((old, noted(old, new)) for old, new in plan.changes)
    added = tuple(noted(e, e) for e in plan.added)  # a record --force past drift
    body = "".join(f"{n}\n" for n in notes.values())
    return replace(plan, changes=changes, added=added), message.rstrip("\n") + "\n\n" + body


def _refuse_undecodable(ws: Workspace, entries: Sequence[Entry]) -> None:
    """A knob value read from a file that is not valid UTF-8 cannot be recorded as text."""
    for e in entries:
        for what, v in (("knob name", e.knob), ("value", e.before), ("value", e.after)):
            try:
                (v or "").encode("utf-8")
            except UnicodeEncodeError:
                path = ws.target_path(ws.target(e.target)) if e.target else ws.root
                shown = v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                raise TargetError(str(path), f"the {what} of {e.knob!r:.80} is not valid UTF-8 "
                                  f"({shown!r:.80}): fix the file first") from None


def commit_message(op: str, why: str, changed: Sequence[Entry]) -> str:
    """``revert 2 entries: harness hangs`` plus one line per entry."""
    n = len(changed)
    head = f"{op} {n} entr{'y' if n == 1 else 'ies'}"
    if why:
        head += f": {why.splitlines()[0][:120]}"
    body = "\n".join(f"- {e.id} [{e.cls}] {e.title}" for e in changed)
    return f"{head}\n\n{body}\n" if body else head + "\n"


__all__ = ["Applied", "EnginePlan", "apply_plan", "commit_message", "unified"]
