"""The engine-repo side of patch entries: a classified stack of patches over a git repo.

The contract (docs/ARCHITECTURE.md §2, "Patch stack"): the engine tree equals *base +
applied patches in record order*.  This module knows nothing of the workspace; the core hands it the
ordered patch entries and gets back plans, commits and booleans.

Mechanism
---------
* **Recording** (:meth:`EngineRepo.commit_patch`) checks the patch (below), applies it
  in a private index (``GIT_INDEX_FILE``) on top of HEAD's tree, writes one commit with
  ``git commit-tree`` carrying the trailers ``Ledger-Entry``, ``Ledger-Class`` and
  ``Ledger-Action: record``, then moves the branch and worktree there with
  ``reset --keep``.  **Adopting** (:meth:`EngineRepo.adopt_commit`) resolves a user's
  revision as data and returns the commit's diff against its parent as the patch text.
* **Reverting / restoring** (:meth:`EngineRepo.plan_stack`): from HEAD's tree, in a
  private index, the currently applied patches are un-applied (``apply --cached -R``)
  from the top of the stack down to the lowest entry whose state changes, then the
  desired ones are re-applied in record order.  Nothing in the worktree changes while
  planning; any failing step refuses the whole change, naming the entry that failed and
  the entries that touch the same files (:class:`StackConflict`).  The plan's tree is
  then committed as one commit whose trailers name each entry and its action
  (``revert`` / ``restore``), so ``git log`` in the engine repo tells the ledger's story
  (:meth:`EngineRepo.apply_plan`).
* **All or nothing**: the core keeps :meth:`EngineRepo.head` from before the command and
  calls :meth:`EngineRepo.rollback` with it if any later step of the command fails (or
  after a crash); rollback puts the branch, index and worktree back exactly.
* **Dirty repos** are refused, naming the files: uncommitted changes to tracked files,
  staged or not, an unfinished merge/rebase/cherry-pick, and untracked or ignored files
  sitting where the change would create a file.  Other untracked files are left alone
  (and not refused: build outputs must not block a revert); nothing is ever stashed.

Safety
------
Patch text is untrusted: :mod:`ledger.patches.text` reads every header itself and refuses
unsafe paths and symlinks.  :meth:`EngineRepo.check_patch` adds
the repo's view: no path below a symlink in HEAD or in the worktree, and git's own
reading of the patch (``apply --numstat``) must name exactly the same paths, so a patch
that git and the ledger read differently is refused.  ``git apply`` then applies its own
checks on top.  Git itself runs hardened (see :mod:`ledger.git_runner`).  The stack's
items, plans and errors are in :mod:`ledger.patches.plan`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ledger.errors import GitError
from ledger.errors import PatchError
from ledger.patches.engine_git import PATCH_DIFF_OPTIONS
from ledger.patches.engine_git import Git
from ledger.patches.engine_git import check_sha
from ledger.patches.engine_git import temp_index
from ledger.patches.plan import StackConflict
from ledger.patches.plan import StackDrift
from ledger.patches.plan import StackItem
from ledger.patches.plan import StackPlan
from ledger.patches.plan import check_patch_entry_id
from ledger.patches.plan import check_title
from ledger.patches.plan import commit_message
from ledger.patches.plan import numstat_paths
from ledger.patches.plan import overlapping
from ledger.patches.plan import parents
from ledger.patches.text import CONTROL_RE
from ledger.patches.text import PatchFile
from ledger.patches.text import check_path
from ledger.patches.text import parse_patch
from ledger.patches.text import parse_patch_files
from ledger.patches.text import patch_sha256
from ledger.patches.text import verify_sha256

class EngineRepo:
    """The engine's git checkout that patch entries apply to."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path).absolute()
        if not p.is_dir():
            raise PatchError(f"engine repo {p} is not a directory")
        proc = Git(p).run("rev-parse", "--is-inside-work-tree", "--show-toplevel", check=False)
        lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
        if proc.returncode != 0 or not lines or lines[0] != "true" or len(lines) < 2:
            why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise PatchError(
                f"engine repo {p} is not a git work tree (git init it, or fix the path)"
                + (f": {why[0]}" if why else "")
            )
        self.path = Path(lines[1])
        self.git = Git(self.path)
        # Checks already passed: per patch text, and per (patch text, commit).
        self._parsed: dict[str, list[PatchFile]] = {}
        self._checked_at: set[tuple[str, str]] = set()

    # -- state --------------------------------------------------------------------------

    def head(self) -> str:
        """HEAD's commit id (PatchError when the repository has no commit yet)."""
        sha = self.git.head()
        if sha is None:
            raise PatchError(f"engine repo {self.path} has no commit yet: commit the base first")
        return sha

    def require_clean(self, *, will_create: Sequence[str] = ()) -> None:
        """Refuse (PatchError naming the files) when the ledger could lose someone's work.

        Refused: an unfinished git operation; uncommitted changes to tracked files, staged
        or not; any file (untracked or ignored) already at a path in ``will_create``.
        """
        self.head()
        busy = self.git.operation_in_progress()
        if busy:
            raise PatchError(
                f"engine repo {self.path} has an unfinished {busy}: finish or abort it"
            )
        dirty = self.git.dirty_paths()
        if dirty:
            raise PatchError(
                f"engine repo {self.path} has uncommitted changes in: {', '.join(dirty[:20])}"
                f"{' …' if len(dirty) > 20 else ''} — commit or discard them first "
                "(the ledger never stashes)"
            )
        blocking = [p for p in will_create if os.path.lexists(self.path / p)]
        if blocking:
            raise PatchError(
                f"engine repo {self.path}: untracked files are where the change creates files: "
                f"{', '.join(blocking)} — move them away first"
            )

    def check_patch(self, text: str, at: str | None = None) -> list[PatchFile]:
        """:func:`parse_patch` plus the repo's view: no path below a symlink in commit ``at``
        (default HEAD) or in the worktree, and git must read the same paths."""
        at = at or self.head()
        digest = patch_sha256(text)
        files = self._parsed.get(digest)
        if files is None:
            files = parse_patch(text)
            self._agree_with_git(text, files)
            self._parsed[digest] = files  # a pure function of the text: safe to cache
        paths = sorted({p for f in files for p in f.paths})
        if (digest, at) not in self._checked_at:
            self._refuse_below(paths, set(self.git.symlinks_in(at, parents(paths))))
            self._checked_at.add((digest, at))
        # The worktree can change at any time: look at its symlinks every time.
        self._refuse_below(paths, {d for d in parents(paths) if (self.path / d).is_symlink()})
        return files

    def _agree_with_git(self, text: str, files: Sequence[PatchFile]) -> None:
        """Refuse a patch that git reads as touching other paths than its headers say."""
        paths = {p for f in files for p in f.paths}
        proc = self.git.run("apply", "--numstat", "-z", input=text, check=False)
        if proc.returncode != 0:
            msg = proc.stderr.decode("utf-8", "replace").strip()
            raise PatchError(f"git cannot read the patch: {msg}")
        theirs = numstat_paths(proc.stdout.decode("utf-8", "surrogateescape"))
        if theirs != paths:
            raise PatchError(
                "git reads this patch as touching different files than its headers say "
                f"(git: {sorted(theirs)}, headers: {sorted(paths)}): refusing an ambiguous patch"
            )

    @staticmethod
    def _refuse_below(paths: Sequence[str], links: set[str]) -> None:
        for p in paths:
            for d in links:
                if p.startswith(d + "/"):
                    raise PatchError(f"patch writes {p} through symlink {d} in the engine repo")

    def stack_live(self, items: Sequence[StackItem]) -> dict[str, bool]:
        """For each entry (record order), whether its patch is live at its place in HEAD.

        Walks the stack from the top down in a private index, un-applying each patch that
        is present, so a patch under a later one touching the same lines is still seen.
        """
        live: dict[str, bool] = {}
        head = self.head()
        with temp_index(self.git, self.git.tree_of(head)) as idx:
            for item in reversed(items):
                self.check_patch(item.text, head)
                live[item.entry_id] = idx.apply(item.text, reverse=True) is None
        return {i.entry_id: live[i.entry_id] for i in items}

    # -- planning -----------------------------------------------------------------------

    def plan_stack(self, items: Sequence[StackItem]) -> StackPlan:
        """Compute the tree for ``items``' ``applied_after`` states without touching the
        worktree.  Raises StackConflict / StackDrift (naming entries) when it cannot."""
        ids = [check_patch_entry_id(i.entry_id) for i in items]
        if len(set(ids)) != len(ids):
            raise PatchError(f"patch entries repeat in the stack: {ids}")
        head = self.head()
        old_tree = self.git.tree_of(head)
        changed = [k for k, i in enumerate(items) if i.action]
        if not changed:
            return StackPlan(head, old_tree, old_tree, ())
        low = changed[0]
        changes = tuple(items[k] for k in changed)
        for item in items[low:]:
            if item.applied_now or item.applied_after:
                self.check_patch(item.text, head)
        with temp_index(self.git, old_tree) as idx:
            for item in reversed(items[low:]):
                if item.applied_now:
                    err = idx.apply(item.text, reverse=True)
                    if err:
                        raise StackDrift(item, err)
            for k in range(low, len(items)):
                item = items[k]
                if not item.applied_after:
                    continue
                err = idx.apply(item.text)
                if err:
                    if item.action is None:  # a kept entry broke: the changes are in its way
                        blockers = overlapping(item, changes)
                        raise StackConflict(item, changes, [item], blockers, err)
                    related = overlapping(item, items[:k])
                    blockers = [i for i in related if i.applied_after]
                    raise StackConflict(item, changes, blockers, related, err)
            new_tree = idx.write_tree()
        return StackPlan(head, old_tree, new_tree, changes)

    def plan_diff(self, plan: StackPlan) -> str:
        """The unified diff the plan would make to the engine tree ('' for none)."""
        return self.git.diff_trees(plan.old_tree, plan.new_tree)

    # -- changing the repo ----------------------------------------------------------------

    def apply_plan(self, plan: StackPlan, *, message: str) -> str:
        """Commit the plan's tree on HEAD (trailers per entry) and check it out; new HEAD.

        The repo must still be at ``plan.head`` and clean.  On failure the branch and
        worktree are put back at ``plan.head`` before the error is raised.
        """
        if plan.is_noop:
            return self.head()
        trailers: list[tuple[str, str]] = []
        for c in plan.changes:
            trailers.append(("Ledger-Entry", c.entry_id))
            if c.cls:
                trailers.append(("Ledger-Class", c.cls))
            trailers.append(("Ledger-Action", c.action or ""))
        return self._commit(plan, commit_message(message, trailers), "stack change")

    def _commit(self, plan: StackPlan, message: str, reason: str) -> str:
        head = self.head()
        if head != plan.head:
            raise PatchError(
                f"engine repo HEAD moved from {plan.head[:12]} to {head[:12]} since the change "
                "was planned: plan it again"
            )
        added = [p for st, p in self.git.changed_paths(plan.old_tree, plan.new_tree) if st == "A"]
        self.require_clean(will_create=added)
        commit = self.git.commit_tree(plan.new_tree, [head], message)
        # The marker lets rollback() after a crash mid-checkout also remove the files the
        # change had begun to create (they are untracked once HEAD is back).
        pending = self._pending_file()
        pending.write_text(f"{head} {commit}\n")
        try:
            self.git.move_to(commit, reason)
        except GitError as e:
            self.rollback(head)
            raise GitError(f"could not check out the new engine tree, left unchanged: {e}") from e
        pending.unlink()
        return commit

    def _pending_file(self) -> Path:
        return self.path / self.git.out("rev-parse", "--git-path", "knob-ledger-pending")

    def rollback(self, head_before: str) -> None:
        """Put the branch, index and worktree back exactly at ``head_before``.

        For the core's all-or-nothing path and crash recovery: it discards what a ledger
        operation did since ``head_before`` (the repo was verified clean before it), and,
        when a ledger checkout was interrupted, the files it created and the index lock
        that the killed git left behind (the workspace lock guarantees no other ledger
        command is running).  A no-op when already there and clean.
        """
        check_sha(head_before)
        pending = self._pending_file()
        created: list[str] = []
        if pending.exists():
            started_at, _, commit = pending.read_text().strip().partition(" ")
            if started_at == head_before:
                new_tree = self.git.tree_of(check_sha(commit))
                changes = self.git.changed_paths(self.git.tree_of(head_before), new_tree)
                created = [p for st, p in changes if st == "A"]
            lock = self.path / self.git.out("rev-parse", "--git-path", "index.lock")
            lock.unlink(missing_ok=True)
        leftovers = [p for p in created if os.path.lexists(self.path / p)]
        if self.git.head() != head_before or self.git.dirty_paths() or leftovers:
            self.git.reset_hard(head_before, "rollback")
            for rel in created:
                self._remove_untracked(rel)
        pending.unlink(missing_ok=True)

    def _remove_untracked(self, rel: str) -> None:
        """Delete a file the interrupted change created, and directories left empty."""
        path = self.path / rel
        if (
            not os.path.lexists(path)
            or self.git.run("ls-files", "--error-unmatch", "--", rel, check=False).returncode == 0
        ):
            return
        path.unlink()
        for parent in path.parents:
            if parent == self.path or any(parent.iterdir()):
                break
            parent.rmdir()

    def plan_record(self, text: str, *, entry_id: str, title: str, cls: str) -> StackPlan:
        """Check that a new patch is safe and applies on top of HEAD; the plan to record it.

        Raises PatchError (nothing written) when the patch is unsafe, malformed, does not
        apply, or changes nothing; the repo's cleanliness is checked when it is applied.
        """
        check_patch_entry_id(entry_id)
        check_title(title)
        if cls not in ("perf", "bugfix"):
            raise PatchError(f"invalid class {cls!r}: use perf or bugfix")
        item = StackItem(entry_id, title, text, applied_now=False, applied_after=True, cls=cls)
        try:
            plan = self.plan_stack([item])
        except StackConflict as e:
            raise PatchError(f"patch does not apply to the engine repo at HEAD: {e.detail}") from e
        if plan.old_tree == plan.new_tree:
            raise PatchError("patch changes nothing in the engine repo (already applied?)")
        return plan

    def commit_patch(self, text: str, *, entry_id: str, title: str, cls: str) -> str:
        """Apply a new patch on top of HEAD as one commit with ledger trailers; its id.

        Refused with nothing written when the patch is unsafe, does not apply, or the
        repo is dirty.
        """
        plan = self.plan_record(text, entry_id=entry_id, title=title, cls=cls)
        trailers = [("Ledger-Entry", entry_id), ("Ledger-Class", cls), ("Ledger-Action", "record")]
        message = commit_message(f"{title}\n\nRecorded by knob ledger as a {cls} patch.", trailers)
        return self._commit(plan, message, "record patch")

    def adopt_commit(self, rev: str) -> tuple[str, str]:
        """(patch text, commit id) of an existing single-parent commit in HEAD's history."""
        if not rev or rev.startswith("-") or CONTROL_RE.search(rev) or len(rev) > 256:
            raise PatchError(f"invalid revision {rev!r}")
        sha = self.git.resolve_commit(rev)
        if sha is None:
            raise PatchError(f"no commit {rev!r} in engine repo {self.path}")
        head = self.head()
        ancestor = self.git.run("merge-base", "--is-ancestor", sha, head, check=False)
        if ancestor.returncode != 0:
            raise PatchError(f"commit {sha[:12]} ({rev}) is not in the history of HEAD")
        parents = self.git.out("rev-list", "--parents", "-n", "1", sha, "--").split()[1:]
        if len(parents) != 1:
            raise PatchError(f"commit {sha[:12]} has {len(parents)} parents: adopt one that has 1")
        proc = self.git.run(
            "diff",
            *PATCH_DIFF_OPTIONS,
            "--no-renames",
            parents[0],
            sha,
            "--",
        )
        text = proc.stdout.decode("utf-8", "surrogateescape")
        if not text:
            raise PatchError(f"commit {sha[:12]} changes no file")
        self.check_patch(text, sha)
        return text, sha

    def commit_info(self, sha: str) -> dict[str, str]:
        """A commit's date (the committer's: when it entered the repo, ISO 8601), author
        and subject: the defaults of an adopted commit's entry."""
        out = self.git.out("show", "-s", "--format=%cI%x1f%an <%ae>%x1f%s", sha, "--")
        date, author, subject = (out.strip("\n").split("\x1f") + ["", "", ""])[:3]
        return {"date": date, "author": author, "subject": subject}

    # -- worktrees for A/B runs -------------------------------------------------------------

    def materialize(self, items: Sequence[StackItem], dest: str | Path) -> str:
        """A detached worktree at ``dest`` with HEAD's stack changed to ``applied_after``.

        For A/B evidence: pass the live stack with the entry under test flipped.  The live
        worktree is not touched.  Returns the (unreferenced) commit checked out there;
        remove the worktree with :meth:`remove_worktree`.
        """
        dest = Path(dest).absolute()
        if dest.exists():
            raise PatchError(f"worktree destination {dest} already exists")
        plan = self.plan_stack(items)
        commit = plan.head
        if not plan.is_noop:
            trailers = [("Ledger-Entry", c.entry_id) for c in plan.changes]
            commit = self.git.commit_tree(
                plan.new_tree, [plan.head], commit_message("knob ledger A/B side", trailers)
            )
        self.git.add_worktree(dest, commit)
        return commit

    def remove_worktree(self, dest: str | Path) -> None:
        """Remove a worktree made by :meth:`materialize`."""
        self.git.remove_worktree(Path(dest).absolute())


__all__ = [  # the patch-text names are re-exported for callers of this module
    "EngineRepo",
    "PatchFile",
    "StackConflict",
    "StackDrift",
    "StackItem",
    "StackPlan",
    "check_path",
    "parse_patch",
    "parse_patch_files",
    "patch_sha256",
    "verify_sha256",
]
