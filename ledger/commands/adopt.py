"""`ledger adopt`: bring in the history an operator already has, as entries.

``ledger adopt TARGET BACKUP_OR_DIR...`` (or ``--git REPO --path FILE``) reads the
versions of the target's file (ledger.commands.adopt_find), proposes one entry per knob
change between them (ledger.core.adopt) and writes the proposals as a plan file the
operator edits: class, title, why, dates, ``keep: false`` to leave one out.  ``ledger adopt
--apply PLAN`` records the kept proposals as entries, all of them in one transaction and
one workspace commit or none, each with its real dates and its origin (the backup copies
or the commit).  Nothing is written to a target, by either step: the file already holds
the outcome, and a proposal the file does not agree with is refused.

Decisions (the issue is silent): a proposal's class is the catalog's hint for the knob
(a liveness knob is a bugfix), else left empty for the operator to fill (``--apply``
refuses an empty one); a proposal for a knob the ledger already manages starts kept out
(``keep: false``, with the entries named), since the ledger's history of it comes first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from typing import Sequence

from ledger.commands.adopt_find import Copy
from ledger.core.adopt import Proposal
from ledger.core.adopt import Version
from ledger.core.adopt import propose
from ledger.errors import LedgerError
from ledger.errors import Refused
from ledger.errors import UsageError

PLAN_VERSION = 1
PLAN_HEADER = """\
# ledger adopt plan for target {target} ({path}), read from {source}.
# One proposal per knob change found.  Edit class (perf or bugfix), title, why and the
# dates; set keep: false to leave a proposal out.  A proposal with `reverted:` was taken
# back later (by hand, or by a commit): it goes into the ledger reverted, off the table,
# and `ledger restore` claws it back (`suspected: true` there holds it as a suspect).
# Then:  ledger adopt --apply {plan}
# Nothing is written to a target, now or by --apply: only the ledger learns.
"""


def propose_adopt(ws, target: str, backups: Sequence[str] = (), git: str | None = None,
                  path: str | None = None) -> dict[str, Any]:
    """The plan of entries that the versions of ``target``'s file propose."""
    from ledger.commands.adopt_find import backup_copies
    from ledger.commands.adopt_find import commit_copies
    from ledger.commands.adopt_find import mtime_of
    from ledger.commands.adopt_find import refuse_strangers
    from ledger.store.targets import read_target

    if bool(backups) == bool(git):
        raise UsageError("give backup files or directories, or --git REPO --path FILE")
    if git and not path:
        raise UsageError("--git needs --path FILE (the managed file's path in the repo)")
    t = ws.target(target)
    tf = read_target(ws, t)
    notes: list[str] = []
    if git:
        copies, notes = commit_copies(t, Path(git), str(path))
        source = f"the commits of {git} ({path})"
    else:
        copies, source = backup_copies(t, tf.path, backups), "backup copies"
        refuse_strangers(copies, tf.text, t.name)
    good = [c for c in copies if not c.skipped]
    skipped = [f"{c.origin}: {c.skipped}" for c in copies
               if c.skipped and c.dated != "deleted"]
    if not good:
        raise Refused(f"no version of {tf.path} to read history from"
                      + "".join(f"\n  skipped {s}" for s in skipped))
    # an old path whose history ends in its deletion is not compared with today's file
    gone = bool(copies) and copies[-1].dated == "deleted"
    live = [] if gone else [Copy(f"{tf.path.name} (live)", mtime_of(tf.path), tf.text, tf,
                                 dated="live")]
    versions = _versions([*good, *live], by_commit=bool(git))
    found = propose(versions)
    copies_of = [*good, *live]
    layers = _managed(ws, t.name)
    return {
        "adopt": PLAN_VERSION, "target": t.name, "path": str(tf.path), "source": source,
        "history": notes, "skipped": skipped, "unclear": found.unclear,
        "proposals": [_proposal(n, p, versions, copies_of, layers, bool(git))
                      for n, p in enumerate(found.items, 1)],
    }


def _versions(copies: Sequence[Copy], by_commit: bool) -> list[Version]:
    """The copies as versions, each dated by when the change that made it was made, and
    saying which timestamp that is (the plan shows it as ``dated_by``):

    * a commit: its author date;
    * after a backup whose *name* holds a date (``cp f f.bak.$(date +%Y%m%d-%H%M)``, taken
      just before the edit): that date;
    * after a backup dated by its *mtime* (``sed -i.bak``, ``perl -i.bak``, an editor's
      ``~``: the original is renamed, so the backup keeps the *old* file's time): the
      newer file of the pair, when its own mtime is its time (the live file, or another
      such backup) — the time the edit wrote it (issue 53: a ``sed -i.bak`` revert at
      14:14 whose .bak says 13:55 is dated 14:14);
    * else (the newer file is a copy dated by its name, which says when it was copied,
      not written) the older file's mtime, the best bound there is.
    """
    if by_commit:
        return [c.version(c.when, f"author date of {c.origin}") for c in copies]
    out = []
    for i, c in enumerate(copies):
        older = copies[max(i - 1, 0)]
        if older.dated == "mtime" and c.dated in ("mtime", "live") and i > 0:
            when, by = c.when, (f"mtime of {c.origin}, the newer file of the pair "
                                f"({older.origin} kept the old file's time)")
        else:
            when, by = older.when, f"{'name' if older.dated == 'name' else 'mtime'} of " \
                                   f"{older.origin}"
        out.append(c.version(when, by))
    return out


