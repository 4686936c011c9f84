"""`ledger bisect`: find the culprit entries of a failure — or show it is not among them.

``ledger bisect reset`` puts back the start of an interrupted bisect and ``ledger bisect
show [BISECT]`` prints a record's timeline.  ``reset`` and ``show`` are words only
without ``--check``; with ``--check`` every argument is an entry (so an entry whose slug
is ``reset`` is still reachable by giving ``--check``).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.cli.output import table
from ledger.errors import UsageError


@click.command()
@click.argument("refs", nargs=-1, metavar="[ID...] | reset | show [BISECT]")
@click.option("--check", metavar="CMD", help="The command that reproduces the failure: exit 0 "
              "= good, non-zero = bad, a timeout = bad.  Split like a shell would, run without one.")
@click.option("--class", "cls", type=click.Choice(["perf", "bugfix"]),
              help="Bisect over every entry of this class (reverted ones included).")
@click.option("--all-applied", is_flag=True, help="Bisect over every applied entry.")
@click.option("--runs", type=int, default=1, show_default=True,
              help="Runs per configuration; a configuration is bad if any run fails.")
@click.option("--timeout", "timeout_s", type=float, metavar="S",
              help="Kill a check run (its whole process group) after S seconds: bad.")
@click.option("--shell", is_flag=True, help="Run --check with /bin/sh -c.")
@click.option("--restart", is_flag=True, help="Restart the targets' services after each "
              "toggle and wait for their health checks; a service that does not come up "
              "healthy makes that configuration bad.")
@click.option("--keep-result", is_flag=True, help="End with the culprits reverted instead of "
              "where the bisect started.")
@click.option("--clear-suspects", is_flag=True, help="When the failure is not in these entries, "
              "clear the suspects among them, with the bisect as the reason.")
@click.option("--upgrade", metavar="ID", help="Bisect what upgrade entry ID changed: each "
              "default it moved under the target's unset knobs is pinned back to the old "
              "release's (temporary entries, gone at the end), telling the release itself "
              "from a moved default; the pin to record is offered.")
@click.option("--force", is_flag=True, help="reset: put the starting state back over drift.")
@json_option
@dry_run_option
@click.pass_context
def bisect(ctx, refs, check, cls, all_applied, runs, timeout_s, shell, restart, keep_result,
           clear_suspects, upgrade, force, json_out, dry_run) -> None:
    """Find which entries make a check fail, by reverting subsets of them.

    \b
    Confirms the failure with every selected entry applied, then the baseline with all
    of them reverted, then searches: one culprit, or a minimal set that fails only
    together, or "not in these entries".  Each step is recorded and committed under
    bisect/<id>/; the workspace ends exactly where it started.

    \b
      ledger bisect --class perf --check './harness.sh --rounds 8' --timeout 120
      ledger bisect --all-applied --check 'python check.py' --runs 3
      ledger bisect --upgrade 3f2a9c01 --check './bench_gate.sh'
      ledger bisect reset
    """
    resetting = check is None and refs[:1] == ("reset",)
    s = ctx.find_object(State).session(ctx, recover_bisect=not resetting)
    if check is None and refs and refs[0] in ("reset", "show"):
        return _reset(ctx, s, refs, force, json_out) if refs[0] == "reset" else \
            _show(ctx, s, refs, json_out)
    if check is None:
        raise UsageError("--check CMD is required (or `ledger bisect reset` / `show`)")
    if force:
        raise UsageError("--force only goes with `ledger bisect reset`")
    from ledger.commands import bisect as ops

    opts = ops.Options(check=check, refs=refs, cls=cls, all_applied=all_applied, runs=runs,
                       restart=restart, timeout_s=timeout_s, shell=shell, dry_run=dry_run,
                       keep_result=keep_result, clear_suspects=clear_suspects,
                       upgrade=upgrade)
    quiet = wants_json(ctx, json_out)
    result = ops.bisect(s, opts, Path(os.getcwd()),
                        progress=(lambda m: None) if quiet else
                        (lambda m: click.echo(safe(m), err=True)))
    if quiet:
        return emit_json(_result_json(result))
    if result.dry_run:
        return _print_dry_run(result)
    _print_result(result)


def _result_json(result) -> dict:
    return {"id": result.id, "dry_run": result.dry_run,
            "selection": [e.id for e in result.selection],
            "check": result.check.to_dict(), "record": result.record,
            "commit": result.commit, "cleared": result.cleared,
            "kept": result.kept, "max_checks": result.max_checks,
            "final_restart": result.final_restart, "upgrade": result.upgrade}


def _print_upgrade(upgrade: dict | None) -> None:
    if not upgrade:
        return
    click.echo(f"upgrade {upgrade['entry']} ({safe(str(upgrade['from']))} -> "
               f"{safe(str(upgrade['to']))}) on {safe(str(upgrade['target']))}: "
               f"{len(upgrade['moved'])} moved default(s) tried, each pinned back by a "
               "temporary entry")
    for reason in upgrade["left_out"]:
        click.echo(f"  left out: {safe(reason)}")


def _print_dry_run(result) -> None:
    _print_upgrade(result.upgrade)
    n = len(result.selection)
    click.echo(f"would bisect over {n} entr{'y' if n == 1 else 'ies'} with "
               f"{result.runs} run{'s' if result.runs != 1 else ''} per configuration:")
    click.echo(table([[e.id, e.cls, e.state, e.title] for e in result.selection]))
    click.echo(f"check: {safe(' '.join(result.check.argv))}"
               + (f"  (timeout {result.check.timeout_s:g}s)" if result.check.timeout_s else ""))
    off = [e.id for e in result.selection if not e.applied]
    click.echo("step 1 (confirm): all selected applied"
               + (f" — would re-apply {', '.join(off)} for it" if off else ""))
    click.echo("step 2 (baseline): all selected reverted")
    click.echo(f"then, for one culprit, at most {result.max_checks} checks in all; the "
               "workspace ends where it started. Nothing changed.")


def _print_result(result) -> None:
    rec = result.record
    c = result.conclusion or {}
    click.echo(f"bisect {result.id}: {len(rec['steps'])} checks over "
               f"{len(result.selection)} entries")
    _print_upgrade(result.upgrade)
    for line in str(c.get("text", "")).splitlines():
        click.echo(safe(line))
    conf = c.get("confidence") or {}
    if conf.get("text") and c.get("kind") != "cannot-reproduce":
        click.echo(f"confidence: {safe(conf['text'])}")
    if c.get("kind") == "cannot-reproduce":
        last = (rec["steps"][0]["runs"] or [{}])[-1].get("tail") or []
        if last:
            click.echo("last lines of the check:")
            for line in last[-5:]:
                click.echo(f"  {safe(line)}")
    for eid in result.cleared:
        click.echo(f"cleared {eid}: {safe('the failure persists with all selected reverted')}")
    for eid in result.kept:
        click.echo(f"kept reverted {eid} (--keep-result)")
    suggest = [] if result.cleared else c.get("suggest") or []
    if suggest and not result.kept:
        click.echo("next:" if len(suggest) == 1 else "next (any one of):")
        for cmd in suggest:
            click.echo(f"  {safe(cmd)}")
    back = result.final_restart
    if back is not None:
        names = ", ".join(st["target"] for st in back["steps"])
        click.echo(f"restarted {names} on the starting configuration: "
                   + ("healthy" if back["ok"] else "FAILED (see `ledger status --live`)"))
    if result.commit:
        click.echo(f"record bisect/{result.id}/record.json; workspace commit "
                   f"{result.commit[:10]}; configuration as it started"
                   + (" (then the culprits reverted)" if result.kept else ""))
    else:
        click.echo("nothing changed")


def _reset(ctx, s, refs, force, json_out) -> None:
    from ledger.commands import bisect as ops

    if len(refs) > 1:
        raise UsageError("`ledger bisect reset` takes no arguments")
    notice = ops.reset(s, force=force)
    if wants_json(ctx, json_out):
        return emit_json({"reset": notice is not None, "notice": notice})
    click.echo(safe(notice) if notice else "no bisect in progress: nothing to reset")


def _show(ctx, s, refs, json_out) -> None:
    from ledger.render.bisect import summary
    from ledger.render.bisect import timeline
    from ledger.store.bisect_state import list_records

    if len(refs) > 2:
        raise UsageError("`ledger bisect show` takes at most one bisect id")
    records = list_records(s.ws)
    if len(refs) == 2:
        records = [r for r in records if str(r.get("id", "")).startswith(refs[1])]
        if len(records) != 1:
            raise UsageError(f"{'no' if not records else 'more than one'} bisect matches "
                             f"{refs[1]!r} (`ledger bisect show` lists them)")
    if wants_json(ctx, json_out):
        return emit_json(records)
    if not records:
        return click.echo("no bisect recorded")
    if len(refs) == 1:
        for r in records:
            click.echo(f"{r['id']}  {r.get('status')}  {safe(summary(r))}")
        return
    r = records[0]
    click.echo(f"bisect {r['id']}  started {r.get('started')}  {r.get('status')}")
    click.echo(f"  check     {safe(r['check']['text'])}  ({r.get('runs')} run(s) per step)")
    click.echo(f"  result    {safe(summary(r))}")
    click.echo(table([[t["n"], t["purpose"], f"{t['applied']} applied", t["verdict"],
                       t["exits"], f"{t['seconds']}s", t["last_line"]] for t in timeline(r)],
                     ["STEP", "PURPOSE", "CONFIG", "VERDICT", "EXITS", "TIME", "LAST LINE"]))
