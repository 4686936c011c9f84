"""Patch entries in the workspace, over the engine repo's patch stack.

The mechanism lives in :mod:`ledger.patches.stack` (one commit per applied patch with a
``Ledger-Entry`` trailer; reverts and restores computed in a private index and committed
as one commit per command, so ``git log`` in the engine repo tells the same story as the
ledger).  This module connects it to the workspace: it reads each entry's stored patch
(``patches/<id>.patch``) and checks its sha256, turns a plan's flips into stack items,
and hands :mod:`ledger.store.apply` an engine step that the transaction runs — and undoes, by
resetting the engine repo to its HEAD before, if anything else in the command fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping
from typing import Sequence

from ledger.core import planner
from ledger.core.model import Entry
from ledger.errors import PatchError
from ledger.store.apply import EnginePlan
from ledger.store.workspace import Workspace

PATCH_DIR = "patches"


def engine_repo(ws: Workspace):
    """The workspace's engine repo, or a clear error when there is none."""
    from ledger.patches.stack import EngineRepo

    path = ws.engine_repo_path
    if path is None:
        raise PatchError(
            "this workspace has no engine repo: set engine_repo in ledger.yaml "
            "(or `ledger init --engine-repo PATH`)"
        )
    return EngineRepo(path)


def patch_text(ws: Workspace, e: Entry) -> str:
    """The stored patch of entry ``e``, verified against its recorded sha256."""
    from ledger.patches.stack import verify_sha256

    path = ws.root / (e.patch or "")
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError as err:
        raise PatchError(f"entry {e.id}: cannot read its patch {path}: {err.strerror}") from err
    verify_sha256(text, e.sha256 or "", entry_id=e.id)
    return text


def stack_items(ws: Workspace, entries: Sequence[Entry], after: Mapping[str, bool]):
    """Every patch entry in record order, with its state now and after the command."""
    from ledger.patches.stack import StackItem

    return [
        StackItem(e.id, e.title, patch_text(ws, e), applied_now=e.applied,
                  applied_after=after.get(e.id, e.applied), cls=e.cls)
        for e in sorted(entries, key=lambda e: e.seq) if e.kind == "patch"
    ]


def engine_step_for(ws: Workspace, entries: Sequence[Entry], plan: planner.Plan) -> EnginePlan:
    """Plan the engine tree for ``plan`` (refusing conflicts now) and return its step."""
    repo = engine_repo(ws)
    repo.require_clean()
    items = stack_items(ws, entries, {e.id: e.applied for e in plan.patch_flips})
    stack = repo.plan_stack(items)
    subject = f"ledger {plan.op}: " + ", ".join(e.title for e in plan.patch_flips)

    def step() -> None:
        repo.apply_plan(stack, message=subject[:200])

    touched = sorted({f for e in plan.patch_flips for f in e.files})
    return EnginePlan(Path(repo.path), stack.head, step, repo.plan_diff(stack),
                      tuple(Path(repo.path) / f for f in touched))


def patch_liveness(ws: Workspace, patches: Sequence[Entry]) -> dict[str, bool]:
    """For each patch entry, whether its change is present in the engine tree now."""
    repo = engine_repo(ws)
    return repo.stack_live(stack_items(ws, patches, {}))


def full_restore_diff(ws: Workspace, entries: Sequence[Entry]) -> str:
    """The diff a restore of every patch entry would make to the engine tree."""
    repo = engine_repo(ws)
    items = stack_items(ws, entries, {e.id: True for e in entries if e.kind == "patch"})
    return repo.plan_diff(repo.plan_stack(items))
