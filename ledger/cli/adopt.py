"""`ledger adopt`: propose entries from backup copies or a deploy repo's commits; apply."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.core.display import change_text

ADOPT_HELP = """Bring in the history of TARGET's file as entries, with real dates.

\b
  ledger adopt decode deploy/                  backup copies in deploy/ (*.bak.DATE, *.orig, *~)
  ledger adopt decode f.bak.20261202-1414 ...  these copies
  ledger adopt decode --git ~/deploy --path serve_decode.sh   the commits of a deploy repo
  ledger adopt --apply adopt-decode.yaml       record the kept proposals, all or none

Writes a plan (--out, default adopt-TARGET.yaml) with one proposal per commit (or
backup pair) holding the knob and flag changes it made (--per-knob: one per change):
edit class, title, why and dates, set keep: false to leave one out, then apply it; every
problem of a plan is reported in one --apply run (--dry-run to check).  Renames are
followed; changes inside if/case branches are proposed with their condition; a change
taken back by a revert is proposed reverted (off the table).  Nothing is ever written to
a target.  A copy that is no version of TARGET is named and skipped.
"""


@click.command("adopt", help=ADOPT_HELP)
@click.argument("target", required=False)
@click.argument("backups", nargs=-1, type=click.Path())
@click.option("--git", "git_repo", metavar="REPO", type=click.Path(file_okay=False),
              help="A deploy repo whose commits changed the file.")
@click.option("--path", "git_path", metavar="FILE", help="With --git: the file's path in REPO.")
@click.option("--out", metavar="PLAN", type=click.Path(dir_okay=False),
              help="Where to write the plan (default adopt-TARGET.yaml here).")
@click.option("--force", is_flag=True, help="Replace an existing plan file.")
@click.option("--per-knob", is_flag=True,
              help="One proposal per knob change instead of one per commit.")
@click.option("--apply", "apply_plan", metavar="PLAN", type=click.Path(dir_okay=False),
              help="Record the kept proposals of PLAN as entries, all or none.")
@json_option
@dry_run_option
@click.pass_context
def adopt(ctx, target, backups, git_repo, git_path, out, force, per_knob, apply_plan,
          json_out, dry_run) -> None:
    s = ctx.find_object(State).session(ctx)
    if apply_plan:
        if target or backups or git_repo:
            raise click.UsageError("--apply PLAN takes no TARGET, backups or --git")
        return _apply(ctx, s, apply_plan, json_out, dry_run)
    if not target:
        raise click.UsageError("give TARGET (and backups or --git), or --apply PLAN")
    from ledger.commands.adopt import propose_adopt
    from ledger.commands.adopt import write_plan

    plan = propose_adopt(s.ws, target, backups, git_repo, git_path, per_knob=per_knob)
    written = None
    if not dry_run:
        written = write_plan(plan, out or f"adopt-{target}.yaml", force=force)
    if wants_json(ctx, json_out):
        return emit_json({**plan, "plan": str(written) if written else None})
    for line in plan.get("history", ()):
        click.echo(f"history: {safe(line)}")
    for line in plan["skipped"]:
        click.echo(f"skipped {safe(line)}")
    for line in plan["unclear"]:
        click.echo(f"not proposed {safe(line)}")
    for p in plan["proposals"]:
        click.echo(f"{p['n']:>3}. {p['when']}  [{p['class'] or '?'}] {safe(p['title'])}"
                   f"{'' if p['keep'] else '  (kept out)'}")
        for c in p["changes"]:
            click.echo(f"       {_change(c)}")
    if written:
        click.echo(f"wrote {safe(written)}: edit it, then `ledger adopt --apply {safe(written)}`")


def _value(v) -> str:
    return "unset" if v is None else str(v)


def _change(c: dict) -> str:
    where = f" {c['where']}" if c.get("where") else ""
    back = c.get("reverted") or {}
    tail = [f"reverted {back['when']}" + (f", dated by the {back['dated_by']}"
                                           if back.get("dated_by") else "")] if back else []
    tail += ["revert_of?"] if "revert_of" in c else []
    tail += ["history only"] if c.get("record") is False else []
    tail += ["kept out"] if c.get("keep") is False else []
    return (f"{safe(c['knob'])}{safe(where)}: {safe(_value(c['before']))} -> "
            f"{safe(_value(c['after']))}" + (f"  ({', '.join(tail)})" if tail else ""))


def _apply(ctx, s, plan_path, json_out, dry_run) -> None:
    from ledger.commands.adopt.apply import apply_adopt

    applied, history_only = apply_adopt(s, plan_path, dry_run=dry_run)
    if wants_json(ctx, json_out):
        return emit_json({"op": "adopt", "dry_run": applied.dry_run, "commit": applied.commit,
                          "changed": [e.to_dict() for e in applied.changed],
                          "history_only": history_only})
    verb = "would adopt" if dry_run else "adopted"
    for e in applied.changed:
        state = "" if e.applied else f"  (reverted{', suspected' if e.suspected else ''}: " \
            "off the table)"
        click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}  ({safe(change_text(e))}){state}")
    for h in history_only:
        click.echo(f"history only (in the commit message, no entry): {safe(h)}")
    click.echo("nothing written to a target")
