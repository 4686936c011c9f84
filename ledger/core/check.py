"""`ledger check`'s judge: is every change between two commits explained by the ledger?  Pure.

The commands layer (:mod:`ledger.commands.check`) reads, from git objects, every target
that changed at the base and at the head commit with the targets' own format readers, and
``entries.jsonl`` at both; this module gets those readings and decides.  No files, no git.
The records it reads and returns: :mod:`ledger.core.findings`.

Rules (``checks:`` in ledger.yaml sets each to ``error``, ``warn`` or ``off``):

``unledgered`` (error)
    A knob, env variable or launch flag whose value differs between base and head in a
    target file, with no entry recorded or changed in the range for that target and knob.
    The finding names ``file:line``, the change (``SGLANG_X: 4 -> 8``) and the command that
    records it: ``ledger record knob … --adopt --before 4`` for an env knob (the file
    already holds the change), ``ledger adopt TARGET --git REPO --path FILE`` for a launch
    flag (``record flag`` has no ``--adopt``: adopt reads the commits that made it).
``release`` (error)
    The engine release a target names (an image tag ``lmsysorg/sglang:v0.5.23``, a pin)
    changed with no entry in the range on that target naming the new release (its title
    or why holds ``0.5.23``), or no upgrade entry of the range on it; the fix names the
    ``ledger record upgrade --adopt`` command where the file names one release each side.
``evidence`` (``required``, i.e. error)
    A perf entry added applied, or restored, in the range needs evidence whose verdict is
    not ``regression``.  ``required``/``error``, ``warn`` or ``off``.  Bugfix entries and
    entries recorded already reverted need none.
``stale-evidence`` (warn)
    That evidence was measured with other knobs in the target than the head holds.
``state`` (error)
    For every target the range touches (its file or its entries), each knob the ledger
    manages holds at head what the ledger expects there (the planner's layering).
``history`` (error)
    ``entries.jsonl`` is append-only in history: an entry of the base is still at the head,
    with the same identity (id, seq, kind, class, recorded, target, knob, before, after,
    patch) and every action of its base history still there, in order.
``outside-repo`` (error)
    A target whose file is outside the repository holding the workspace cannot be
    compared (the separate-ledger-repo layout turns it ``off``; README "The ledger in the
    pull request").
``unreadable`` (always error, not configurable)
    A target file that is missing or does not parse at the base or the head: never a pass.

Severities are read from ledger.yaml *at the base* (falling back to the head where the
base has none), so a branch cannot switch off the gate that judges it.
"""

from __future__ import annotations

import shlex
from typing import Callable
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.core.findings import Change
from ledger.core.findings import EntryNote
from ledger.core.findings import EvidenceView
from ledger.core.findings import Finding
from ledger.core.findings import Layout
from ledger.core.findings import Report
from ledger.core.findings import Side
from ledger.core.findings import TargetReading
from ledger.core.identifiers import split_place
from ledger.core.inversion import inversion
from ledger.core.layers import entry_keys
from ledger.core.layers import expected_knobs
from ledger.core.layers import knob_layers
from ledger.core.model import Entry
from ledger.errors import ConfigError
from ledger.values import value_text

RULES: dict[str, str] = {
    "unledgered": "error",
    "release": "error",
    "evidence": "error",
    "stale-evidence": "warn",
    "state": "error",
    "history": "error",
    "outside-repo": "error",
}
FIXED = {"unreadable": "error"}  # never configurable: an unreadable file is never a pass
SEVERITIES = ("error", "warn", "off")
ALIASES = {"required": "error", "warning": "warn"}
# The identity of an entry: what it changed and when it was recorded (history aside).
IDENTITY = ("id", "seq", "kind", "cls", "recorded", "target", "knob", "before", "after",
            "patch", "sha256")


def parse_checks(node: object, where: str) -> dict[str, str]:
    """The severity of every rule: the defaults overridden by ``checks:`` (``node``);
    an unknown rule or severity is refused naming ``where`` (ledger.yaml at its commit)."""
    out = dict(RULES)
    if node is None:
        return out
    if not isinstance(node, Mapping):
        raise ConfigError(where, "checks must be a mapping of rule: error|warn|off")
    for rule, level in node.items():
        if rule not in RULES:
            fixed = " (unreadable targets are always an error)" if rule in FIXED else ""
            raise ConfigError(where, f"checks: unknown rule {rule!r}{fixed}; rules: "
                                     f"{', '.join(RULES)}")
        level = ALIASES.get(str(level), level) if isinstance(level, str) else level
        if level is False:  # YAML 1.1 reads a bare `off` as false
            level = "off"
        if level not in SEVERITIES:
            raise ConfigError(where, f"checks: {rule}: {node[rule]!r} is no severity "
                                     "(use error, warn or off; required for evidence)")
        out[str(rule)] = level
    return out


