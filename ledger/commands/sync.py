"""`ledger pull`, `ledger push` and the git merge driver: share the ledger through git.

pull
    Under the writer lock: fetch the current branch of the remote into its
    remote-tracking ref, merge the ledger's files from the merge base
    (:func:`merge_files`; entries by :func:`ledger.core.merge.merge_entries`), compute
    this machine's target files and the engine's patch stack for the merged ledger
    (:mod:`ledger.store.sync_apply`; drift refused unless ``--force``), and write it all in
    one :class:`~ledger.store.txn.Transaction` whose workspace commit is a merge commit of
    HEAD and the remote's commit.  A pull always makes that merge commit, even where git
    could fast-forward (``--no-ff``): the commit carries the transaction's ``Ledger-Op``
    trailer, which is how the next command knows a killed pull had completed (rolled
    forward) or not (rolled back: targets, engine repo and ledger files as before).  The
    fetch itself changes only ``refs/remotes/REMOTE/BRANCH`` (also on ``--dry-run``).

    Other ledger files: a file only one side changed is taken from that side (evidence,
    bisect records and patch files are per-entry, so that is every normal case); one both
    sides changed goes through git's three-way text merge (``ledger.yaml``, whose targets
    merge by name where the lines collide: :mod:`ledger.store.config_merge`); rendered
    docs that still collide (``.md``/``.html``) take the remote's version and the pull
    says to re-render them (``ledger render`` writes them from the merged ledger, which
    is what a merge of two renderings should be); any other collision is a conflict.

    ``--drop ID`` takes an unpushed local entry out while merging (its change undone on
    this machine, its patch file removed): the way out of a conflict.

push
    ``git push REMOTE BRANCH``; a rejection because the remote moved on is refused with
    "run `ledger pull` first".

merge driver
    ``ledger merge-driver %O %A %B %P`` merges ``entries.jsonl`` for a plain ``git merge``
    or ``git pull`` with the same function (the result is byte-identical to ``ledger
    pull``'s for the file).  It is registered by ``ledger init`` and ``ledger pull`` as
    ``merge.ledger.driver`` in ``.git/config`` and ``entries.jsonl merge=ledger`` in the
    committed ``.gitattributes``.  On a conflict it writes the message on stderr and exits
    1, leaving ``%A`` (the local version) as it was: git then reports the file as
    conflicted and stops the merge (``git merge --abort`` goes back).  Patch texts for
    the line check come from the worktree and, for the other side, from MERGE_HEAD,
    FETCH_HEAD or a remote-tracking ref (only a text matching the entry's sha256 is
    used; without one, patches sharing a file conflict).  A plain ``git pull`` merges the
    ledger's files only; the next ``ledger pull`` sees that HEAD is a merge git made (no
    ``Ledger-Op`` trailer) whose ledger the targets do not match yet, and brings the
    targets and the engine repo to it from the ledger before the merge (first parent) —
    the same files ``ledger pull`` would have written.
    Under ``git pull --rebase`` git swaps the sides (``%A`` is then the remote's), so the
    local entries would come first: use ``ledger pull`` or a merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import Mapping
from typing import Sequence

from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core.layers import knob_layers
from ledger.core.merge import Merged
from ledger.core.merge import merge_entries
from ledger.core.model import Entry
from ledger.errors import LedgerError
from ledger.errors import MergeConflict
from ledger.errors import PatchError
from ledger.errors import Refused
from ledger.store import gitsync
from ledger.store import wsgit
from ledger.store.apply import unified
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import parse_config_text
from ledger.store.entries_file import entries_bytes
from ledger.store.entries_file import parse_entries
from ledger.store.managed import refuse_symlinked_targets
from ledger.store.roots import LOCAL_NAME
from ledger.store.roots import ignore_with_local
from ledger.store.sync_apply import engine_sync
from ledger.store.sync_apply import inside_targets
from ledger.store.sync_apply import take_computed
from ledger.store.sync_apply import target_writes
from ledger.store.txn import Transaction
from ledger.store.workspace import ENTRIES_NAME
from ledger.store.workspace import Workspace

RENDERED = (".md", ".html")


@dataclass
class Pulled:
    """What a pull did (or, with dry_run, would do)."""

    remote: str
    branch: str
    status: str  # "up to date", "no remote branch", "merged"
    merged: Merged | None = None
    files: dict[str, str] = field(default_factory=dict)  # target path -> unified diff
    ledger_files: list[str] = field(default_factory=list)
    patch_diff: str = ""
    backup_id: str | None = None
    commit: str | None = None
    dry_run: bool = False
    notices: list[str] = field(default_factory=list)


def pull(s: Session, remote: str | None = None, *, drop: Sequence[str] = (),
         force: bool = False, dry_run: bool = False) -> Pulled:
    """Fetch, merge the ledger, and bring this machine's files to it (see the module doc)."""
    root = s.ws.root
    with writing(s, dry_run, new_config=True) as ws:
        name = gitsync.check_remote(root, remote)
        branch = gitsync.current_branch(root)
        if not dry_run:
            gitsync.register_driver(root)
        if gitsync.rev(root, "MERGE_HEAD"):
            raise Refused(f"{root}: a git merge is in progress (a plain `git pull` stopped on "
                          "a conflict?): finish it, or `git merge --abort`, then pull again")
        theirs = gitsync.fetch(root, name, branch)
        head = wsgit.head(root)
        if theirs is None:
            return Pulled(name, branch, "no remote branch", dry_run=dry_run)
        if head is None:
            raise Refused(f"{root} has no commit yet: clone the remote instead")
        if gitsync.is_ancestor(root, theirs, head):
            if drop:
                raise Refused("nothing to merge: --drop only applies to a pull that merges")
            finished = _finish_git_merge(s, ws, name, branch, head, force, dry_run)
            return finished or Pulled(name, branch, "up to date", dry_run=dry_run)
        base = gitsync.merge_base(root, head, theirs)
        if base is None:
            raise Refused(f"{name}/{branch} shares no history with this workspace: clone the "
                          "remote instead of pulling into an unrelated ledger")
        _refuse_dirty(root)
        return _merge_and_apply(s, ws, name, branch, base, head, theirs, drop, force, dry_run)


