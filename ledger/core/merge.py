"""Merging two ledgers that grew apart from a common base.  Pure: no files, no git, no clock.

Operators on several clones of one workspace record, revert and restore independently;
:func:`merge_entries` takes the entries at the merge base, on this side (``ours``, the
local clone) and on the other (``theirs``, the remote) and returns the merged ledger — or
raises :class:`~ledger.errors.MergeConflict`.  ``ledger pull`` and the git merge driver
(``ledger merge-driver``) both call it, so a plain ``git pull`` merges ``entries.jsonl``
exactly as ``ledger pull`` does.

Entries merge by id (ids are random, like short git hashes, so two clones never mint the
same one); no entry and no action is ever dropped, except an unpushed local entry the
operator names in ``drop`` (``ledger pull --drop ID``, the way out of a conflict).

Order (``seq``) — as a rebase would do it:
    every entry the remote has keeps the remote's ``seq`` (pushed entries never move, so
    clones that already hold them need not rewrite anything); local entries the remote
    does not have are *replayed* after them, in their local order, renumbered from the
    remote's highest ``seq`` + 1.  What depends on ``seq``, and why this is safe:

    * knob layering: a replayed entry lands on top of its layer.  Two new entries on one
      layer from both sides are a conflict (below), so a replayed entry is only ever
      stacked over entries both sides already had; its position inside its layer is the
      one it had locally.  Its ``before`` stays what it was when recorded: only the first
      entry of a layer gives the layer's base (:func:`ledger.core.layers.layer_value`),
      and a replayed entry is never first in a layer the remote had.  (The remote may have
      reverted or restored an entry below it: that changes which value shows when the
      replayed entry is reverted, exactly as a local revert would.)
    * the patch stack: replayed patch entries go on top of the remote's patches; the
      engine tree is rebuilt from base + applied patches in the new order (``ledger pull``
      un-applies the local patches and re-applies them on top, see
      :mod:`ledger.commands.sync`).  Patches from both sides touching the same lines are a
      conflict.
    * slugs must stay unique: a replayed entry whose slug the remote already uses gets the
      next free ``slug-N`` (reported in :attr:`Merged.renamed`).

Histories of an entry both sides changed are unioned by content (an identical action on
both sides is one action), ordered by time; each side's own order is kept and on equal
times the remote's action comes first.  The state follows the merged history: from the
base, each new action in that order does what it does in the planner (revert/restore set
the state, suspect sets state and suspicion, clear the suspicion; a rollback takes its
own side's fields), so the *latest* action decides the state, and a suspicion raised on
one side survives a plain revert on the other.  When only one side added actions, that
side's fields are taken whole, so a fast-forward is byte-exact.

Conflicts (nothing is merged, the error names both entries):

    * two new entries on one (target, knob) — an entry at one place of a knob
      (``--at``/``--all``) counts as the knob: places move between versions of a file;
    * two new patch entries whose hunks touch overlapping lines of one file (from the
      texts in ``patch_texts``; without a text, any shared file counts).

Evidence, bisect records and patch files are per-entry directories and files and never
collide; rendered docs are re-rendered, not merged (see :mod:`ledger.commands.sync`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import replace
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.core.action import Action
from ledger.core.identifiers import split_place
from ledger.core.model import Entry
from ledger.core.planner import AMENDABLE
from ledger.core.planner import unique_slug
from ledger.errors import MergeConflict
from ledger.errors import Refused
from ledger.errors import UsageError

__all__ = ["Merged", "merge_entries", "hunk_ranges", "merge_histories"]

# The fields an action changes; everything else about an entry is fixed at record time.
STATE_FIELDS = ("state", "suspicion", "suspect_why", "clear_why", "why", "revert_why")


@dataclass(frozen=True)
class Merged:
    """The merged ledger and what the merge did to get there."""

    entries: tuple[Entry, ...]  # record order; seqs unique
    from_remote: tuple[str, ...] = ()  # ids the local side did not have
    replayed: tuple[tuple[str, int, int], ...] = ()  # (id, local seq, merged seq)
    renamed: tuple[tuple[str, str, str], ...] = ()  # (id, local slug, merged slug)
    histories: tuple[str, ...] = ()  # ids whose histories both sides extended
    dropped: tuple[str, ...] = ()

    @property
    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}


def merge_entries(
    base: Sequence[Entry],
    ours: Sequence[Entry],
    theirs: Sequence[Entry],
    *,
    patch_texts: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
    recorded_by: Mapping[str, str] | None = None,
) -> Merged:
    """Merge ``ours`` (local) and ``theirs`` (remote) from their common ``base`` (see the
    module doc).  ``drop``: ids of local unpushed entries to leave out; ``recorded_by``:
    id -> who recorded it and in which commit, for conflict messages."""
    b = {e.id: e for e in base}
    o = {e.id: e for e in ours}
    t = {e.id: e for e in theirs}
    drop = set(drop)
    bad = sorted(i for i in drop if i not in o or i in t or i in b)
    if bad:
        raise UsageError(f"--drop takes local entries the remote does not have; "
                         f"not: {', '.join(bad)}")
    new_theirs = [e for e in sorted(theirs, key=lambda e: e.seq) if e.id not in o and e.id not in b]
    new_ours = [e for e in sorted(ours, key=lambda e: e.seq)
                if e.id not in t and e.id not in b and e.id not in drop]
    _refuse_conflicts(new_theirs, new_ours, patch_texts or {}, recorded_by or {})

    merged: list[Entry] = []
    histories = []
    for e in sorted(theirs, key=lambda e: e.seq):
        if e.id in o:
            entry, both = merge_entry(b.get(e.id), o[e.id], e)
            if both:
                histories.append(e.id)
            merged.append(entry)
        else:
            merged.append(e)
    # Entries of the base that the remote lost (edited by hand): never dropped.
    merged += [o[i] for i in sorted(b, key=lambda i: b[i].seq) if i not in t and i in o]
    replayed, renamed = [], []
    seq = max((e.seq for e in merged), default=0)
    for e in new_ours:
        seq += 1
        slug = unique_slug(merged, e.slug)
        if slug != e.slug:
            renamed.append((e.id, e.slug, slug))
        if seq != e.seq:
            replayed.append((e.id, e.seq, seq))
        merged.append(replace(e, seq=seq, slug=slug))
    merged.sort(key=lambda e: e.seq)
    _check_unique_seqs(merged)
    return Merged(tuple(merged), tuple(e.id for e in new_theirs), tuple(replayed),
                  tuple(renamed), tuple(histories), tuple(sorted(drop)))


def merge_entry(base: Entry | None, ours: Entry, theirs: Entry) -> tuple[Entry, bool]:
    """One entry both sides hold; True when both sides added actions to it."""
    start = base.history if base is not None else _common_prefix(ours.history, theirs.history)
    ours_new = _after_prefix(ours.history, start)
    theirs_new = _after_prefix(theirs.history, start)
    known = set(theirs.history)
    ours_only = [a for a in ours_new if a not in known]
    if not ours_only:
        return theirs, False
    if not theirs_new:
        return replace(theirs, history=ours.history,
                       **{f: getattr(ours, f) for f in STATE_FIELDS}), False
    history = merge_histories(theirs.history, ours_only)
    fields = {f: getattr(base if base is not None else theirs, f) for f in STATE_FIELDS}
    mine = set(ours_only)
    for action in _after_prefix(history, start):
        _fold(fields, action, ours if action in mine else theirs)
    return replace(theirs, history=history, **fields), True


def _fold(fields: dict, a: Action, side: Entry) -> None:
    """What one action does to an entry's state fields (the planner's rules)."""
    if a.action == "revert":
        fields["state"] = "reverted"
    elif a.action == "restore":
        fields["state"] = "applied"
    elif a.action == "suspect":
        fields.update(state="reverted", suspicion="suspected", suspect_why=a.why)
    elif a.action == "clear":
        fields.update(suspicion="cleared", clear_why=a.why)
    elif a.action == "rollback":  # puts back what its own side had: take that side's
        fields.update({f: getattr(side, f) for f in STATE_FIELDS})
    elif a.action == "amend":  # "suspect reason amended; ...": the text its side holds
        field = AMENDABLE.get(a.why.split(" ", 1)[0])
        if field is not None:
            fields[field] = getattr(side, field)


def merge_histories(theirs: Sequence[Action], ours_only: Sequence[Action]) -> tuple[Action, ...]:
    """The remote's history with the local-only actions woven in by time.

    A merge, not a sort: each side's own order stands (clocks of two machines may
    disagree), and on equal times the remote's action comes first.
    """
    out: list[Action] = []
    i = j = 0
    while i < len(theirs) and j < len(ours_only):
        if theirs[i].at <= ours_only[j].at:
            out.append(theirs[i])
            i += 1
        else:
            out.append(ours_only[j])
            j += 1
    return tuple(out + list(theirs[i:]) + list(ours_only[j:]))


def _common_prefix(a: Sequence[Action], b: Sequence[Action]) -> tuple[Action, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return tuple(a[:n])


def _after_prefix(history: Sequence[Action], start: Sequence[Action]) -> list[Action]:
    """The actions of ``history`` that are not in ``start`` (by content)."""
    seen = set(start)
    return [a for a in history if a not in seen]


def _check_unique_seqs(entries: Sequence[Entry]) -> None:
    seqs = [e.seq for e in entries]
    if len(set(seqs)) != len(seqs):  # remote entries repeat a seq: a hand-edited file
        dup = sorted({s for s in seqs if seqs.count(s) > 1})
        raise Refused(f"the merged ledger would repeat seq {dup} (an entries.jsonl edited by "
                      "hand?): fix the file on the side that repeats it")


# -- conflicts ---------------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def hunk_ranges(text: str) -> dict[str, list[tuple[int, int]]]:
    """file -> [start, end) of the old lines each hunk of a unified diff touches."""
    out: dict[str, list[tuple[int, int]]] = {}
    old = new = None
    for line in text.split("\n"):
        if line.startswith("--- "):
            old = _diff_path(line[4:])
        elif line.startswith("+++ "):
            new = _diff_path(line[4:])
        else:
            m = _HUNK.match(line)
            if m and (new or old):
                start, count = int(m.group(1)), int(m.group(2) or 1)
                out.setdefault(new or old or "", []).append((start, start + max(count, 1)))
    return out


def _diff_path(raw: str) -> str | None:
    raw = raw.split("\t")[0].strip()
    if raw == "/dev/null":
        return None
    return raw[2:] if raw[:2] in ("a/", "b/") else raw


def _lines_overlap(a: str | None, b: str | None, files_a, files_b) -> str | None:
    """What two patches both touch ("engine/x.py lines 10-14"), or None."""
    if a is None or b is None:
        shared = sorted(set(files_a) & set(files_b))
        return f"{', '.join(shared)} (patch texts unavailable)" if shared else None
    ra, rb = hunk_ranges(a), hunk_ranges(b)
    for path in sorted(set(ra) & set(rb)):
        for s1, e1 in ra[path]:
            for s2, e2 in rb[path]:
                if s1 < e2 and s2 < e1:
                    return f"{path} lines {max(s1, s2)}-{min(e1, e2) - 1}"
    return None


def describe(e: Entry, recorded_by: Mapping[str, str]) -> str:
    """``abcd1234 (raise-ctas) TARGET:KNOB -> 512, recorded 2026-…Z by …``"""
    if e.kind == "knob":
        what = f"{e.label} -> {'unset' if e.after is None else repr(e.after)}"
    else:
        what = e.label
    by = f" by {recorded_by[e.id]}" if e.id in recorded_by else ""
    return f"{e.id} ({e.slug}) [{e.cls}] {what}, recorded {e.recorded}{by}"


def _refuse_conflicts(new_theirs: Sequence[Entry], new_ours: Sequence[Entry],
                      patch_texts: Mapping[str, str], recorded_by: Mapping[str, str]) -> None:
    pairs = []
    for o in new_ours:
        for t in new_theirs:
            what = _touches_same(t, o, patch_texts)
            if what:
                pairs.append((describe(t, recorded_by), describe(o, recorded_by), what))
    if pairs:
        err = MergeConflict(pairs)
        err.local_ids = [o.id for o in new_ours if any(  # type: ignore[attr-defined]
            _touches_same(t, o, patch_texts) for t in new_theirs)]
        raise err


def _touches_same(t: Entry, o: Entry, patch_texts: Mapping[str, str]) -> str | None:
    if t.kind != o.kind:
        return None
    if t.kind != "patch":  # a knob, or an upgrade: the release of its target
        shared = sorted(set(t.targets) & set(o.targets))  # one change may span targets
        if shared and split_place(t.knob or "")[0] == split_place(o.knob or "")[0]:
            return f"knob {split_place(o.knob or '')[0]} in target {shared[0]}"
        return None
    where = _lines_overlap(patch_texts.get(t.id), patch_texts.get(o.id), t.files, o.files)
    return f"engine lines {where}" if where else None