def check_range(
    *,
    base: str,
    head: str,
    readings: Sequence[TargetReading],
    base_entries: Sequence[Entry],
    head_entries: Sequence[Entry],
    evidence: Mapping[str, EvidenceView],
    severities: Mapping[str, str],
    class_of: Callable[[str], str | None] = lambda knob: None,
    layout: Layout = Layout(),
    same_ids: frozenset[str] = frozenset(),
) -> Report:
    """Judge the range: every finding, every change, every entry the range touched.

    ``same_ids``: entries the caller knows are stored byte-identical at base and head
    (their lines in entries.jsonl did not change): not compared again."""
    sev = {**RULES, **severities, **FIXED}
    findings: list[Finding] = []

    def add(rule: str, message: str, **kw) -> None:
        if sev[rule] != "off":
            findings.append(Finding(rule, sev[rule], message, **kw))

    before_by_id = {e.id: e for e in base_entries}
    in_range = range_entries(base_entries, head_entries, same_ids)
    explained = _explained(in_range)
    for f in history_findings([e for e in base_entries if e.id not in same_ids], head_entries):
        add("history", f)

    def fix(r: TargetReading, knob: str, before: str | None, after: str | None,
            line: int | None) -> str:
        return record_command(r, knob, before, after, line, class_of(split_place(knob)[0]),
                              layout, knob_layers(head_entries).get((r.name, knob), ()))

    changes: list[Change] = []
    reported: set[tuple[str, str]] = set()
    for r in readings:
        if _comparable(r, add):
            _unledgered_findings(r, explained, add, changes, reported, fix)
            _release_findings(r, in_range, add, changes)

    _state_findings(readings, head_entries, in_range, reported, add)
    places = {r.name: r for r in readings if r.head is not None and not r.error}
    notes, needs_ab = _entry_notes(before_by_id, in_range, evidence, add, places)
    order = {"error": 0, "warn": 1}
    findings.sort(key=lambda f: (order[f.severity], f.path or "", f.line or 0, f.rule))
    return Report(base, head, findings, changes, notes, needs_ab)


def _explained(in_range: Sequence[Entry]) -> dict[tuple[str, str], list[str]]:
    """(target, knob) -> the ids of the range's knob entries on it (a place's key counted
    as its knob): the changes the range explains."""
    by_key: dict[tuple[str, str], list[str]] = {}
    for e in in_range:
        if e.kind != "patch":  # knobs and upgrades (their target's release)
            for t, k in entry_keys(e):
                by_key.setdefault((t, split_place(k)[0]), []).append(e.id)
    return by_key


def _comparable(r: TargetReading, add) -> bool:
    """Whether ``r`` has a base and a head to compare; a file outside the repository or
    one that cannot be read is a finding instead."""
    if r.outside:
        add("outside-repo", f"target {r.name}: {r.outside}: its changes cannot be "
            "compared (the separate-ledger-repo layout sets checks: outside-repo: off)",
            path=r.path, target=r.name)
        return False
    if r.error:
        add("unreadable", f"target {r.name}: {r.error}", path=r.path, target=r.name)
        return False
    return r.base is not None and r.head is not None


def _unledgered_findings(r: TargetReading, explained, add, changes, reported, fix) -> None:
    """Every knob that changed in ``r`` is a :class:`Change`; one no entry of the range
    explains is an ``unledgered`` finding (``reported``), with ``fix``'s command."""
    for knob, before, after, line in knob_changes(r.base, r.head):
        ids = tuple(explained.get((r.name, split_place(knob)[0]), ()))
        change = Change(r.name, r.path, knob, before, after, line, ids)
        changes.append(change)
        if (r.name, split_place(knob)[0]) in explained:
            continue
        reported.add((r.name, knob))
        gone = f" (removed: line {line} of the base)" if after is None and line else ""
        add("unledgered", f"{change.text} in target {r.name} is not in the ledger{gone}",
            path=r.path, line=line, target=r.name, knob=knob, change=change.text,
            fix=fix(r, knob, before, after, line))


def _touched(before: Entry | None, after: Entry) -> bool:
    return before is None or before.to_dict() != after.to_dict()