def _merge_and_apply(s: Session, ws: Workspace, name: str, branch: str, base: str, head: str,
                     theirs: str, drop: Sequence[str], force: bool, dry_run: bool) -> Pulled:
    root = ws.root
    drop = [ws.resolve(ref).id for ref in drop]
    sides = _entries_at(root, base, theirs, ws.entries())
    texts = _patch_texts(ws, theirs, [*sides[1], *sides[2]])
    who = gitsync.recorded_by(root, base, [head, theirs])
    try:
        merged = merge_entries(*sides, patch_texts=texts, drop=drop, recorded_by=who)
    except MergeConflict as e:
        e.where = f"{name}/{branch} into {root}"
        e.hint = conflict_hint(getattr(e, "local_ids", []), name)
        raise
    deferred: list[str] = []
    writes, notices = merge_files(root, base, head, theirs, merged, sides[1],
                                  managed=inside_targets(ws, theirs), deferred=deferred)
    return _apply_merge(s, ws, (name, branch), sides, merged, writes, texts, theirs,
                        Pulled(name, branch, "merged", merged, dry_run=dry_run, notices=notices,
                               ledger_files=sorted(writes)), force, deferred)


def _apply_merge(s: Session, ws: Workspace, where: tuple[str, str], sides, merged: Merged,
                 writes: dict[str, bytes | None], texts: Mapping[str, str],
                 merge_parent: str | None, result: Pulled, force: bool,
                 deferred: Sequence[str] = ()) -> Pulled:
    """Targets and engine from ``sides[1]`` (the local ledger) to ``merged``, and the
    ledger ``writes``, in one transaction (nothing with ``result.dry_run``)."""
    root = ws.root
    name, branch = where
    config = parse_config_text(writes[CONFIG_NAME].decode("utf-8"), CONFIG_NAME) \
        if writes.get(CONFIG_NAME) else ws.config
    mws = Workspace.with_config(root, config)
    refuse_symlinked_targets(mws)  # the merged ledger.yaml, as every writer checks it
    local = {e.id for e in sides[1]} - {e.id for e in sides[0]} - {e.id for e in sides[2]}
    universe = with_dropped(merged, sides[1])
    targets = target_writes(mws, sides[1], sides[2], merged.entries, universe, force=force)
    take_computed(ws, targets, writes, deferred, result.notices)
    result.ledger_files = sorted(writes)
    message = pull_message(name, branch, merged)
    engine = engine_sync(mws, sides[1], merged.entries, sorted(local), texts,
                         f"ledger pull {name}/{branch}")
    result.files = {str(p): unified(str(p), old, new) for p, (old, new) in targets.items()}
    result.patch_diff = engine.diff if engine else ""
    if result.dry_run:
        return result
    try:
        outcome = Transaction(ws, s.command, s.now).execute(
            message=message,
            target_writes={p: new for p, (_, new) in targets.items()},
            ledger_writes=writes,
            engine_step=engine.step if engine else None,
            engine_repo=engine.repo if engine else None,
            engine_head=engine.head if engine else None,
            backup_also=engine.files if engine else (),
            merge_parent=merge_parent,
        )
    finally:
        ws.invalidate()
    result.backup_id, result.commit = outcome.backup_id, outcome.commit
    return result


