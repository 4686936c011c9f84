"""`ledger adopt`: bring in the history an operator already has, as entries.

``ledger adopt TARGET BACKUP_OR_DIR...`` (or ``--git REPO --path FILE``) reads the
versions of the target's file (ledger.commands.adopt.find), finds every knob change
between them (ledger.core.adopt) and writes a plan the operator edits: **one proposal per
commit** (or per backup pair) holding its changes, with one class, title and why
(``--per-knob``: one proposal per change).  ``ledger adopt --apply PLAN`` records the kept
changes as entries, all of them in one transaction and one workspace commit or none, each
with its real dates and its origin.  Nothing is written to a target, by either step.

Decisions (the issue is silent, or leaves them to us):

* **Class**: a commit subject that says ``fix`` (``fix:``, ``hotfix``, ``bugfix``) makes a
  bugfix; else the catalog's class hints of the changed knobs, where they agree (a
  liveness knob is a bugfix); else left empty, and ``class_from`` says why (``--apply``
  names every empty one at once).
* **Reverts** (ledger.core.adopt): in a commit history a return to an earlier value is a
  revert only in a ``git revert`` (subject ``Revert "…"``) or a file that returns byte for
  byte to an earlier version; any other removal or return is a change of its own, and
  the change names the proposal it may take back (``revert_of: null`` — write its number
  if it is one).  Backup copies have no subject: every return there is a revert (the hand
  ``sed`` of issue 27).
* **Changes the ledger cannot hold as a knob value** — a shell expression
  (``$((8192 * TP))``), a place in a branch the live file no longer has — are proposed
  with ``record: false`` and the reason: ``--apply`` writes them into the adopt commit's
  message (the audit trail) but makes no entry, since no entry could be checked against
  the file.  The whole chain of such a knob is history only, so what is recorded still
  layers to what the file holds.
* A knob the ledger already manages starts kept out (``keep: false``, its entries named).
* The plan puts what is read and edited first; the exact lines and anchors a restore
  writes back, with their digests, come last under ``data:``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from typing import Sequence

from ledger.commands.adopt.changes import change_of
from ledger.commands.adopt.changes import class_of
from ledger.commands.adopt.changes import history_only
from ledger.commands.adopt.changes import taken_back_here
from ledger.commands.adopt.changes import title_of
from ledger.commands.adopt.find import Copy
from ledger.core.adopt import Proposal
from ledger.core.adopt import Version
from ledger.core.adopt import propose
from ledger.core.identifiers import RELEASE_KNOB
from ledger.errors import Refused
from ledger.errors import UsageError

PLAN_VERSION = 2
PLAN_HEADER = """\
# ledger adopt plan for target {target} ({path}), read from {source}.
# One proposal per commit (or backup pair) with the changes it made.  Edit class (perf or
# bugfix: where it is empty, class_from says why), title, why and the dates; keep: false
# leaves a proposal (or one change) out.  A change with `reverted:` was taken back later:
# it goes in reverted, off the table (`suspected: true` holds it as a suspect).  A change
# with `revert_of: null` may take back an earlier proposal: write its number if it does.
# record: false marks history the ledger cannot hold as a value (kept in the audit trail).
# Then:  ledger adopt --apply {plan}        (--dry-run first to see every problem at once)
# Nothing is written to a target, now or by --apply: only the ledger learns.
"""
_REVERT_SUBJECT = re.compile(r'(?i)^revert\b|this reverts commit [0-9a-f]{7,}')


def propose_adopt(ws, target: str, backups: Sequence[str] = (), git: str | None = None,
                  path: str | None = None, per_knob: bool = False) -> dict[str, Any]:
    """The plan of entries that the versions of ``target``'s file propose."""
    from ledger.commands.adopt.find import backup_copies
    from ledger.commands.adopt.find import commit_copies
    from ledger.commands.adopt.find import mtime_of
    from ledger.commands.adopt.find import refuse_strangers
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
    readable = [*good, *live]
    versions = _versions(readable, by_commit=bool(git))
    spec = _engine(ws, t, tf.text) or _newest_release(_launch_engine(tf))
    versions, spelled = _spellings(versions, spec)
    found = propose(versions)
    # a release that appears or goes (a pin added) is no upgrade: one goes from a release
    # to another (an image tag or pin bump is proposed as an upgrade entry)
    found.items[:] = [p for p in found.items
                      if p.name != RELEASE_KNOB or None not in (p.before, p.after)]
    unclear = found.unclear + [f"{c.origin}: {c.skipped}: the changes it made are not "
                               "proposed" for c in copies if c.skipped and c.dated == "commit"]
    unheld = history_only(found.items, readable, live)
    taken = set() if git else {id(p) for p in found.items if taken_back_here(p)}
    groups = _groups(found.items, versions[0].when, taken, per_knob)
    managed = _managed(ws, t.name)
    proposals, data = [], {}
    number = {id(p): n for n, (_, ps) in enumerate(groups, 1) for p in ps}
    for n, (_, ps) in enumerate(groups, 1):
        proposal, lines = _proposal(n, ps, versions, readable, managed, bool(git),
                                    unheld, number, tf)
        proposals.append(proposal)
        data.update(lines)
    return {
        "adopt": PLAN_VERSION, "target": t.name, "path": str(tf.path), "source": source,
        "history": notes + spelled, "skipped": skipped, "unclear": unclear,
        "proposals": proposals, "data": data,
    }


def _engine(ws, t, text: str) -> str | None:
    from ledger.commands.catalog import engine_of

    return engine_of(ws, t, text)


