"""`ledger record knob|patch`."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import print_files
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.cli.output import show_value
from ledger.errors import UsageError


@click.group()
def record() -> None:
    """Record a change: a knob in a target, or a patch to the engine."""


def record_options(f):
    f = click.option("--why", default="", help="Why the change was made.")(f)
    f = click.option("--title", required=True, help="One line: what the change is.")(f)
    f = click.option("--class", "cls", required=True, type=click.Choice(["perf", "bugfix"]),
                     help="perf (for speed) or bugfix (fixes a real problem).")(f)
    return f


@record.command("knob")
@click.argument("target_name", metavar="TARGET")
@click.argument("assignment", metavar="KNOB=VALUE | KNOB")
@record_options
@click.option("--unset", is_flag=True, help="Remove the knob (give KNOB alone).")
@click.option("--adopt", is_flag=True, help="Record a change already made by hand.")
@click.option("--before", help="With --adopt: the value before the hand edit.")
@click.option("--before-unset", is_flag=True, help="With --adopt: the knob was unset before.")
@click.option("--no-validate", is_flag=True, help="Skip the catalog's type and range checks.")
@click.option("--force", is_flag=True, help="Overwrite drift in the target.")
@json_option
@dry_run_option
@click.pass_context
def record_knob(ctx, target_name, assignment, cls, title, why, unset, adopt, before,
                before_unset, no_validate, force, json_out, dry_run) -> None:
    """Change KNOB in TARGET (with backup) and record the entry."""
    from ledger.commands.record import record_knob as do_record

    if unset:
        if "=" in assignment:
            raise UsageError("--unset takes the knob name alone, not KNOB=VALUE")
        knob, value = assignment, None
    else:
        if "=" not in assignment:
            raise UsageError(f"expected KNOB=VALUE, got {assignment!r} (or use --unset)")
        knob, value = assignment.split("=", 1)
    if before is not None and before_unset:
        raise UsageError("give --before VALUE or --before-unset, not both")
    s = ctx.find_object(State).session(ctx)
    r = do_record(s, target=target_name, knob=knob, value=value, cls=cls, title=title, why=why,
                  adopt=adopt, before=before, before_given=before is not None or before_unset,
                  no_validate=no_validate, force=force, dry_run=dry_run)
    for w in r.warnings:
        click.echo(f"warning: {w}", err=True)
    if wants_json(ctx, json_out):
        return emit_json(_recorded_json(r.entry, r.applied, dry_run, r.warnings))
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if adopt else "recorded")
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}")
    click.echo(f"  {e.target}: {e.knob} {show_value(e.before)} -> {show_value(e.after)}")
    print_files(r.applied, dry_run)


def _recorded_json(entry, applied, dry_run: bool, warnings: list[str]) -> dict:
    """The new entry itself (so `jq .id` works), plus what the command did."""
    return {**entry.to_dict(), "dry_run": dry_run, "backup": applied.backup_id,
            "commit": applied.commit, "files": applied.files,
            "patch_diff": applied.patch_diff, "warnings": warnings}


@record.command("patch")
@click.argument("patch_file", required=False, type=click.Path(dir_okay=False))
@click.option("--commit", "rev", metavar="REV", help="Adopt a commit already in the engine repo.")
@record_options
@json_option
@dry_run_option
@click.pass_context
def record_patch(ctx, patch_file, rev, cls, title, why, json_out, dry_run) -> None:
    """Apply PATCH_FILE to the engine repo (or adopt --commit REV) and record it."""
    from ledger.commands.record import record_patch as do_record

    if bool(patch_file) == bool(rev):
        raise UsageError("give a patch FILE or --commit REV (one of them)")
    s = ctx.find_object(State).session(ctx)
    r = do_record(s, patch_file=patch_file, rev=rev, cls=cls, title=title, why=why,
                  dry_run=dry_run)
    if wants_json(ctx, json_out):
        return emit_json(_recorded_json(r.entry, r.applied, dry_run, []))
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if rev else "recorded")
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}")
    click.echo(f"  patch {', '.join(safe(f) for f in e.files)} (sha256 {e.sha256[:12]})")