def with_dropped(merged: Merged, ours: Sequence[Entry]) -> list[Entry]:
    """The merged entries, then the local entries ``--drop`` takes out, numbered after
    them: every layer the pull touches, for undoing the dropped changes here.  They go
    last so that the merged ledger alone gives each shared layer its base, its anchor and
    its place in the record order (the order in which knobs that claim one place are laid
    out, :mod:`ledger.core.layout`): as on every clone that never had them.  (At their
    own seqs they would sort among the remote's, and this clone's lines would stand in
    another order than everyone else's.)"""
    top = max((e.seq for e in merged.entries), default=0)
    gone = sorted((e for e in ours if e.id in merged.dropped), key=lambda e: e.seq)
    return [*merged.entries, *(replace(e, seq=top + i) for i, e in enumerate(gone, 1))]


def _finish_git_merge(s: Session, ws: Workspace, name: str, branch: str, head: str,
                      force: bool, dry_run: bool) -> Pulled | None:
    """After a plain ``git pull`` (the driver merged the ledger, git made the commit), the
    targets still hold what the ledger expected before the merge: bring them to it now.

    Only when HEAD is a merge commit git made (no ``Ledger-Op`` trailer) and the targets
    differ from HEAD's ledger; drift against the ledger before the merge is refused.
    """
    from ledger.store.apply import drift_in
    from ledger.store.apply import read_targets

    root = ws.root
    parents = gitsync.parents(root, head)
    if len(parents) != 2 or "Ledger-Op:" in wsgit.message_of(root, head):
        return None
    now = ws.entries()
    files = read_targets(ws, sorted({t for t, _ in knob_layers(now)}))
    if not drift_in(ws, now, files):
        return None
    _refuse_dirty(root)
    base = gitsync.merge_base(root, *parents)
    before, other = (_entries_at_rev(root, p) for p in parents)
    sides = (_entries_at_rev(root, base) if base else [], before, other)
    known = {e.id for e in before} | {e.id for e in sides[0]}
    merged = Merged(tuple(now), tuple(e.id for e in other if e.id not in known))
    texts = _patch_texts(ws, parents[1], [*before, *now])
    result = Pulled(name, branch, "finished git's merge", merged, dry_run=dry_run)
    return _apply_merge(s, ws, (name, branch), sides, merged, {}, texts, None, result, force)


def conflict_hint(local_ids: Sequence[str], remote: str) -> str:
    """The commands that resolve a merge conflict, from the local side."""
    ids = " ".join(f"--drop {i}" for i in local_ids) or "--drop LOCAL_ID"
    return (f"resolve it here: `ledger pull {remote} {ids}` takes your unpushed "
            "entr(ies) out (the change is undone on this machine) and merges the remote's; "
            "then record your change again on top with `ledger record ...` if you still "
            "want it. Pushed entries are never dropped: to undo the remote's change, "
            "`ledger revert` it after the pull")


