"""`ledger upgrade plan` and `ledger record upgrade` (:mod:`ledger.commands.upgrade`)."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import print_files
from ledger.cli.common import wants_json
from ledger.cli.output import safe


@click.group()
def upgrade() -> None:
    """Engine upgrades: what moving to another release changes in your targets."""


@upgrade.command("plan")
@click.argument("targets", nargs=-1, metavar="[TARGET]...")
@click.option("--to", "to", required=True, metavar="ENGINE==VERSION",
              help="The release to upgrade to: vllm==0.34.0, sglang==0.5.23.")
@click.option("--from", "given", metavar="ENGINE==VERSION",
              help="The release the targets run now (default: the one each file names, "
                   "else `engine:` in ledger.yaml).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text",
              show_default=True, help="markdown: a document for a pull request.")
@json_option
@click.pass_context
def upgrade_plan(ctx, targets, to, given, fmt, json_out) -> None:
    """What upgrading TARGETs (default: every target running that engine) to --to changes:
    names set in the file that the release removes, renames (value translated where the
    meaning inverts) or deprecates; unset names whose default moves; values now equal to
    the new default; new knobs hinted perf.  Each row with FILE:LINE and the command that
    carries it out."""
    from ledger.commands.upgrade import upgrade_plan as do_plan
    from ledger.core.upgrade import markdown

    plans = [p.to_dict() for p in do_plan(ctx.find_object(State).session(ctx), list(targets),
                                          to, given)]
    for p in plans:
        for w in p["warnings"]:
            click.echo(f"warning: {p['target']}: {w}", err=True)
    if wants_json(ctx, json_out):
        emit_json({"plans": plans})
    elif fmt == "markdown":
        click.echo(markdown(plans), nl=False)
    else:
        for p in plans:
            _print_plan(p)


def _print_plan(p: dict) -> None:
    from ledger.core.upgrade import row_text

    click.echo(f"{safe(p['target'])}: {safe(p['from'])} -> {safe(p['to'])}  "
               f"({safe(p['path'])}, release {p['from_source']})")
    for r in p["rows"]:
        click.echo(f"  {r['change']:<10} {safe(r['where'])}: {safe(row_text(r))}")
        if r["command"]:
            click.echo(f"             {safe(r['command'])}")
    if len(p["rows"]) == 1:
        click.echo("  (no knob or flag of this file changes meaning)")


@click.command("upgrade")
@click.argument("target_name", metavar="TARGET")
@click.option("--to", "to", required=True, metavar="ENGINE==VERSION",
              help="The release to upgrade to: vllm==0.34.0.")
@click.option("--class", "cls", required=True, type=click.Choice(["perf", "bugfix"]),
              help="perf (for speed) or bugfix (fixes a real problem).")
@click.option("--title", required=True, help="One line: what the change is.")
@click.option("--why", default="", help="Why the change was made.")
@click.option("--adopt", is_flag=True, help="Record an upgrade already made by hand.")
@click.option("--before", metavar="ENGINE==VERSION",
              help="With --adopt: the release before the hand edit.")
@click.option("--force", is_flag=True, help="Overwrite drift in the target.")
@json_option
@dry_run_option
@click.pass_context
def record_upgrade(ctx, target_name, to, cls, title, why, adopt, before, force, json_out,
                   dry_run) -> None:
    """Upgrade TARGET's engine release (image tag, pip pin, Helm image.tag, compose image:;
    a tag's suffix such as -cu129 kept) and record it as an entry whose body is the
    upgrade plan; revert and restore put the release back byte for byte."""
    from ledger.commands.upgrade import record_upgrade as do_record

    r = do_record(ctx.find_object(State).session(ctx), target_name, to, cls=cls, title=title,
                  why=why, adopt=adopt, before=before, force=force, dry_run=dry_run)
    for w in r.plan.warnings:
        click.echo(f"warning: {w}", err=True)
    if wants_json(ctx, json_out):
        emit_json({**r.entry.to_dict(), "dry_run": dry_run, "backup": r.applied.backup_id,
                   "commit": r.applied.commit, "files": r.applied.files})
        return
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if adopt else "recorded")
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}")
    click.echo(f"  {e.target}: {e.before} -> {e.after}")
    moved = [row for row in r.plan.rows if row.change == "default"]
    if moved:
        click.echo(f"  {len(moved)} default{'s' if len(moved) != 1 else ''} moved under unset "
                   f"names (`ledger show {e.id}`)")
    print_files(r.applied, dry_run)
