"""`ledger restore`: each entry put back is shown with its evidence."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import json_option
from ledger.cli.common import print_files
from ledger.cli.common import wants_json
from ledger.cli.live import print_live
from ledger.cli.live import restart_option
from ledger.cli.output import safe
from ledger.cli.output import stale_note
from ledger.cli.revert import echo_lines
from ledger.cli.revert import print_applied
from ledger.core.display import change_text


@click.command()
@click.argument("refs", nargs=-1, metavar="[ID...]")
@click.option("--perf-only", is_flag=True, help="Every reverted perf entry; no bugfix is touched.")
@click.option("--include-suspects", is_flag=True, help="Also restore entries under suspicion.")
@click.option("--force", is_flag=True, help="Restore even what evidence calls a regression; "
              "overwrite drift.")
@click.option("--require-evidence", is_flag=True, help="Only restore entries whose evidence "
              "shows a gain.")
@click.option("--why", default="", help="Why (kept in each entry's history).")
@restart_option
@json_option
@dry_run_option
@click.pass_context
def restore(ctx, refs, perf_only, include_suspects, force, require_evidence, why, restart,
            json_out, dry_run) -> None:
    """Re-apply reverted entries, showing the evidence for each."""
    from ledger.commands import restore as ops

    s = ctx.find_object(State).session(ctx)
    applied = ops.restore(s, refs=refs, perf_only=perf_only, include_suspects=include_suspects,
                          force=force, require_evidence=require_evidence, why=why,
                          dry_run=dry_run, restart=restart)
    if not wants_json(ctx, json_out):
        _print_restore(applied)
        print_live(ctx, applied.live)
        return
    print_applied(applied, "restored", ctx, json_out, "restore", applied.live)


def _print_restore(applied) -> None:
    prefix = "would restore" if applied.dry_run else "restored"
    lines = ["nothing to restore"] if not applied.changed else []
    for e in applied.changed:
        lines.append(f"{prefix} {e.id} [{e.cls}] {safe(e.title)}  ({safe(change_text(e))})")
        lines.append(f"    evidence: {safe(applied.evidence.get(e.id, 'no evidence'))}")
    for k in applied.skipped:
        lines.append(f"held back {k.entry.id} [{k.entry.cls}] {safe(k.entry.title)}: "
                     f"{safe(k.reason)}")
        lines.append(f"    evidence: {safe(applied.evidence.get(k.entry.id, 'no evidence'))}")
    echo_lines(lines)
    stale_note(list(applied.evidence.values()))
    print_files(applied, applied.dry_run)