def _entries_at_rev(root: Path, rev: str) -> list[Entry]:
    raw = gitsync.blob(root, rev, ENTRIES_NAME) or b""
    return parse_entries(raw.decode("utf-8"), f"{ENTRIES_NAME} at {rev[:10]}")


def _entries_at(root: Path, base: str, theirs: str, ours: Sequence[Entry]):
    return _entries_at_rev(root, base), list(ours), _entries_at_rev(root, theirs)


def _patch_texts(ws: Workspace, theirs: str, entries: Sequence[Entry]) -> dict[str, str]:
    """Each patch entry's text, from this workspace or the remote's commit; verified."""
    from ledger.patches.stack import verify_sha256

    texts: dict[str, str] = {}
    for e in entries:
        if e.kind != "patch" or e.id in texts or not e.patch:
            continue
        path = ws.root / e.patch
        raw = path.read_bytes() if path.is_file() else gitsync.blob(ws.root, theirs, e.patch)
        if raw is None:
            raise PatchError(f"entry {e.id}: its patch {e.patch} is in neither ledger")
        text = raw.decode("utf-8", "surrogateescape")
        verify_sha256(text, e.sha256 or "", entry_id=e.id)
        texts[e.id] = text
    return texts


def merge_files(root: Path, base: str, head: str, theirs: str, merged: Merged,
                ours: Sequence[Entry], *, managed: set[str] = frozenset(),
                deferred: list[str] | None = None
                ) -> tuple[dict[str, bytes | None], list[str]]:
    """The workspace files to write for the merge (path -> bytes, None = delete), and
    notices; a collision that cannot be merged raises MergeConflict — except in a target
    file inside the workspace (``managed``), which goes to ``deferred``: the merged
    ledger writes it (:func:`~ledger.store.sync_apply.take_computed`).  ``.gitignore`` gets the
    ``ledger.local.yaml`` line when it lacks it."""
    ch_ours = gitsync.changed(root, base, head)
    ch_theirs = gitsync.changed(root, base, theirs)
    writes: dict[str, bytes | None] = {}
    notices = []
    for path in sorted(ch_theirs):
        if path == ENTRIES_NAME:
            continue
        mine, other = gitsync.blob(root, head, path), gitsync.blob(root, theirs, path)
        if path not in ch_ours:
            writes[path] = other
        elif mine != other:
            try:
                writes[path] = _both_changed(root, base, path, mine, other, notices)
            except MergeConflict:
                if path not in managed or deferred is None:
                    raise
                deferred.append(path)
    new = entries_bytes(merged.entries)
    if ENTRIES_NAME in ch_ours or merged.dropped:
        if new != gitsync.blob(root, head, ENTRIES_NAME):
            writes[ENTRIES_NAME] = new
    elif ENTRIES_NAME in ch_theirs:
        writes[ENTRIES_NAME] = gitsync.blob(root, theirs, ENTRIES_NAME)
    for e in ours:
        if e.id in merged.dropped and e.patch:
            writes[e.patch] = None
    attrs = writes.get(gitsync.ATTRIBUTES, gitsync.blob(root, head, gitsync.ATTRIBUTES))
    added = gitsync.attributes_text(attrs)
    if added is not None:
        writes[gitsync.ATTRIBUTES] = added
    ignore = writes.get(".gitignore", gitsync.blob(root, head, ".gitignore"))
    if ignore is None or LOCAL_NAME not in ignore.decode("utf-8", "replace").split():
        writes[".gitignore"] = ignore_with_local(ignore)
    return writes, notices


def _both_changed(root: Path, base: str, path: str, mine: bytes | None, other: bytes | None,
                  notices: list[str]) -> bytes | None:
    if mine is not None and other is not None:
        was = gitsync.blob(root, base, path) or b""
        merged = gitsync.merge_text(root, mine, was, other)
        if merged is not None:
            return merged
        if path == CONFIG_NAME:  # targets added on both sides: merged by name
            from ledger.store.config_merge import merge_config

            return merge_config(*(x.decode("utf-8") for x in (was, mine, other))).encode()
    if path.endswith(RENDERED):
        notices.append(f"{path} was rendered on both sides: the remote's version is kept; "
                       "run `ledger render` to render it from the merged ledger")
        return other
    raise MergeConflict([(f"{path} as the remote has it", f"{path} as this workspace has it",
                          f"file {path}")],
                        f"edit {path} so both changes are in it, commit it, and pull again")


