"""`ledger adopt --apply PLAN`: the kept changes of an edited plan, recorded as entries.

All of them or none.  Every proposal and change is checked first, and **every problem is
reported in one run**, like a compiler (its class, title and dates; ``revert_of``; that
each change's ``before`` is what the ledger has in effect before it; that, with all of
them recorded, the ledger expects what the file holds now; in a plan read from backup
copies, that no applied perf change is a revert — issue 27's inversion trap).  Then one
transaction (ledger.store.apply) writes ``entries.jsonl`` and makes one workspace commit,
whose message also lists the history-only changes (``record: false``).  A kill at any
instant leaves the ledger as it was or with every entry.  Nothing is written to a target.

A change inside a branch (``where: DP_ATTENTION == true``) becomes an entry of that place
of the live file (as ``record knob --at LINE`` makes one).  ``revert_of: N`` on a change
marks proposal N's change of the same knob (and those stacked on it) reverted by it,
instead of recording it as a change of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.core import layers
from ledger.core import planner
from ledger.core.action import Action
from ledger.core.display import value_text
from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.identifiers import check_class
from ledger.core.identifiers import slugify
from ledger.core.model import Entry
from ledger.core.when import parse_when
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.errors import Refused

_FIELDS = ("n", "keep", "class", "title", "why", "when", "origin", "changes")
_CHANGE_FIELDS = ("knob", "before", "after")


class PlanProblems(Refused):
    """Every problem of a plan, found in one pass."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path, self.problems = path, problems
        super().__init__(str(self))

    def __str__(self) -> str:
        n = len(self.problems)
        return (f"{self.path}: {n} problem{'s' if n != 1 else ''}; nothing recorded:\n"
                + "\n".join(f"  - {p.removeprefix(f'{self.path}: ')}" for p in self.problems))