def _managed(ws, target: str) -> dict[str, list[str]]:
    from ledger.core import planner

    return {knob: [e.id for e in layer]
            for (t, knob), layer in planner.knob_layers(ws.entries()).items() if t == target}


def _proposal(n: int, p: Proposal, versions, copies: Sequence[Copy],
              managed: dict[str, list[str]], by_commit: bool) -> dict[str, Any]:
    from ledger.commands.catalog import catalog_class

    origin = versions[p.made_in].origin if by_commit else \
        f"{versions[p.made_in - 1].origin} -> {versions[p.made_in].origin}"
    if by_commit:
        origin += f" by {p.author}: {p.subject}"
    title = p.subject if by_commit and p.subject else _title(p.knob, p.after)
    d: dict[str, Any] = {"n": n, "keep": p.knob not in managed,
                         "class": catalog_class(p.knob), "title": title, "why": "",
                         "knob": p.knob, "before": p.before, "after": p.after,
                         "when": p.when, "dated_by": versions[p.made_in].dated_by,
                         "origin": origin}
    if p.knob in managed:
        d["note"] = f"the ledger already has {p.knob}: {', '.join(managed[p.knob])}"
    d.update(_lines_of(p, copies))
    if p.reverted is None and d["class"] == "perf" and _is_a_revert(p, versions):
        return _taken_back(d, p, versions[0].when)
    if p.reverted is not None:
        r = p.reverted
        back = f"{r['origin']} by {r['author']}: {r['subject']}" if by_commit else \
            f"{r['from']} -> {r['origin']}"
        why = f"{r['subject']} ({r['origin']})" if by_commit else f"reverted by hand ({back})"
        d["reverted"] = {"when": r["when"], "dated_by": r["dated_by"], "origin": back,
                         "why": why, "suspected": False}
    return d


def _title(knob: str, after: str | None) -> str:
    return f"unset {knob}" if after is None else f"{knob}={after}"


def _is_a_revert(p: Proposal, versions) -> bool:
    """A perf knob removed (or set back to its default) where no proposal made it: the
    tuning predates the first version, and this change took it back (the inversion trap:
    ledger.core.inversion)."""
    from ledger.core.inversion import inversion

    return inversion(target="", knob=p.knob, before=p.before, after=p.after, cls="perf",
                     adopt=True, title="", default=_default(p.knob)) is not None


def _default(knob: str):
    from ledger.commands.catalog import name_defaults

    return name_defaults(None, [knob]).get(knob)


def _taken_back(d: dict[str, Any], p: Proposal, first: str) -> dict[str, Any]:
    """The change proposed as what it is: the older value, made before the first version
    (dated with it), reverted by this change — off the table, as ``--already-reverted``
    records it."""
    d = {**d, "before": p.after, "after": p.before, "when": first,
         "dated_by": "the first version's date (made before it)",
         "title": _title(p.knob, p.before),
         "reverted": {"when": p.when, "dated_by": d["dated_by"], "origin": d["origin"],
                      "why": f"reverted ({d['origin']})", "suspected": False},
         "note": "made before the first version and taken back here; if taking it out was "
                 "itself the perf change, swap before and after, drop `reverted:` and write "
                 "`not_a_revert: true`"}
    return d  # its lines (removed here) are what a restore puts back


def _lines_of(p: Proposal, copies: Sequence[Copy]) -> dict[str, Any]:
    """The knob's exact lines in the version that held it (an added knob: what a restore
    after a revert puts back, inline comment and all; a removed one: what its revert
    puts back) and where they sit."""
    from ledger.core.layout import inserted_block
    from ledger.store.targets import anchor_in
    from ledger.store.targets import edit_target

    if (p.before is None) == (p.after is None):
        return {}
    holder = copies[p.held_in] if p.before is None else copies[p.made_in - 1]
    try:
        without = edit_target(holder.tf, {p.knob: None}).decode("utf-8", "surrogateescape")
    except LedgerError:  # a copy the format cannot edit: the lines as the format writes them
        return {}
    lines = inserted_block(without, holder.text)
    anchor = anchor_in(holder.tf, holder.text, p.knob, None)
    out = {k: v for k, v in (("lines", lines), ("anchor", anchor)) if v is not None}
    if lines is not None:  # they are written back on a restore: an edit of them is refused
        out["lines_sha256"] = lines_digest(lines)
    return out


def lines_digest(lines: str) -> str:
    import hashlib

    return hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()


def write_plan(plan: dict[str, Any], out: Path, force: bool = False) -> Path:
    """Write ``plan`` to ``out`` as commented YAML, atomically; an existing file is kept
    unless ``force`` (it may hold the operator's edits)."""
    from ledger.evidence.store import dump_yaml

    out = Path(out)
    if out.exists() and not force:
        raise Refused(f"{out} exists (it may hold your edits): give --out another path, "
                      "or --force to replace it")
    header = PLAN_HEADER.format(target=plan["target"], path=plan["path"],
                                source=plan["source"], plan=out)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(header + dump_yaml(plan))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    return out


__all__ = ["PLAN_VERSION", "propose_adopt", "write_plan"]
