"""The read commands: `ledger list`, `show`, `status`, `diff`, `log`."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import safe_diff
from ledger.cli.common import wants_json
from ledger.cli.output import paint
from ledger.cli.output import safe
from ledger.cli.output import stale_note
from ledger.cli.output import table
from ledger.cli.output import use_colour
from ledger.errors import UsageError


def _state_cell(row: dict, colour: bool) -> str:
    state = row["display_state"]
    return paint(state, state.split(" ")[0], colour)


@click.command("list")
@click.option("--class", "cls", type=click.Choice(["perf", "bugfix"]), help="Only this class.")
@click.option("--state", type=click.Choice(["applied", "reverted", "suspected", "cleared"]),
              help="Only entries in this state.")
@json_option
@click.pass_context
def list_cmd(ctx, cls, state, json_out) -> None:
    """Entries, one line each, in record order."""
    from ledger.commands.report import list_entries

    s = ctx.find_object(State).session(ctx)
    rows = list_entries(s.ws, cls, state)
    if wants_json(ctx, json_out):
        return emit_json(rows)
    if not rows:
        return click.echo("no entries")
    colour = use_colour()
    click.echo(table(
        [[r["id"], paint(r["class"], r["class"], colour), _state_cell(r, colour), r["title"],
          r["change"], r["evidence"]] for r in rows],
        ["ID", "CLASS", "STATE", "TITLE", "CHANGE", "EVIDENCE"], keep=(4, 5)))
    stale_note([r["evidence"] for r in rows])


@click.command()
@click.argument("ref", metavar="ID")
@json_option
@click.pass_context
def show(ctx, ref, json_out) -> None:
    """One entry: the change, its state, history and evidence."""
    from ledger.commands.report import show_entry

    s = ctx.find_object(State).session(ctx)
    d = show_entry(s.ws, ref)
    if wants_json(ctx, json_out):
        return emit_json(d)
    click.echo(f"{d['id']}  {safe(d['title'])}")
    click.echo(f"  class     {d['class']}   state {d['display_state']}   slug {d['slug']}")
    where = d.get("target") if not d.get("also") else ""  # several: the change names them
    click.echo(f"  change    {safe(d['change'])}" + (f"   in {where}" if where else ""))
    _upgrade_lines(d, "  upgrade   ", False)
    if d.get("commit"):
        click.echo(f"  commit    {safe(d['commit'])}")
    if d.get("origin"):
        click.echo(f"  origin    {safe(d['origin'])}")
    if d["why"]:
        click.echo(f"  why       {safe(d['why'])}")
    if d["suspicion"]:
        click.echo(f"  suspected {safe(d['suspect_why'])}")
        if d["suspicion"] == "cleared":
            click.echo(f"  cleared   {safe(d['clear_why'])}")
    click.echo(f"  evidence  {safe(d['evidence'])}")
    stale_note([d["evidence"]])
    for n in d.get("notes") or ():
        click.echo(f"  note      {safe(n['line'])}")
    for b in d.get("bisects") or ():
        click.echo(f"  bisect    {b['id']} ({b['started']}, {b['checks']} checks): "
                   f"{safe(b['summary'])}")
        click.echo(f"            this entry: {safe(b['role'])}; record {b['record']}")
    click.echo("  history")
    click.echo(_indent(table([[a.get("when") or a["at"], a["action"], a["why"],
                               f"(recorded {a['at']})" if a.get("when") else ""]
                              for a in d["history"]], width=None), 4))


def _upgrade_lines(d: dict, head: str, defaults_only: bool) -> None:
    """An upgrade entry's plan rows (the defaults it moved first) under its change."""
    if d.get("kind") != "upgrade":
        return
    from ledger.core.upgrade import plan_lines

    for i, line in enumerate(plan_lines(d.get("plan"), defaults_only)):
        click.echo(f"{head if i == 0 else ' ' * len(head)}{safe(line)}")


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


@click.command()
@click.option("--live", "live", is_flag=True, help="The running services against their files "
              "(live probes in ledger.yaml): live, pending restart, drift, not running, "
              "unreadable — per knob.")
@click.option("--target", "targets", multiple=True, metavar="NAME", help="With --live: only "
              "this target (repeatable).")
@click.option("--exit-code", is_flag=True, help="Exit 1 when any file differs from what the "
              "ledger expects (drift, an unreadable target, an entry not live): for CI.")
@json_option
@click.pass_context
def status(ctx, live, targets, exit_code, json_out) -> None:
    """Each entry's recorded state against what is live; drift; suspects."""
    from ledger.commands.report import status as do_status

    if targets and not live:
        raise UsageError("--target goes with --live")
    if exit_code and live:
        raise UsageError("--exit-code checks the files, not the running services: drop --live")
    s = ctx.find_object(State).session(ctx)
    if live:
        from ledger.cli.live import print_status_live
        from ledger.commands.live import status_live

        reports = status_live(s, targets)
        if wants_json(ctx, json_out):
            emit_json([r.to_dict() for r in reports])
            if any(r.ambiguous for r in reports):
                ctx.exit(1)
            return
        return print_status_live(reports)
    st = do_status(s.ws)
    if wants_json(ctx, json_out):
        emit_json(st.to_dict())
        if exit_code and not st.clean:
            ctx.exit(1)
        return
    colour = use_colour()
    rows = []
    for r in st.entries:
        live = "ok" if r["ok"] else _live_cell(r, colour)
        rows.append([r["id"], r["class"], _state_cell(r, colour), r["change"], live, r["title"]])
    click.echo(table(rows, ["ID", "CLASS", "STATE", "CHANGE", "LIVE", "TITLE"], keep=(3, 4))
               if rows else "no entries")
    _print_drift(st.drift, colour)
    suspects = [r for r in st.entries if r["suspicion"] == "suspected"]
    if suspects:
        click.echo("\nunder suspicion: " + ", ".join(f"{r['id']} {safe(r['title'])}" for r in suspects))
    print_engine_defaults(st.engine_defaults)
    for err in st.errors:
        click.echo(f"warning: {err}", err=True)
    if exit_code and not st.clean:
        click.echo("error: " + st.verdict(), err=True)
        ctx.exit(1)