def _spellings(versions: list[Version], spec: str | None) -> tuple[list[Version], list[str]]:
    """Flags spelled as argparse abbreviations or aliases, read as the flag the engine
    reads (``--max-running-request`` -> ``--max-running-requests``), so a respelling is a
    change of one flag; each named in the plan's history."""
    from dataclasses import replace

    from envknobs.catalog_release import release_flag_name
    from ledger.core.adopt import knob_of

    if spec is None:
        return versions, []
    seen: dict[str, str] = {}
    out = []
    for v in versions:
        values = {}
        for key, value in v.values.items():
            name = knob_of(key)
            full = release_flag_name(spec, name) if name.startswith("--") else None
            if full and full != name:
                seen[name] = full
                key = full + key[len(name):]
            values.setdefault(key, value)
        out.append(replace(v, values=values))
    return out, [f"{a} is read as {b} (the flag {spec} takes that spelling for)"
                 for a, b in sorted(seen.items())]


def _launch_engine(tf) -> str | None:
    """The engine the live file's launch line starts (``sglang``, ``vllm``), if one."""
    summary = getattr(tf, "summary", None)
    engines = {launch.engine for launch in getattr(summary, "launches", ()) if launch.engine}
    return engines.pop() if len(engines) == 1 else None


def _newest_release(engine: str | None) -> str | None:
    """The newest bundled release of ``engine``: a file that names no release is read with
    it (an abbreviation argparse takes in it is the flag it names there)."""
    from envknobs.catalog_release import bundled_releases

    found = bundled_releases(engine) if engine else []
    return f"{engine}=={found[-1]}" if found else None


def _groups(items: Sequence[Proposal], first: str, taken: set[int], per_knob: bool):
    """The changes as proposals: one per version that made them (a commit, a backup pair;
    those made before the first version — ``taken`` back later — together), or one per
    change with ``per_knob``."""
    groups: dict[Any, list[Proposal]] = {}
    for p in items:
        key = (first, 0) if id(p) in taken else (p.when, p.made_in)
        groups.setdefault((key, id(p)) if per_knob else key, []).append(p)
    return sorted(groups.items(), key=lambda kv: kv[0][0] if per_knob else kv[0])


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

    A commit is a revert when its subject says so (``git revert``) or its file is byte for
    byte an earlier version; the live file after commits, when it is byte for byte one.
    """
    if by_commit:
        return [c.version(c.when, f"author date of {c.origin}" if c.dated != "live" else
                          f"mtime of {c.origin}",
                          bool(_REVERT_SUBJECT.search(c.subject))
                          or any(c.text == o.text for o in copies[:max(i - 1, 0)]))
                for i, c in enumerate(copies)]
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
    from ledger.core import layers

    return {knob: [e.id for e in layer]
            for (t, knob), layer in layers.knob_layers(ws.entries()).items() if t == target}


def _origin(v: Version, prev: Version | None, by_commit: bool) -> str:
    if by_commit:
        return f"{v.origin} by {v.author}: {v.subject}" if v.author else v.origin
    return f"{prev.origin} -> {v.origin}" if prev is not None else v.origin


def _proposal(n: int, ps: Sequence[Proposal], versions, copies: Sequence[Copy],
              managed: dict[str, list[str]], by_commit: bool, history_only: dict[str, str],
              number: dict[int, int], tf) -> tuple[dict[str, Any], dict[str, Any]]:
    """One proposal (a commit's changes) and its machine data (``N.I`` -> lines, anchors)."""
    first = ps[0]
    v = versions[first.made_in]
    changes, data = [], {}
    for i, p in enumerate(ps, 1):
        change, lines = change_of(p, versions, copies, managed, by_commit, history_only,
                                number, tf)
        changes.append(change)
        if lines:
            data[f"{n}.{i}"] = lines
    taken_back = any(c.get("taken_back") for c in changes)
    cls, class_from = class_of(ps, v.subject if by_commit else "")
    if by_commit and v.subject and not taken_back:
        title = v.subject
    else:
        title = "; ".join(title_of(p.knob, c["after"]) for p, c in zip(ps, changes))[:120]
    d: dict[str, Any] = {"n": n, "keep": any(c.get("keep", True) for c in changes),
                         "class": cls, "class_from": class_from, "title": title, "why": "",
                         "when": changes[0]["when"], "dated_by": changes[0].pop("dated_by"),
                         "origin": _origin(v, versions[first.made_in - 1] if
                                           first.made_in else None, by_commit),
                         "changes": changes}
    for c in changes:  # a change says its own date only where it differs (taken back)
        c.pop("dated_by", None)
        if c["when"] == d["when"]:
            del c["when"]
        c.pop("taken_back", None)
    return d, data


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
    plan = {**plan}
    data = plan.pop("data", {})
    tail = ("\n# Machine data (do not edit): the exact lines a restore writes back, where\n"
            "# they sit, and their digests, by proposal.change.\n" + dump_yaml({"data": data})
            ) if data else ""
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(header + _compact_yaml(plan) + tail)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    return out


def _compact_yaml(plan: dict[str, Any]) -> str:
    """The readable part of the plan: block YAML, but a change with nothing nested in it
    on one line (``- {knob: TP, before: '4', after: '8'}``), so a commit's changes read
    as a list."""
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    def line(change: dict) -> Any:
        if any(isinstance(v, (dict, list)) for v in change.values()):
            return change
        flow = CommentedMap(change)
        flow.fa.set_flow_style()
        return flow

    y = YAML()
    y.width = 4096
    y.indent(mapping=2, sequence=2, offset=0)
    buf = io.StringIO()
    y.dump({**plan, "proposals": [{**p, "changes": [line(c) for c in p["changes"]]}
                                  for p in plan["proposals"]]}, buf)
    return buf.getvalue()


__all__ = ["PLAN_VERSION", "propose_adopt", "write_plan"]
