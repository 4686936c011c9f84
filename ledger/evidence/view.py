"""The ledger's view of an entry's evidence: its headline, verdict and staleness.

Evidence lives under ``evidence/<entry-id>/<run-id>/`` (see :mod:`ledger.evidence.store`);
this module answers the questions the other commands ask of it, and stays cheap when an
entry has no evidence at all (no pandas, no YAML parsing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

from ledger.core.model import Entry
from ledger.errors import LedgerError
from ledger.store.workspace import Workspace

NO_EVIDENCE = "no evidence"


@dataclass(frozen=True)
class EvidenceInfo:
    headline: str
    verdict: str | None
    stale: bool
    summary: dict | None
    stale_why: tuple[str, ...] = ()  # what changed since, each said (ledger.evidence.staleness)
    # whether what changed touches what the evidence measures (unrelated commits alone: no)
    matters: bool = True

    @property
    def text(self) -> str:
        """The headline with what changed since it was measured: ``[stale] … (stale: …)``
        when that touches what it measures, ``… — measured before 2 bugfix commits …``
        when not (:func:`ledger.evidence.staleness.stale_text`)."""
        if not self.stale:
            return self.headline
        if not self.stale_why:
            return f"[stale] {self.headline}"
        from ledger.evidence.staleness import stale_text

        return stale_text(self.headline, self.matters, self.stale_why)


NONE = EvidenceInfo(NO_EVIDENCE, None, False, None)


def has_evidence(ws: Workspace, entry: Entry) -> bool:
    return (ws.evidence_dir / entry.id).is_dir()


class AllIds:
    """What :func:`evidence_ids` answers where ``evidence/`` cannot be listed: every id may
    have evidence, so each entry is asked alone."""

    def __contains__(self, entry_id: object) -> bool:
        return True


def evidence_ids(ws: Workspace) -> frozenset[str] | AllIds:
    """The ids of every entry with an evidence directory: one listing of ``evidence/``,
    for a command that looks at thousands of entries (one ``stat`` each costs more).
    Where the directory exists but cannot be listed, :class:`AllIds`."""
    try:
        with os.scandir(ws.evidence_dir) as found:
            return frozenset(d.name for d in found if d.is_dir())
    except FileNotFoundError:  # no evidence/ yet
        return frozenset()
    except OSError:  # unreadable: each entry is then asked alone
        return AllIds()


def evidence_of(ws: Workspace, entries: Iterable[Entry]) -> dict[str, EvidenceInfo]:
    """:func:`evidence_for` of each entry, by id, listing ``evidence/`` once."""
    present = evidence_ids(ws)
    return {e.id: evidence_for(ws, e) if e.id in present else NONE for e in entries}


def evidence_for(ws: Workspace, entry: Entry, context: dict | None = None) -> EvidenceInfo:
    """The latest evidence of ``entry`` (or NONE), with staleness against the live state."""
    if not has_evidence(ws, entry):
        return NONE
    from ledger.evidence import store

    summary = store.latest_summary(ws.root, entry.id)
    if summary is None:
        return _notes_only(ws, entry)
    engine_commit = current_engine_commit(ws)
    recorded_at = summary.get("engine_commit")
    if recorded_at and engine_commit and recorded_at != engine_commit \
            and same_tree(ws, recorded_at, engine_commit):
        # A revert and a restore make new commits of the same tree: same engine source,
        # so the evidence still describes it.
        engine_commit = recorded_at
    if context is None:
        context = knob_context(ws, entry)
    from ledger.evidence.staleness import stale_story
    from ledger.evidence.summary import stale_reasons

    reasons = stale_reasons(summary, engine_commit, context)
    commit_change = next((r for r in reasons if r.startswith("engine commit ")), None)
    knob_changes = [r for r in reasons if r is not commit_change]
    commits = engine_commits_since(ws, entry, str(recorded_at), engine_commit) \
        if commit_change and engine_commit else None
    matters, story = stale_story(commits, knob_changes, commit_change)
    return EvidenceInfo(store.headline(summary), summary.get("verdict"), bool(reasons),
                        summary, tuple(story), matters)


def _notes_only(ws: Workspace, entry: Entry) -> EvidenceInfo:
    """An entry with notes but no measured run: the numbers its note's A/B table says,
    said as not measured by the ledger (no verdict); NONE without such a note."""
    from ledger.evidence.notes import load_notes
    from ledger.evidence.notes import notes_headline

    try:
        said = notes_headline(load_notes(ws.root, entry.id))
    except LedgerError:  # an unreadable notes.yaml: `evidence show` says why
        return NONE
    return EvidenceInfo(said, None, False, None) if said else NONE


MAX_COMMITS = 50  # more engine commits than this since the evidence: said as a range


def engine_commits_since(ws: Workspace, entry: Entry, old: str, new: str):
    """The engine commits from ``old`` (exclusive) to ``new``, each with its subject, the
    files it touches, whether it touches what ``entry`` measures and the class of the
    ledger entry it applies (:class:`ledger.evidence.staleness.EngineCommit`).  None when
    they cannot be listed: no engine repo, an unknown commit, ``old`` not an ancestor of
    ``new`` (history rewritten), or more than :data:`MAX_COMMITS`."""
    git = engine_git(ws)
    if git is None:
        return None
    try:
        old_full, new_full = git.resolve_commit(old), git.resolve_commit(new)
        if not old_full or not new_full or git.run(
                "merge-base", "--is-ancestor", old_full, new_full, check=False).returncode:
            return None
        log = git.out("log", "--format=%H%x1f%s%x1f%b%x1e", "-n", str(MAX_COMMITS + 1),
                      f"{old_full}..{new_full}")
        records = [r.strip("\n").split("\x1f") for r in log.split("\x1e") if r.strip()]
        if len(records) > MAX_COMMITS:
            return None
        return [_engine_commit(git, ws, entry, *(rec + ["", ""])[:3]) for rec in records]
    except LedgerError:
        return None


def _searched_name(entry: Entry) -> str | None:
    """What the engine's code calls the entry's knob: a flag ``--mem-fraction-static`` is
    ``mem_fraction_static`` there; an env knob its own name; a patch entry none."""
    if entry.kind != "knob" or not entry.knob:
        return None
    return entry.knob.lstrip("-").replace("-", "_") if entry.knob.startswith("-") \
        else entry.knob


def _entry_files(git, entry: Entry, at: str) -> tuple[str, ...]:
    """The files the entry's change touches: the engine files naming its knob at ``at``,
    or the files its patch changes."""
    name = _searched_name(entry)
    if name is None:
        return tuple(entry.files or ())
    found = git.run("grep", "-l", "-F", "-e", name, at, "--", check=False)
    prefix = f"{at}:"
    return tuple(line.removeprefix(prefix) for line in
                 found.stdout.decode("utf-8", "replace").splitlines())


def _engine_commit(git, ws: Workspace, entry: Entry, sha: str, subject: str, body: str):
    import re

    from ledger.evidence.staleness import EngineCommit
    from ledger.evidence.staleness import related_why

    files = tuple(git.out("diff-tree", "--no-commit-id", "--name-only", "-r", "--root",
                          sha).splitlines())
    name = _searched_name(entry)
    mentions = bool(name) and name in git.out("show", "--format=", sha)
    related = related_why(files, _entry_files(git, entry, sha), name, mentions)
    found = re.search(r"as an? (perf|bugfix) patch", body)
    cls = found.group(1) if found else next(
        (e.cls for e in ws.entries() if e.kind == "patch" and e.title and e.title in subject),
        None)
    return EngineCommit(sha, subject, files, related, cls)


def engine_git(ws: Workspace):
    """The engine repo through the hardened runner (it is not ours: no hooks, no GIT_*)."""
    path = ws.engine_repo_path
    if path is None or not (path / ".git").exists():
        return None
    from ledger.patches.engine_git import Git

    return Git(path)


def current_engine_commit(ws: Workspace) -> str | None:
    git = engine_git(ws)
    try:
        return git.head() if git else None
    except LedgerError:  # an unreadable engine repo only makes evidence unjudgeable
        return None


def same_tree(ws: Workspace, a: str, b: str) -> bool:
    """Whether two engine commits hold the same source tree."""
    git = engine_git(ws)
    try:
        return bool(git) and git.tree_of(a) == git.tree_of(b)
    except LedgerError:  # an unknown commit (history rewritten): not the same engine
        return False


def knob_context(ws: Workspace, entry: Entry) -> dict | None:
    """The other knobs of the entry's target as they are live (None for patch entries)."""
    if entry.kind != "knob":
        return None
    from ledger.store.targets import read_target

    try:
        tf = read_target(ws, ws.target(entry.target))
    except LedgerError:
        return None
    return {k: v for k, v in tf.values.items() if k != entry.knob}