def _live_cell(r: dict, colour: bool) -> str:
    state = r.get("live_state") or ("UNREADABLE" if r.get("unreadable") else "DRIFT")
    if state in ("conditional", "repeated"):
        lines = ",".join(str(n) for n in r.get("lines") or [])
        return paint(f"{state} (lines {lines})", "drift", colour)
    return paint(state.upper(), "drift", colour)


def print_engine_defaults(moved) -> None:
    """The engine repo's defaults that differ from its release (ledger.commands.repo_defaults)."""
    if not moved:
        return
    click.echo("\nengine defaults (the engine repo's checkout, not its release):")
    for d in moved:
        click.echo(f"  {safe(d.describe())}")


def _print_drift(drifts, colour: bool) -> None:
    if not drifts:
        return
    click.echo("\n" + paint("drift (live differs from the ledger):", "drift", colour))
    for d in drifts:
        click.echo(f"  {safe(d.describe())}")


@click.command()
@click.argument("revs", nargs=-1, metavar="[REV [REV2]]")
@click.option("--files", is_flag=True, help="Add the diff of each file a full restore writes.")
@click.option("--exit-code", is_flag=True, help="Exit 3 when there are differences.")
@json_option
@click.pass_context
def diff(ctx, revs, files, exit_code, json_out) -> None:
    """What is off the table now — or, with REVs, what changed in the ledger between them."""
    from ledger.commands import report

    if len(revs) > 2:
        raise UsageError("diff takes at most two revisions")
    s = ctx.find_object(State).session(ctx)
    if revs:
        changes = report.history_diff(s.ws, revs[0], revs[1] if len(revs) > 1 else None)
        if wants_json(ctx, json_out):
            emit_json(changes)
        else:
            for c in changes:
                if c["what"] == "config":
                    click.echo(f"ledger.yaml  {c['change']}")
                else:
                    click.echo(f"{c['id']}  [{c['class']}] {safe(c['title'])}: {safe(c['change'])}")
            if not changes:
                click.echo("no ledger changes between those revisions")
        if exit_code and changes:
            ctx.exit(3)
        return
    out = report.off_the_table(s.ws, with_files=files)
    if wants_json(ctx, json_out):
        emit_json(out.to_dict())
    else:
        _print_off_table(out)
    if exit_code and out.differs:
        ctx.exit(3)


def _print_off_table(out) -> None:
    colour = use_colour()
    total = sum(len(v) for v in out.reverted.values())
    if not total:
        click.echo("nothing is off the table: every entry is applied")
    else:
        click.echo(f"off the table: {total} reverted entr{'y' if total == 1 else 'ies'}")
        for cls in ("perf", "bugfix"):
            rows = out.reverted.get(cls) or []
            if not rows:
                continue
            click.echo(f"\n{paint(cls, cls, colour)} ({len(rows)})")
            for r in rows:
                click.echo(f"  {r['id']}  {safe(r['title'])}  [{_state_cell(r, colour)}]")
                click.echo(f"      change    {safe(r['change'])}")
                _upgrade_lines(r, "      moved     ", True)
                if r["reverted_why"]:
                    click.echo(f"      reverted  {safe(r['reverted_why'])}  ({r['reverted_at']})")
                if r.get("health_failure"):
                    click.echo("      held      failed its health check, rolled back: not a "
                               f"claw-back ({safe(r['health_failure'])})")
                if r["suspicion"] == "cleared":
                    at = f"  ({r['cleared_at']})" if r.get("cleared_at") else ""
                    click.echo(f"      cleared   {safe(r['clear_why'])}{at}")
                click.echo(f"      evidence  {safe(r['evidence'])}")
                for n in r.get("notes") or ():
                    click.echo(f"      note      {safe(n['line'])}")
        stale_note([r["evidence"] for rows in out.reverted.values() for r in rows])
    if out.kept:
        click.echo(f"\nkept: {out.kept}")
    _print_drift(out.drift, colour)
    print_engine_defaults(out.engine_defaults)
    for text in out.files.values():
        click.echo("")
        click.echo(safe_diff(text), nl=False)
    if out.patch_diff:
        click.echo("")
        click.echo(safe_diff(out.patch_diff), nl=False)
    for err in out.errors:
        click.echo(f"warning: {err}", err=True)


@click.command()
@click.option("-n", "--limit", type=int, help="At most this many commits.")
@json_option
@click.pass_context
def log(ctx, limit, json_out) -> None:
    """The workspace's audit trail: one commit per command, newest first by when it
    happened (--when dates; the record time is shown beside them)."""
    from ledger.commands.report import log_lines
    from ledger.commands.report import workspace_log

    s = ctx.find_object(State).session(ctx)
    if wants_json(ctx, json_out):
        return emit_json(workspace_log(s.ws, limit))
    for c in log_lines(s.ws, limit):
        if c.get("event"):  # a dated action inside a commit: a hand revert, a clear --when
            why = f": {safe(c['why'])}" if c["why"] else ""
            click.echo(f"{'':10}  {c['when']}  {c['id']} {c['action']}{why}  "
                       f"(recorded {c['at']})")
            continue
        recorded = f"  (recorded {c['time']})" if c["when"] else ""
        click.echo(f"{c['sha'][:10]}  {c['when'] or c['time']}  {safe(c['subject'])}{recorded}")