def knob_changes(base: Side, head: Side) -> list[tuple[str, str | None, str | None, int | None]]:
    """``(key, before, after, line)`` of every key whose value differs, in file order of
    the head (a removed key at its base line)."""
    out = []
    for key in sorted(base.values.keys() | head.values.keys()):
        before, after = base.values.get(key), head.values.get(key)
        if before != after:
            line = head.lines.get(key) if key in head.values else base.lines.get(key)
            out.append((key, before, after, line))
    out.sort(key=lambda c: (c[3] is None, c[3] or 0, c[0]))
    return out


def record_command(r: TargetReading, knob: str, before: str | None, after: str | None,
                   line: int | None, cls: str | None, layout: Layout,
                   layer: Sequence[Entry] = ()) -> str:
    """The command that records a hand edit the file already holds.

    An env knob: ``ledger record knob … --adopt --before B`` (``--before-unset``, ``--unset``
    for a removal; ``--at LINE`` for one place of several).  A launch flag: ``ledger adopt
    TARGET --git REPO --path FILE`` and ``--apply`` of the plan it writes: ``record flag``
    edits the file and has no ``--adopt``, while adopt reads the commits that made the
    change.  The class is the catalog's hint, else ``perf`` (the class that asks for
    evidence: the safe default of a change nobody classified).  A perf change that
    is a revert (a tuning taken out by hand: the inversion trap,
    :mod:`ledger.core.inversion`) gets the command that records it as one
    (``--already-reverted``, or ``ledger revert ID``)."""
    q = shlex.quote
    name, place = split_place(knob)
    if name.startswith("-"):
        plan = f"adopt-{r.name}.yaml"
        return (f"ledger adopt {q(r.name)} --git {q(layout.repo_from_workspace)} --path "
                f"{q(r.path)} && ledger adopt --apply {q(plan)}")
    words = ["ledger", "record", "knob", q(r.name)]
    words.append(q(name) if after is None else q(f"{name}={after}"))
    if after is None:
        words.append("--unset")
    words.append("--adopt")
    words += ["--before-unset"] if before is None else ["--before", q(before)]
    if place is not None and line:
        words += ["--at", str(line)]
    title = f"{name} {value_text(before)} -> {value_text(after)}"
    words += ["--class", cls or "perf", "--title", q(title)]
    trap = inversion(target=r.name, knob=knob, before=before, after=after, cls=cls or "perf",
                     adopt=True, title=f"{name}={before} (taken back by hand)", layer=layer)
    return trap.instead if trap is not None and place is None else " ".join(words)


def history_findings(base: Sequence[Entry], head: Sequence[Entry]) -> list[str]:
    """Where the head's ``entries.jsonl`` rewrote the past of the base's."""
    out = []
    head_by_id = {e.id: e for e in head}
    for old in base:
        new = head_by_id.get(old.id)
        if new is None:
            out.append(f"entry {old.id} ({old.title}) was removed from entries.jsonl: "
                       "the ledger's history is append-only (revert it instead)")
            continue
        changed = [f for f in IDENTITY if getattr(old, f) != getattr(new, f)]
        if changed:
            out.append(f"entry {old.id} ({old.title}): {', '.join(changed)} rewritten "
                       "(an entry's past is never changed: record a new entry)")
        if not _subsequence([a.to_dict() for a in old.history],
                            [a.to_dict() for a in new.history]):
            out.append(f"entry {old.id} ({old.title}): its history was rewritten (an action "
                       "of the base is missing or changed; actions are only appended)")
    return out


def _subsequence(part: list, whole: list) -> bool:
    it = iter(whole)
    return all(any(p == w for w in it) for p in part)


def _mentions(e: Entry, version: str) -> bool:
    return version in e.title or version in e.why


def _release_findings(r: TargetReading, in_range: Sequence[Entry], add, changes) -> None:
    base = dict(r.base.releases) if r.base else {}
    head = dict(r.head.releases) if r.head else {}
    if set(base) == set(head):
        return
    before = ", ".join(sorted(base)) or None
    after = ", ".join(sorted(head)) or None
    line = min((ln for s, ln in head.items() if s not in base), default=None) or \
        min(base.values(), default=None)
    new_versions = [s.split("==", 1)[1] for s in head if s not in base]
    ids = tuple(e.id for e in in_range if r.name in e.targets
                and (e.kind == "upgrade" or any(_mentions(e, v) for v in new_versions)))
    change = Change(r.name, r.path, "engine release", before, after, line, ids)
    changes.append(change)
    if ids or not new_versions:
        return
    add("release", f"{change.text} in target {r.name} has no entry: the engine release "
        "changed outside the ledger", path=r.path, line=line, target=r.name,
        knob="engine release", change=change.text,
        fix=_adopt_upgrade(r.name, base, head) or
            f"record it: an entry on {r.name} in this range whose title names "
            f"{new_versions[0]} (the upgrade's knob changes), or take the release back")


