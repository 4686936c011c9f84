"""`ledger adopt --apply PLAN`: the kept proposals of an edited plan, recorded as entries.

All of them or none: every proposal is checked first (its class, title and dates; that
its ``before`` is what the ledger has in effect before it; that, with all of them
recorded, the ledger expects what the file holds now; that no applied perf proposal is
a revert, the inversion trap), then one transaction (ledger.store.apply) writes
``entries.jsonl`` and makes one workspace commit.  A kill at any instant leaves the
ledger as it was or with every entry (the transaction's intent record, as for every
command).  Nothing is written to a target: the file already holds the outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.core import planner
from ledger.core.display import value_text
from ledger.core.model import Action
from ledger.core.model import Entry
from ledger.core.model import check_class
from ledger.core.model import slugify
from ledger.core.when import parse_when
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.errors import Refused

_FIELDS = ("n", "keep", "class", "title", "why", "knob", "before", "after", "when", "origin")


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
        raise InvalidValue(f"{path}: not a ledger adopt plan (no 'adopt: {PLAN_VERSION}')")
    proposals = data.get("proposals")
    if not isinstance(proposals, list) or not all(isinstance(p, dict) for p in proposals):
        raise InvalidValue(f"{path}: 'proposals' must be a list of mappings")
    for i, p in enumerate(proposals, 1):
        missing = [f for f in _FIELDS if f not in p]
        if missing:
            raise InvalidValue(f"{path}: proposal {p.get('n', i)} lacks {', '.join(missing)}")
    return data


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _entry(s, plan_path: Path, p: dict, *, target: str, eid: str, seq: int,
           taken: list[Entry]) -> Entry:
    """One kept proposal as an entry: adopted at its date, reverted at its revert's."""
    where = f"{plan_path}: proposal {p['n']} ({p['knob']})"
    if p.get("class") not in ("perf", "bugfix"):
        raise InvalidValue(f"{where}: class must be perf or bugfix, not "
                           f"{value_text(_text(p.get('class')))}")
    title = str(p.get("title") or "").strip()
    if not title:
        raise InvalidValue(f"{where}: the title is empty")
    when = parse_when(str(p["when"]), s.now, f"{where}: when")
    why = str(p.get("why") or "")
    history = [Action(at=s.now, action="adopt", why=why, command=s.command, when=when)]
    fields: dict[str, Any] = {}
    back = p.get("reverted")
    if back is not None:
        fields = _reverted(s, where, back, when, history)
    slug = planner.unique_slug(taken, slugify(title))
    before, after = _text(p["before"]), _text(p["after"])
    lines = _lines(where, p)
    anchor = p.get("anchor") if isinstance(p.get("anchor"), dict) else None
    try:
        return Entry(id=eid, seq=seq, kind="knob", cls=check_class(p["class"]), title=title,
                     slug=slug, recorded=s.now, why=why, target=target, knob=str(p["knob"]),
                     before=before, after=after, anchor=anchor,
                     after_lines=lines if before is None else None,
                     before_lines=lines if after is None else None,
                     origin=str(p.get("origin") or "") or None, history=tuple(history),
                     **fields)
    except LedgerError as e:
        raise InvalidValue(f"{where}: {e}") from e


def _lines(where: str, p: dict) -> str | None:
    """The knob's lines as read from the copy (a restore writes them back): refused when
    edited, since nothing but the copy vouches for them."""
    from ledger.commands.adopt import lines_digest

    lines = _text(p.get("lines"))
    if lines is not None and p.get("lines_sha256") != lines_digest(lines):
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


def plan_entries(s, plan_path: Path, plan: dict, existing) -> list[Entry]:
    """The kept proposals as new entries, after every existing one, in the plan's order."""
    from ledger.store.workspace import new_entry_id

    kept = [p for p in plan["proposals"] if p.get("keep") is not False]
    if not kept:
        raise Refused(f"{plan_path}: no proposal is kept: nothing to adopt")
    seq = planner.next_seq(existing)
    out: list[Entry] = []
    for i, p in enumerate(kept):
        eid = new_entry_id(e.id for e in [*existing, *out])
        out.append(_entry(s, plan_path, p, target=str(plan["target"]), eid=eid, seq=seq + i,
                          taken=[*existing, *out]))
    return out


def check_chain(plan_path: Path, tf, existing, new: list[Entry],
                not_a_revert: frozenset[str] = frozenset()) -> None:
    """Each new entry's before is what the ledger has in effect before it, no applied perf
    entry is a revert (but those in ``not_a_revert``: the plan says ``not_a_revert: true``),
    and with all recorded the ledger expects what the file holds."""
    from ledger.commands.catalog import name_defaults
    from ledger.core.inversion import inversion

    so_far = list(existing)
    for e in new:
        layer = planner.knob_layers(so_far).get((e.target, e.knob))
        where = f"{plan_path}: {e.knob} ({e.title})"
        if layer and planner.layer_value(layer) != e.before:
            raise Refused(f"{where}: its before is {value_text(e.before, quote=True)}, but "
                          f"the ledger has {value_text(planner.layer_value(layer), quote=True)} "
                          "in effect before it: keep the proposal that made that value, or "
                          "leave this one out")
        if e.applied and e.id not in not_a_revert:
            default = name_defaults(tf.target.engine, [e.knob]).get(e.knob)
            found = inversion(target=e.target, knob=e.knob, before=e.before, after=e.after,
                              cls=e.cls, adopt=True, title=e.title, layer=layer or (),
                              default=default)
            if found is not None:
                raise Refused(f"{where}: this perf change is a revert; in the plan, give "
                              "the proposal it takes back `reverted:` (or write "
                              "`not_a_revert: true` if the removal is itself the change)\n"
                              + found.message(e.knob))
        so_far.append(e)
    for (target, knob), layer in planner.knob_layers(so_far).items():
        if target != tf.target.name or not any(e in layer for e in new):
            continue
        if planner.layer_value(layer) != tf.live(knob):
            raise Refused(f"{plan_path}: with the kept proposals the ledger would expect "
                          f"{knob} = {value_text(planner.layer_value(layer), quote=True)} in "
                          f"{tf.path}, which holds {value_text(tf.live(knob), quote=True)}: "
                          "keep the proposals up to that value (or run adopt again)")


def apply_adopt(s, plan_path: str, dry_run: bool = False):
    """``ledger adopt --apply PLAN``: the kept proposals recorded, all or none."""
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
        new = plan_entries(s, path, plan, existing)
        kept = [p for p in plan["proposals"] if p.get("keep") is not False]
        check_chain(path, tf, existing, new, frozenset(
            e.id for e, p in zip(new, kept) if p.get("not_a_revert") is True))
        body = "".join(f"- {e.id} [{e.cls}] {e.title}\n" for e in new)
        dates = when_trailers([a for e in new for a in e.history])
        message = (f"adopt {len(new)} entr{'y' if len(new) == 1 else 'ies'} into {t.name} "
                   f"from {plan.get('source') or path.name}\n\n{body}{dates}")
        return apply_plan(s.ws, planner.Plan("adopt", (), added=tuple(new)), command=s.command,
                          now=s.now, message=message, dry_run=dry_run, files={t.name: tf})


__all__ = ["apply_adopt", "check_chain", "load_plan", "plan_entries"]
