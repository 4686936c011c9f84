"""`ledger pull`, `ledger push`, and the hidden `ledger merge-driver` git calls."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import safe_diff
from ledger.cli.common import wants_json
from ledger.cli.output import safe


@click.command()
@click.argument("remote", required=False)
@click.option("--drop", "drop", multiple=True, metavar="ID",
              help="Take this unpushed local entry out while merging (resolves a conflict).")
@click.option("--force", is_flag=True, help="Overwrite drift in the target files.")
@json_option
@dry_run_option
@click.pass_context
def pull(ctx, remote, drop, force, json_out, dry_run) -> None:
    """Fetch REMOTE, merge its ledger, and bring this machine's files to the result.

    Remote entries come first; local unpushed entries are replayed after them. Two new
    entries on the same knob (or patches on the same lines) from both sides are refused,
    naming both. The target files and the engine repo change in one transaction.
    """
    from ledger.commands import sync as ops

    s = ctx.find_object(State).session(ctx)
    done = ops.pull(s, remote, drop=drop, force=force, dry_run=dry_run)
    if wants_json(ctx, json_out):
        emit_json(_pulled_json(done))
        return
    where = f"{done.remote}/{done.branch}"
    if done.status != "merged":
        click.echo(f"{where}: {done.status}")
        return
    m = done.merged
    by_id = m.by_id
    verb = "would merge" if done.dry_run else "merged"
    click.echo(f"{verb} {where}: {len(m.from_remote)} remote entr"
               f"{'y' if len(m.from_remote) == 1 else 'ies'}, {len(m.replayed)} local replayed")
    for i in m.from_remote:
        click.echo(f"  remote   {i} [{by_id[i].cls}] {safe(by_id[i].title)}")
    for i, old, new in m.replayed:
        click.echo(f"  replayed {i} [{by_id[i].cls}] {safe(by_id[i].title)} (seq {old} -> {new})")
    for i, old, new in m.renamed:
        click.echo(f"  renamed  {i}: slug {safe(old)} -> {safe(new)}")
    for i in m.histories:
        click.echo(f"  history  {i}: actions of both sides merged")
    for i in m.dropped:
        click.echo(f"  dropped  {i}")
    for note in done.notices:
        click.echo(f"note: {safe(note)}", err=True)
    if done.dry_run:
        for text in done.files.values():
            click.echo(safe_diff(text), nl=False)
        if done.patch_diff:
            click.echo(safe_diff(done.patch_diff), nl=False)
        return
    for path in done.files:
        click.echo(f"  updated  {safe(path)}")
    backup = f"backup {done.backup_id}; " if done.backup_id else ""
    click.echo(f"{backup}workspace commit {done.commit[:10] if done.commit else '-'}")


def _pulled_json(done) -> dict:
    m = done.merged
    return {
        "remote": done.remote, "branch": done.branch, "status": done.status,
        "dry_run": done.dry_run,
        "from_remote": list(m.from_remote) if m else [],
        "replayed": [{"id": i, "seq_before": a, "seq": b} for i, a, b in m.replayed] if m else [],
        "renamed": [{"id": i, "slug_before": a, "slug": b} for i, a, b in m.renamed] if m else [],
        "histories": list(m.histories) if m else [],
        "dropped": list(m.dropped) if m else [],
        "files": done.files, "ledger_files": done.ledger_files,
        "patch_diff": done.patch_diff, "backup": done.backup_id, "commit": done.commit,
        "notices": done.notices,
    }


@click.command()
@click.argument("remote", required=False)
@json_option
@click.pass_context
def push(ctx, remote, json_out) -> None:
    """Push the ledger to REMOTE; if the remote moved on, say to `ledger pull` first."""
    from ledger.commands import sync as ops

    s = ctx.find_object(State).session(ctx)
    done = ops.push(s, remote)
    if wants_json(ctx, json_out):
        emit_json({"remote": done.remote, "branch": done.branch, "commit": done.commit,
                   "up_to_date": done.up_to_date})
        return
    state = "up to date" if done.up_to_date else f"pushed {done.commit[:10]}"
    click.echo(f"{done.remote}/{done.branch}: {state}")


@click.command("merge-driver", hidden=True)
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
@click.argument("path", required=False, default="entries.jsonl")
def merge_driver(base, ours, theirs, path) -> None:
    """git's merge driver for entries.jsonl (%O %A %B %P); see `ledger pull --help`."""
    from ledger.commands import sync as ops

    ops.merge_driver(base, ours, theirs, path, Path.cwd())