def pull_message(remote: str, branch: str, merged: Merged) -> str:
    by_id = merged.by_id
    head = (f"pull {remote}/{branch}: {len(merged.from_remote)} remote entr"
            f"{'y' if len(merged.from_remote) == 1 else 'ies'}, "
            f"{len(merged.replayed)} local replayed")
    lines = [f"- {i} [{by_id[i].cls}] {by_id[i].title} (remote)" for i in merged.from_remote]
    lines += [f"- {i} [{by_id[i].cls}] {by_id[i].title} (replayed: seq {a} -> {b})"
              for i, a, b in merged.replayed]
    lines += [f"  slug {old} -> {new} ({i})" for i, old, new in merged.renamed]
    lines += [f"  dropped local entry {i}" for i in merged.dropped]
    return head + "\n\n" + "\n".join(lines) + "\n"


def _refuse_dirty(root: Path) -> None:
    """A pull rewrites the ledger's files: uncommitted changes to them would be lost."""
    lines = [line for line in wsgit.dirty(root) if not line.startswith("??")]
    if lines:
        paths = ", ".join(line[3:] for line in lines[:10])
        raise Refused(f"{root} has uncommitted changes ({paths}): commit or discard them "
                      "before pulling")


def push(s: Session, remote: str | None = None) -> gitsync.PushResult:
    """Push the workspace's branch; refused with "pull first" when the remote moved on."""
    root = s.ws.root
    name = gitsync.check_remote(root, remote)
    return gitsync.push(root, name, gitsync.current_branch(root))


# -- the git merge driver ------------------------------------------------------------------


def merge_driver(base: str, ours: str, theirs: str, path: str, cwd: Path) -> None:
    """Merge ``entries.jsonl`` for git: read %O %A %B, write the result to %A."""
    sides = []
    for where in (base, ours, theirs):
        raw = Path(where).read_bytes()
        sides.append(parse_entries(raw.decode("utf-8"), f"{path} ({where})"))
    texts = _driver_patch_texts(cwd, [*sides[1], *sides[2]])
    try:
        merged = merge_entries(*sides, patch_texts=texts)
    except MergeConflict as e:
        e.where = f"{path} (git merge driver)"
        e.hint = ("git marks the file as conflicted; `git merge --abort` goes back, then "
                  + conflict_hint(getattr(e, "local_ids", []), "REMOTE"))
        raise
    Path(ours).write_bytes(entries_bytes(merged.entries))


def _driver_patch_texts(cwd: Path, entries: Sequence[Entry]) -> dict[str, str]:
    from ledger.patches.stack import patch_sha256

    revs = [r for r in ("MERGE_HEAD", "FETCH_HEAD") if gitsync.rev(cwd, r)]
    revs += _remote_heads(cwd)
    texts: dict[str, str] = {}
    for e in entries:
        if e.kind != "patch" or not e.patch or e.id in texts:
            continue
        candidates = [(cwd / e.patch).read_bytes()] if (cwd / e.patch).is_file() else []
        candidates += [b for b in (gitsync.blob(cwd, r, e.patch) for r in revs) if b]
        for raw in candidates:
            text = raw.decode("utf-8", "surrogateescape")
            if patch_sha256(text) == e.sha256:
                texts[e.id] = text
                break
    return texts


def _remote_heads(cwd: Path) -> list[str]:
    try:
        refs = gitsync.out(cwd, "for-each-ref", "--format=%(objectname)", "refs/remotes/")
    except LedgerError:
        return []
    return [r for r in refs.splitlines() if r]


def register(root: Path) -> Mapping[str, bytes]:
    """Register the merge driver in ``.git/config``; the ``.gitattributes`` to commit
    (empty when it already has the ledger's lines)."""
    gitsync.register_driver(root)
    path = root / gitsync.ATTRIBUTES
    text = gitsync.attributes_text(path.read_bytes() if path.is_file() else None)
    return {gitsync.ATTRIBUTES: text} if text is not None else {}
