"""`ledger backups list|show|diff|restore`: the backup store."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import safe_diff
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.cli.output import table


@click.group()
def backups() -> None:
    """The backup store: a copy of every file before the ledger changed it."""


@backups.command("list")
@json_option
@click.pass_context
def backups_list(ctx, json_out) -> None:
    """Backups, oldest first."""
    from ledger.commands.backups import list_backups

    s = ctx.find_object(State).session(ctx)
    items = list_backups(s.ws)
    if wants_json(ctx, json_out):
        return emit_json([b.to_dict() for b in items])
    if not items:
        return click.echo("no backups")
    click.echo(table([[b.id, str(len(b.files)), b.command] for b in items],
                     ["BACKUP", "FILES", "COMMAND"], max_width=70))


@backups.command("show")
@click.argument("backup_id", metavar="BACKUP")
@json_option
@click.pass_context
def backups_show(ctx, backup_id, json_out) -> None:
    """One backup's files, with their sha256."""
    from ledger.commands.backups import get_backup

    s = ctx.find_object(State).session(ctx)
    b = get_backup(s.ws, backup_id)
    if wants_json(ctx, json_out):
        return emit_json(b.to_dict())
    click.echo(f"backup {b.id}  {b.time}  ledger {safe(b.command)}")
    click.echo(table([[f.path, (f.sha256 or "(absent)")[:12], f"{f.size}"] for f in b.files],
                     ["PATH", "SHA256", "BYTES"], max_width=100))


@backups.command("diff")
@click.argument("backup_id", metavar="BACKUP")
@click.argument("path", required=False)
@click.pass_context
def backups_diff(ctx, backup_id, path) -> None:
    """Unified diff from the backup to the live file(s)."""
    from ledger.commands.backups import diff_backup

    s = ctx.find_object(State).session(ctx)
    text = diff_backup(s.ws, backup_id, path)
    click.echo(safe_diff(text) if text else "no differences", nl=not text)


@backups.command("restore")
@click.argument("backup_id", metavar="BACKUP")
@dry_run_option
@click.pass_context
def backups_restore(ctx, backup_id, dry_run) -> None:
    """Put every file of a backup back as it was (itself backed up first)."""
    from ledger.commands.backups import restore_backup

    s = ctx.find_object(State).session(ctx)
    written = restore_backup(s, backup_id, dry_run=dry_run)
    verb = "would restore" if dry_run else "restored"
    for p in written:
        click.echo(f"{verb} {safe(p)}")
    if not written:
        click.echo("every file already matches the backup")
