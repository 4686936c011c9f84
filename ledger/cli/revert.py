"""`ledger revert`, `suspect`, `clear`, `amend` (`restore`: :mod:`ledger.cli.restore`)."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import print_files
from ledger.cli.common import wants_json
from ledger.cli.live import print_live
from ledger.cli.live import restart_option
from ledger.cli.output import safe
from ledger.cli.record import when_option
from ledger.core.display import change_text


def _with_evidence(row: dict, applied) -> dict:
    """A restore's rows carry each entry's evidence headline (other commands have none)."""
    if row["id"] in applied.evidence:
        row["evidence"] = applied.evidence[row["id"]]
    return row


def print_applied(applied, verb: str, ctx, json_out: bool, infinitive: str = "",
                   live=None) -> None:
    if wants_json(ctx, json_out):
        emit_json(
            {
                "op": applied.op,
                "dry_run": applied.dry_run,
                "changed": [_with_evidence(e.to_dict(), applied) for e in applied.changed],
                "skipped": [
                    _with_evidence({"id": k.entry.id, "title": k.entry.title, "reason": k.reason},
                                   applied)
                    for k in applied.skipped
                ],
                "files": applied.files,
                "patch_diff": applied.patch_diff,
                "backup": applied.backup_id,
                "commit": applied.commit,
                "notices": applied.notices,
                **(live.to_dict() if live is not None else {}),
            }
        )
        if live is not None:
            _live_exit(ctx, live)
        return
    done = f"would {infinitive or verb}" if applied.dry_run else verb
    lines = [f"nothing to {infinitive or verb}"] if not applied.changed else []
    lines += [f"{done} {e.id} [{e.cls}] {safe(e.title)}  ({safe(change_text(e))})"
              for e in applied.changed]
    lines += [f"skipped {k.entry.id} [{k.entry.cls}] {safe(k.entry.title)}: {safe(k.reason)}"
              for k in applied.skipped]
    lines += [f"note: {safe(note)}" for note in applied.notices]
    echo_lines(lines)
    print_files(applied, applied.dry_run)
    if live is not None:
        print_live(ctx, live)


def _live_exit(ctx, live) -> None:
    if live.failed:
        ctx.exit(1)


@click.command()
@click.argument("refs", nargs=-1, metavar="[ID...]")
@click.option("--perf-only", is_flag=True, help="Every applied perf entry; no bugfix is touched.")
@click.option("--class", "cls", type=click.Choice(["perf", "bugfix"]), help="Every applied entry "
              "of this class.")
@click.option("--why", default="", help="Why (kept in each entry's history).")
@click.option("--force", is_flag=True, help="Overwrite drift in the target files.")
@when_option
@restart_option
@json_option
@dry_run_option
@click.pass_context
def revert(ctx, refs, perf_only, cls, why, force, when, restart, json_out, dry_run) -> None:
    """Revert entries: by ID, or --perf-only, or --class CLASS.

    A knob that comes back because the reverted entry had removed it is named in the
    plan ("this revert ADDS ..."), dry run or not."""
    from ledger.commands import revert as ops

    s = ctx.find_object(State).session(ctx)
    applied = ops.revert(s, refs=refs, perf_only=perf_only, cls=cls, why=why, force=force,
                         dry_run=dry_run, restart=restart, when=when)
    print_applied(applied, "reverted", ctx, json_out, "revert", applied.live)


def echo_lines(lines: list[str]) -> None:
    """One write for a command's rows (a bulk revert prints thousands of them)."""
    if lines:
        click.echo("\n".join(lines))


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--why", required=True, help="The hypothesis: why it is suspected.")
@click.option("--force", is_flag=True, help="Overwrite drift in the target file.")
@when_option
@restart_option
@json_option
@dry_run_option
@click.pass_context
def suspect(ctx, ref, why, force, when, restart, json_out, dry_run) -> None:
    """Revert an entry and mark it suspected of causing an incident."""
    from ledger.commands import revert as ops

    s = ctx.find_object(State).session(ctx)
    applied = ops.suspect(s, ref, why, force=force, dry_run=dry_run, restart=restart,
                          when=when)
    print_applied(applied, "suspected", ctx, json_out, "suspect", applied.live)


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--why", required=True, help="What exonerated it.")
@when_option
@json_option
@dry_run_option
@click.pass_context
def clear(ctx, ref, why, when, json_out, dry_run) -> None:
    """Clear a suspect (it stays reverted until `ledger restore`)."""
    from ledger.commands import revert as ops

    s = ctx.find_object(State).session(ctx)
    print_applied(ops.clear(s, ref, why, dry_run=dry_run, when=when), "cleared", ctx,
                   json_out, "clear")


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--why", default="", help="The reason as it should read.")
@click.option("--of", "of", type=click.Choice(["record", "suspect", "clear", "revert"]),
              help="Whose reason or date: the record's, the suspect's, the clear's or the "
                   "latest revert's [default: the latest of them].")
@when_option
@json_option
@dry_run_option
@click.pass_context
def amend(ctx, ref, why, of, when, json_out, dry_run) -> None:
    """Correct a reason (--why) or a date (--when) typed wrong; the entry's history keeps
    the old text and the old date."""
    from ledger.commands import revert as ops

    s = ctx.find_object(State).session(ctx)
    print_applied(ops.amend(s, ref, why, of=of, dry_run=dry_run, when=when), "amended", ctx,
                   json_out, "amend")