def _adopt_upgrade(target: str, base: dict, head: dict) -> str:
    """The command that records a release bump made in the file as an upgrade entry, where
    the file names one release on each side."""
    if len(base) != 1 or len(head) != 1:
        return ""
    (before,), (after,) = base, head
    if before.split("==")[0] != after.split("==")[0]:
        return ""
    return (f"record it: `ledger record upgrade {target} --adopt --before {before} --to "
            f"{after} --class perf|bugfix --title ...`, or take the release back")


def _state_findings(readings, head_entries, in_range, reported, add) -> None:
    touched = {r.name for r in readings if r.changed}
    touched |= {t for e in in_range if e.kind != "patch" for t in e.targets}
    heads = {r.name: r for r in readings if r.head is not None and not r.error}
    owners: dict[tuple[str, str], list[str]] = {}
    for e in head_entries:
        if e.kind != "patch":
            for key in entry_keys(e):
                owners.setdefault(key, []).append(e.id)
    for (target, key), expected in expected_knobs(head_entries).items():
        r = heads.get(target)
        if r is None or target not in touched or (target, key) in reported:
            continue
        if (target, split_place(key)[0]) in reported:
            continue
        found = r.head.live(key)
        if found == expected:
            continue
        line = r.head.lines.get(key) or r.head.lines.get(split_place(key)[0])
        ids = owners.get((target, key), [])
        add("state", f"target {target}: {key} is {value_text(found)} in the file at head, the "
            f"ledger expects {value_text(expected)} (entries {', '.join(ids)})",
            path=r.path, line=line, target=target, knob=key,
            change=f"{key}: {value_text(expected)} (ledger) vs {value_text(found)} (file)",
            fix="make the file and the ledger agree: record the change through the ledger, "
                "or take the hand edit back (`ledger status` shows both)",
            entry=ids[-1] if ids else None)


def _entry_notes(before_by_id, in_range, evidence, add, places
                 ) -> tuple[list[EntryNote], list[Entry]]:
    notes, needs_ab = [], []
    for e in in_range:
        old = before_by_id.get(e.id)
        if old is None:
            what = "added"
        elif old.state == "reverted" and e.state == "applied":
            what = "restored"
        elif old.state == "applied" and e.state == "reverted":
            what = "reverted"
        else:
            what = "changed"
        ev = evidence.get(e.id)
        notes.append(EntryNote(e, what, ev))
        if e.cls != "perf" or e.state != "applied" or what not in ("added", "restored"):
            continue
        where = f"entry {e.id} ({e.title})"
        r = places.get(e.target or "")
        at = {"path": r.path, "line": r.head.lines.get(e.knob or "")} if r else {}
        if ev is None or ev.verdict is None:
            needs_ab.append(e)
            add("evidence", f"{where}: a perf change {what} without evidence",
                entry=e.id, target=e.target, knob=e.knob, **at,
                fix=f"ledger ab {e.id}  (or: ledger evidence add {e.id} FILE... --side A|B)")
        elif ev.verdict == "regression":
            add("evidence", f"{where}: its evidence says regression: {ev.headline}",
                entry=e.id, target=e.target, knob=e.knob, **at,
                fix=f"take it back (ledger revert {e.id}), or measure again (ledger ab {e.id})")
        if ev is not None and ev.stale_why:
            needs_ab.append(e)
            add("stale-evidence", f"{where}: its evidence is stale ({'; '.join(ev.stale_why)})",
                entry=e.id, target=e.target, knob=e.knob, **at, fix=f"ledger ab {e.id}")
    return notes, needs_ab


def range_entries(base: Iterable[Entry], head: Iterable[Entry],
                  same_ids: frozenset[str] = frozenset()) -> list[Entry]:
    """The head's entries the range added or changed (``same_ids``: known unchanged)."""
    before = {e.id: e for e in base}
    return [e for e in head if e.id not in same_ids and _touched(before.get(e.id), e)]


__all__ = ["RULES", "check_range", "history_findings", "knob_changes", "parse_checks",
           "range_entries", "record_command"]
