"""This machine's files for a merged ledger: target bytes and the engine's patch stack.

A pull moves the local ledger (``ours``) to the merged one.  Target files are brought
there in two steps, as a rebase would: first to the remote's ledger (``theirs``: the
local-only changes are undone and the remote's made), then to the merged ledger (the
local-only entries replayed on top).  Every clone that later fast-forwards to the pushed
result computes its files from the remote's state the same way, so the clones end
byte-identical even where knobs are added or removed (their lines go in by anchors, see
:mod:`ledger.core.layout`, and the order of additions matters).

A (target, knob) layer that one ledger does not have yet holds its base there: the
``before`` of the layer's first entry (from the side that has it; a conflict guarantees
only one side adds entries to a layer).

A target file inside the workspace (a GitOps manifest) is in git too: the pull writes it
from the merged ledger like any target (:func:`take_computed`), and git's line merge of
it is used only where the ledger changes nothing in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from typing import Sequence

from ledger.core import layers
from ledger.core.model import Entry
from ledger.errors import DriftError
from ledger.errors import LedgerError
from ledger.errors import MergeConflict
from ledger.store.apply import drift_in
from ledger.store.apply import new_target_bytes
from ledger.store.apply import read_targets
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import parse_config_text
from ledger.store.recovery import inside_workspace
from ledger.store.roots import split_rooted
from ledger.store.targets import TargetFile
from ledger.store.targets import parse_target
from ledger.store.workspace import Workspace

Expected = dict[layers.KnobKey, tuple[str | None, str | None, str | None]]


def expected_in(ledger: Sequence[Entry], universe: Sequence[Entry]) -> Expected:
    """(value, exact text, exact lines) per layer of ``universe`` as ``ledger`` has it."""
    mine = layers.knob_layers(ledger)
    out: Expected = {}
    for key, layer in layers.knob_layers(universe).items():
        own = mine.get(key)
        if own:
            out[key] = (layers.layer_value(own), layers.layer_source(own),
                        layers.layer_lines(own))
        else:
            first = layer[0]
            out[key] = (first.before, first.before_source, first.before_lines)
    return out


def _step(files: dict[str, TargetFile], universe: Sequence[Entry], frm: Expected,
          to: Expected) -> dict[str, TargetFile]:
    edits = {k: (frm[k][0], to[k][0]) for k in to if frm[k][0] != to[k][0]}
    if not edits:
        return files
    sources = {k: v[1] for k, v in to.items()}
    lines = {k: v[2] for k, v in to.items()}
    writes = new_target_bytes(files, edits, universe, sources, lines)
    out = dict(files)
    for name, tf in files.items():
        if tf.path in writes:
            out[name] = parse_target(tf.target, tf.path, writes[tf.path][1])
    return out


def target_writes(
    ws: Workspace,
    ours: Sequence[Entry],
    theirs: Sequence[Entry],
    merged: Sequence[Entry],
    universe: Sequence[Entry],
    *,
    force: bool = False,
) -> dict[Path, tuple[bytes, bytes]]:
    """(old, new) bytes per target file this machine must change for the merge.

    ``ws`` carries the merged ``ledger.yaml`` (targets the remote added are resolved with
    it); only targets with a knob whose value changes are read.  Drift against the local
    ledger is refused (unless ``force``), as every mutating command refuses it.
    """
    e_ours = expected_in(ours, universe)
    e_theirs = expected_in(theirs, universe)
    e_merged = expected_in(merged, universe)
    touched = sorted({k[0] for k in e_ours
                      if e_ours[k][0] != e_theirs[k][0] or e_theirs[k][0] != e_merged[k][0]})
    files = read_targets(ws, touched)
    drifts = drift_in(ws, ours, files)
    if drifts and not force:
        raise DriftError(drifts)
    step1 = _step(files, universe, e_ours, e_theirs)
    step2 = _step(step1, universe, e_theirs, e_merged)
    return {tf.path: (files[name].raw, step2[name].raw)
            for name, tf in step2.items() if step2[name].raw != files[name].raw}


@dataclass
class EngineSync:
    """The engine part of a pull: the prepared stack change."""

    repo: Path
    head: str
    step: object
    diff: str
    files: tuple[Path, ...]


def engine_sync(
    ws: Workspace,
    ours: Sequence[Entry],
    merged: Sequence[Entry],
    replayed_or_dropped: Sequence[str],
    texts: Mapping[str, str],
    message: str,
) -> EngineSync | None:
    """Plan the engine tree for the merged ledger, or None when it does not change.

    The stack is the merged record order, with the local-only patch entries (replayed
    or dropped) on top in their local order — that is where they are in the engine repo
    now, so :meth:`~ledger.patches.stack.EngineRepo.plan_stack` un-applies them and
    re-applies what stays, above the remote's patches.
    """
    from ledger.patches.stack import StackItem
    from ledger.store.patch_entries import engine_repo

    now = {e.id: e for e in ours}
    after = {e.id: e for e in merged}
    local = set(replayed_or_dropped)
    order = [e for e in merged if e.kind == "patch" and e.id not in local]
    order += sorted((now[i] for i in local if i in now and now[i].kind == "patch"),
                    key=lambda e: e.seq)
    items = [StackItem(e.id, e.title, texts[e.id],
                       applied_now=now[e.id].applied if e.id in now else False,
                       applied_after=after[e.id].applied if e.id in after else False,
                       cls=e.cls) for e in order]
    if not any(i.action for i in items):
        return None
    repo = engine_repo(ws)
    repo.require_clean()
    stack = repo.plan_stack(items)
    if stack.is_noop:
        return None

    def step() -> None:
        repo.apply_plan(stack, message=message[:200])

    touched = sorted({f for e in order for f in e.files})
    return EngineSync(Path(repo.path), stack.head, step, repo.plan_diff(stack),
                      tuple(Path(repo.path) / f for f in touched))


def inside_targets(ws: Workspace, theirs: str) -> set[str]:
    """Workspace-relative paths of the targets inside the workspace, here and on the
    remote: files the ledger writes, which git also carries (GitOps manifests)."""
    configs = [ws.config]
    from ledger.store import gitsync

    raw = gitsync.blob(ws.root, theirs, CONFIG_NAME)
    if raw is not None:
        try:
            configs.append(parse_config_text(raw.decode("utf-8"), CONFIG_NAME))
        except LedgerError:
            pass
    return {Path(t.path).as_posix() for c in configs for t in c.targets.values()
            if not Path(t.path).is_absolute() and split_rooted(t.path) is None}


def take_computed(ws: Workspace, targets, writes: dict[str, bytes | None],
                   deferred: Sequence[str], notices: list[str]) -> None:
    """A target file inside the workspace is written from the merged ledger (its knobs
    replayed on this machine's file, as for every target), not from git's line merge of
    it; git's version stays only where the ledger changes nothing in the file.  A file
    both sides changed that git cannot merge and the ledger does not write is a conflict."""
    computed = {}
    for path, (_, new) in targets.items():
        for rel in inside_workspace(ws, [path]):
            computed[rel] = new
    for rel, new in computed.items():
        if rel in writes:
            if writes[rel] is not None and writes[rel] != new:
                notices.append(f"{rel}: written from the merged ledger; git's line merge of it "
                               "differed (an edit outside the ledger's knobs on one side?): "
                               "check it with `git diff HEAD^1 -- " + rel + "`")
            del writes[rel]
    left = [rel for rel in deferred if rel not in computed]
    if left:
        raise MergeConflict([(f"{rel} as the remote has it", f"{rel} as this workspace has it",
                              f"file {rel}") for rel in left],
                            "edit the file so both changes are in it, commit it, and pull again")
