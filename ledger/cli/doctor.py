"""`ledger doctor [--repair [--dry-run]] [--json]`."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe


@click.command()
@click.option("--repair", is_flag=True, help="Repair what is safe to repair: finish an "
              "interrupted command, remove stale git locks and dead temporary files, set "
              "damaged records aside.  Nothing else is changed.")
@click.option("--dry-run", is_flag=True, help="With --repair: say what would be repaired.")
@json_option
@click.pass_context
def doctor(ctx, repair: bool, dry_run: bool, json_out: bool) -> None:
    """Check the workspace end to end: entries, patches, backups, evidence, git locks,
    temporary files, an interrupted command, targets and drift.  Exits 1 while anything
    is found."""
    from ledger.commands.doctor import doctor as run_doctor

    if dry_run and not repair:
        raise click.UsageError("--dry-run goes with --repair")
    state = ctx.find_object(State)
    report = run_doctor(state.workspace, repair=repair, dry_run=dry_run)
    if wants_json(ctx, json_out):
        emit_json(report.to_dict())
    else:
        _print(report, repair)
    if not report.ok:
        ctx.exit(1)


def _print(report, repair: bool) -> None:
    click.echo(f"ledger doctor: {safe(report.root)}")
    for line in report.repaired:
        click.echo(f"  repaired  {safe(line)}" if not report.dry_run else f"  {safe(line)}")
    for f in report.findings:
        click.echo(f"  [{f.check}] {safe(f.path)}: {safe(f.problem)}")
        click.echo(f"      fix: {safe(f.advice)}")
        if f.repair and not repair:
            click.echo(f"      --repair would {safe(f.repair)}")
    if report.ok:
        click.echo("  no problems found")
    else:
        n = len(report.findings)
        fixable = sum(1 for f in report.findings if f.repair)
        hint = f" ({fixable} repairable: `ledger doctor --repair`)" if fixable and not repair else ""
        click.echo(f"{n} finding{'s' if n != 1 else ''}{hint}")
