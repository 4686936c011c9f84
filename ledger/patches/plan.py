"""The patch stack as data: its items, a computed plan, and the errors of building one.

:mod:`ledger.patches.stack` computes and applies plans on the engine repo; this module
holds what those plans are made of, plus the small checks a commit made there needs
(titles, entry ids, trailers), so neither half grows past what one reads at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.identifiers import check_entry_id
from ledger.errors import InvalidValue
from ledger.errors import PatchError
from ledger.patches.text import CONTROL_RE
from ledger.patches.text import parse_patch_files

@dataclass(frozen=True)
class StackItem:
    """One patch entry as the stack sees it, in record order."""

    entry_id: str
    title: str
    text: str
    applied_now: bool
    applied_after: bool
    cls: str = ""

    @property
    def action(self) -> str | None:
        """'revert', 'restore' or None when the entry's state does not change."""
        if self.applied_now == self.applied_after:
            return None
        return "restore" if self.applied_after else "revert"

    def describe(self) -> str:
        return f"{self.entry_id} ({self.title!r})"


@dataclass(frozen=True)
class StackPlan:
    """A computed change of the engine tree; nothing in the repo has changed yet."""

    head: str  # the commit the plan starts from; apply_plan refuses if HEAD moved
    old_tree: str
    new_tree: str
    changes: tuple[StackItem, ...]  # the entries whose state changes, in record order

    @property
    def is_noop(self) -> bool:
        return self.old_tree == self.new_tree and not self.changes


class StackDrift(PatchError):
    """An entry recorded as applied is not in the engine tree at its place in the stack."""

    def __init__(self, item: StackItem, detail: str) -> None:
        super().__init__()
        self.item, self.detail = item, detail

    def __str__(self) -> str:
        return (
            f"patch entry {self.item.describe()} is recorded as applied but its changes are "
            "not in the engine tree at its place in the stack (was the engine repo changed "
            f"by hand? `ledger status` shows which patches are live); nothing was changed\n"
            f"  git: {self.detail.splitlines()[0] if self.detail else ''}"
        )


class StackConflict(PatchError):
    """The desired stack cannot be built: ``failed`` does not apply there.

    ``in_the_way`` are the entries that block the change: the failing entry itself when
    it is one that stays applied (a later bugfix on the lines of a reverted perf patch),
    else the applied entries below it that touch the same files.  ``overlapping`` are
    all entries involved that touch the same files as ``failed``.
    """

    def __init__(
        self,
        failed: StackItem,
        changes: Sequence[StackItem],
        in_the_way: Sequence[StackItem],
        overlapping: Sequence[StackItem],
        detail: str,
    ) -> None:
        super().__init__()
        self.failed = failed
        self.changes = list(changes)
        self.in_the_way = list(in_the_way)
        self.overlapping = list(overlapping)
        self.detail = detail

    def __str__(self) -> str:
        def names(items: Sequence[StackItem]) -> str:
            return ", ".join(i.describe() for i in items) or "none found"

        what = ", ".join(f"{c.action} {c.describe()}" for c in self.changes)
        if self.failed.action is None:
            why = (
                f"applied entry {self.failed.describe()} would no longer apply on top "
                f"(it touches the same files as {names(self.overlapping)})"
            )
            hint = "revert it in the same command, or leave the stack as it is"
        else:
            kept = [i for i in self.overlapping if i.applied_after]
            gone = [i for i in self.overlapping if not i.applied_after]
            why = f"{self.failed.describe()} does not apply at its place in the stack"
            if gone:
                why += f" (it touches the same files as {names(gone)}, which stays reverted)"
            hint = "change them in the same command, or leave the stack as it is"
            if not kept and gone:
                hint = f"restore {names(gone)} in the same command, or leave the stack as it is"
        first = self.detail.splitlines()[0] if self.detail else ""
        way = f"; entries in the way: {names(self.in_the_way)}" if self.in_the_way else ""
        return f"cannot {what}: {why}{way}. Nothing was changed; {hint}\n  git: {first}"


def overlapping(item: StackItem, others: Sequence[StackItem]) -> list[StackItem]:
    mine = set(parse_patch_files(item.text))
    return [o for o in others if o is not item and mine & set(parse_patch_files(o.text))]


def parents(paths: Sequence[str]) -> list[str]:
    """Every proper parent directory of ``paths`` ("a/b/c" -> "a", "a/b")."""
    return sorted({p.rsplit("/", k)[0] for p in paths for k in range(1, p.count("/") + 1)})


def numstat_paths(raw: str) -> set[str]:
    """Paths in ``git apply --numstat -z`` output: "A\\tD\\tpath\\0", or for a rename or
    copy "A\\tD\\t\\0old\\0new\\0"."""
    paths: set[str] = set()
    for rec in raw.split("\0"):
        name = rec.split("\t", 2)[2] if rec.count("\t") >= 2 else rec
        if name:
            paths.add(name)
    return paths


def check_title(title: str) -> str:
    if not title.strip() or CONTROL_RE.search(title) or len(title) > 200:
        raise PatchError(f"invalid patch title {title!r}: one line of 1-200 printable characters")
    return title


def check_patch_entry_id(entry_id: str) -> str:
    """The entry id rule of :func:`ledger.core.identifiers.check_entry_id`, as a PatchError."""
    try:
        return check_entry_id(entry_id)
    except InvalidValue as e:
        raise PatchError(str(e)) from None


def commit_message(message: str, trailers: Sequence[tuple[str, str]]) -> str:
    """``message`` made safe to carry, then one trailer block the ledger alone writes."""
    body = message.replace("\r", "").strip() or "knob ledger change"
    # A user's text must not forge the ledger's trailers: indent look-alikes.
    body = re.sub(r"(?mi)^(ledger-[a-z-]*:)", r" \1", body)
    body = CONTROL_RE.sub(lambda m: m.group(0) if m.group(0) in "\n\t" else "?", body)
    return body + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers)