def load_plan(path: Path) -> dict[str, Any]:
    """The plan file, checked for shape (``error:`` names the file and the proposal)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from ledger.commands.adopt import PLAN_VERSION

    try:
        data = YAML(typ="safe").load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidValue(f"{path}: no such plan file") from None
    except (OSError, UnicodeDecodeError, YAMLError) as e:
        raise InvalidValue(f"{path}: not a readable adopt plan: {e}") from e
    if not isinstance(data, dict) or data.get("adopt") != PLAN_VERSION:
        raise InvalidValue(f"{path}: not a ledger adopt plan (no 'adopt: {PLAN_VERSION}'; "
                           "a plan of an older ledger: run adopt again)")
    proposals = data.get("proposals")
    if not isinstance(proposals, list) or not all(isinstance(p, dict) for p in proposals):
        raise InvalidValue(f"{path}: 'proposals' must be a list of mappings")
    problems = []
    for i, p in enumerate(proposals, 1):
        missing = [f for f in _FIELDS if f not in p]
        if missing:
            problems.append(f"proposal {p.get('n', i)} lacks {', '.join(missing)}")
        elif not isinstance(p["changes"], list) or not all(
                isinstance(c, dict) and all(f in c for f in _CHANGE_FIELDS) for c in p["changes"]):
            problems.append(f"proposal {p.get('n', i)}: each change needs knob, before, after")
    if problems:
        raise PlanProblems(path, problems)
    if not isinstance(data.get("data") or {}, dict):
        raise InvalidValue(f"{path}: 'data' must be a mapping")
    return data


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class _Reader:
    """Builds the entries of a plan, keeping every problem it meets."""

    def __init__(self, s, path: Path, plan: dict, existing) -> None:
        self.s, self.path, self.plan, self.existing = s, path, plan, existing
        self.tf = None  # the live target file (what an upgrade entry's plan is made of)
        self.problems: list[str] = []
        self.data = plan.get("data") or {}
        self.history_only: list[str] = []
        self.seen: set[tuple] = set()

    def where(self, p: dict, c: dict | None = None) -> str:
        return f"proposal {p.get('n')}" + (f" ({c.get('knob')})" if c is not None else "")

    def once(self, key: tuple, problem: str) -> None:
        """A problem of a whole proposal (its class, its title), named once, by its first
        change."""
        if key not in self.seen:
            self.seen.add(key)
            self.problems.append(problem)

    def check(self, fn, *args):
        try:
            return fn(*args)
        except LedgerError as e:
            self.problems.append(str(e))
            return None

    def entries(self) -> list[tuple[Entry, dict]]:
        proposals = self.plan["proposals"]
        self._revert_ofs(proposals)
        out: list[tuple[Entry, dict]] = []
        seq = planner.next_seq(self.existing)
        for p in proposals:
            if p.get("keep") is False:
                continue
            for i, c in enumerate(p["changes"], 1):
                if c.get("keep") is False or c.get("_taken") is True:
                    continue
                if c.get("record") is False:
                    self.history_only.append(
                        f"{c['knob']}{' ' + str(c['where']) if c.get('where') else ''}: "
                        f"{value_text(_text(c['before']))} -> {value_text(_text(c['after']))}"
                        f" ({p.get('origin')})")
                    continue
                from ledger.store.workspace import new_entry_id

                taken = [*self.existing, *(e for e, _ in out)]
                e = self.check(self._entry, p, c, self.data.get(f"{p['n']}.{i}") or {},
                               new_entry_id(x.id for x in taken), seq + len(out), taken)
                if e is not None:
                    out.append((e, c))
        if not out and not self.problems:
            self.problems.append("no change is kept: nothing to adopt")
        return out

    def _revert_ofs(self, proposals: list[dict]) -> None:
        """``revert_of: N``: proposal N's change of this knob (and those after it) reverted
        by this change, which is no entry of its own."""
        by_n = {p.get("n"): p for p in proposals}
        for p in proposals:
            for c in p["changes"]:
                n = c.get("revert_of")
                if n is None:
                    continue
                target = by_n.get(n)
                key = (c["knob"], c.get("where"))
                if target is None or not any((o["knob"], o.get("where")) == key
                                             for o in target["changes"]):
                    self.problems.append(f"{self.where(p, c)}: revert_of: {n} names no "
                                         f"proposal that changed {c['knob']}")
                    continue
                stacked = [o for q in proposals if q.get("n") in range(n, p["n"])
                           for o in q["changes"] if (o["knob"], o.get("where")) == key
                           and o is not c and not o.get("reverted")]
                for o in stacked:
                    o["reverted"] = {"when": c.get("when") or p["when"], "origin": p["origin"],
                                     "why": f"{p['title']} ({p['origin']})", "suspected": False}
                c["_taken"] = True

    def _entry(self, p: dict, c: dict, data: dict, eid: str, seq: int, taken) -> Entry:
        where = f"{self.path}: {self.where(p, c)}"
        # a missing class or title is named, and the change still checked against the
        # others (its before, the file), so one run names every problem
        cls = p.get("class")
        if cls not in ("perf", "bugfix"):
            self.once((p.get("n"), "class"), f"{where}: class must be perf or bugfix, not {value_text(_text(cls))}"
                      + (f" ({p['class_from']})" if p.get("class_from") else ""))
            cls = "bugfix"
        title = str(p.get("title") or "").strip()
        if not title:
            self.once((p.get("n"), "title"), f"{where}: the title is empty")
            title = "untitled"
        s = self.s
        when = parse_when(str(c.get("when") or p["when"]), s.now, f"{where}: when")
        why = str(p.get("why") or "")
        history = [Action(at=s.now, action="adopt", why=why, command=s.command, when=when)]
        fields: dict[str, Any] = {}
        if c.get("reverted") is not None:
            fields = _reverted(s, where, c["reverted"], when, history)
        before, after = _text(c["before"]), _text(c["after"])
        lines = _lines(where, data)
        anchor = data.get("anchor") if isinstance(data.get("anchor"), dict) else None
        if c.get("where"):
            place = data.get("place")
            if not isinstance(place, dict) or not place.get("key"):
                raise InvalidValue(f"{where}: no place of the live file for where: "
                                   f"{c['where']} (run adopt again)")
            fields["places"] = {str(place["key"]): {
                "line": place.get("line"), "before": before, "raw": place.get("raw"),
                "anchor": place.get("anchor")}}
            lines, anchor = None, None
        kind, extra = "knob", {}
        if c["knob"] == RELEASE_KNOB:  # an image tag / pin bump: an upgrade entry
            from ledger.commands.upgrade import upgrade_fields

            kind, lines, anchor = "upgrade", None, None
            extra = self.check(upgrade_fields, self.s.ws, self.tf, before, after) or {}
        try:
            return Entry(id=eid, seq=seq, kind=kind, cls=check_class(cls), **extra,
                         title=title, slug=planner.unique_slug(taken, slugify(title)), why=why,
                         recorded=s.now, target=str(self.plan["target"]), knob=str(c["knob"]),
                         before=before, after=after, anchor=anchor,
                         after_lines=lines if before is None else None,
                         before_lines=lines if after is None else None,
                         origin=str(p.get("origin") or "") or None, history=tuple(history),
                         **fields)
        except LedgerError as e:
            raise InvalidValue(f"{where}: {e}") from e


def _lines(where: str, data: dict) -> str | None:
    """The knob's lines as read from the copy (a restore writes them back): refused when
    edited, since nothing but the copy vouches for them."""
    from ledger.commands.adopt.changes import lines_digest

    lines = _text(data.get("lines"))
    if lines is not None and data.get("lines_sha256") != lines_digest(lines):
        raise InvalidValue(f"{where}: its lines were edited; remove `lines` (the format then "
                           "writes the knob's line) or put them back as read")
    return lines


def _reverted(s, where: str, back: Any, when: str, history: list[Action]) -> dict:
    if not isinstance(back, dict):
        raise InvalidValue(f"{where}: 'reverted' must be a mapping (when, origin, why)")
    back_when = parse_when(str(back.get("when") or ""), s.now, f"{where}: reverted when")
    if back_when < when:
        raise InvalidValue(f"{where}: reverted at {back_when}, before it was made ({when})")
    why = str(back.get("why") or "").strip() or "reverted by hand"
    suspected = back.get("suspected") is True
    history.append(Action(at=s.now, action="suspect" if suspected else "revert", why=why,
                          command=s.command, when=back_when))
    if suspected:
        return {"state": "reverted", "suspicion": "suspected", "suspect_why": why}
    return {"state": "reverted"}


def check_chain(plan_path: Path, tf, existing, new: list[Entry], inversions: bool = True,
                not_a_revert: frozenset[str] = frozenset()) -> list[str]:
    """Every problem of the chain: an entry whose before is not what the ledger has in
    effect before it; (``inversions``: a plan from backup copies) an applied perf entry
    that is a revert (but those in ``not_a_revert``); a knob the ledger, with all
    recorded, would expect otherwise than the file holds."""
    from ledger.commands.catalog import name_defaults
    from ledger.core.identifiers import place_knob
    from ledger.core.inversion import inversion

    problems = []
    so_far = list(existing)
    for e in new:
        key = place_knob(e.knob, next(iter(e.places))) if e.places else e.knob
        layer = layers.knob_layers(so_far).get((e.target, key))
        where = f"{plan_path}: {e.knob} ({e.title})"
        if layer and layers.layer_value(layer) != e.before:
            problems.append(
                f"{where}: its before is {value_text(e.before, quote=True)}, but the ledger "
                f"has {value_text(layers.layer_value(layer), quote=True)} in effect before "
                "it: keep the proposal that made that value, or leave this one out")
        if inversions and e.applied and e.id not in not_a_revert and not e.places \
                and e.kind == "knob":
            default = name_defaults(tf.target.engine, [e.knob]).get(e.knob)
            found = inversion(target=e.target, knob=e.knob, before=e.before, after=e.after,
                              cls=e.cls, adopt=True, title=e.title, layer=layer or (),
                              default=default)
            if found is not None:
                problems.append(f"{where}: this perf change is a revert; in the plan, give "
                                "the change it takes back `reverted:` (or write "
                                "`not_a_revert: true` if the removal is itself the change)\n"
                                + found.message(e.knob))
        so_far.append(e)
    for (target, knob), layer in layers.knob_layers(so_far).items():
        if target != tf.target.name or not any(e.id in {n.id for n in new} for e in layer):
            continue
        if layers.layer_value(layer) != tf.live(knob):
            problems.append(
                f"{plan_path}: with the kept changes the ledger would expect {knob} = "
                f"{value_text(layers.layer_value(layer), quote=True)} in {tf.path}, which "
                f"holds {value_text(tf.live(knob), quote=True)}: keep the changes up to "
                "that value (or run adopt again)")
    return problems


def apply_adopt(s, plan_path: str, dry_run: bool = False):
    """``ledger adopt --apply PLAN``: the kept changes recorded, all or none; every
    problem of the plan reported at once.  Returns what was applied and the history-only
    changes (written into the commit message)."""
    from ledger.commands.record import when_trailers
    from ledger.commands.session import writing
    from ledger.store.apply import apply_plan
    from ledger.store.targets import read_target

    path = Path(plan_path)
    plan = load_plan(path)
    with writing(s, dry_run):
        t = s.ws.target(str(plan["target"]))
        tf = read_target(s.ws, t)
        existing = s.ws.entries()
        reader = _Reader(s, path, plan, existing)
        reader.tf = tf
        pairs = reader.entries()
        new = [e for e, _ in pairs]
        problems = [f"{path}: {p}" if not p.startswith(str(path)) else p
                    for p in reader.problems]
        problems += check_chain(path, tf, existing, new,
                                inversions=plan.get("source") == "backup copies",
                                not_a_revert=frozenset(e.id for e, c in pairs
                                                       if c.get("not_a_revert") is True))
        if problems:
            raise PlanProblems(path, problems)
        body = "".join(f"- {e.id} [{e.cls}] {e.title}\n" for e in new)
        body += "".join(f"- history only: {h}\n" for h in reader.history_only)
        dates = when_trailers([a for e in new for a in e.history])
        message = (f"adopt {len(new)} entr{'y' if len(new) == 1 else 'ies'} into {t.name} "
                   f"from {plan.get('source') or path.name}\n\n{body}{dates}")
        applied = apply_plan(s.ws, planner.Plan("adopt", (), added=tuple(new)),
                             command=s.command, now=s.now, message=message, dry_run=dry_run,
                             files={t.name: tf})
        return applied, reader.history_only


__all__ = ["PlanProblems", "apply_adopt", "check_chain", "load_plan"]
