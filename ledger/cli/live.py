"""Formatting for the running services: ``--restart`` outcomes, the "running service
differs" note of mutating commands, and ``ledger status --live``."""

from __future__ import annotations

import shlex

import click

from ledger.cli.output import paint
from ledger.cli.output import safe
from ledger.cli.output import show_value
from ledger.cli.output import table
from ledger.cli.output import terminal_width
from ledger.cli.output import use_colour
from ledger.errors import LedgerError


def restart_option(f):
    f = bake_options(f)
    return click.option(
        "--restart", is_flag=True,
        help="After the change, restart each touched target's service (restart: in "
             "ledger.yaml) and wait for its health check; roll back if it fails.")(f)


def _keep_bake(ctx, param, value):
    """``--bake``/``--prometheus``/``--match``/``--bake-step`` go to the session (read by
    State.session), not to each command's signature."""
    if value is not None:
        ctx.meta.setdefault("ledger.bake", {})[param.name] = value
    return value


def bake_options(f):
    """``--bake DURATION --prometheus URL [--match SEL] [--bake-step DUR]`` (with
    --restart): ledger.commands.observe.bake_verdict."""
    for name, metavar, text in (
            ("--bake-step", "DUR", "Prometheus query step of the bake (default bake/30)."),
            ("--match", "SEL", "Label matchers of the restarted engine's series, e.g. "
                               "'{job=\"decode\"}'."),
            ("--prometheus", "URL", "The Prometheus server that scrapes the restarted engine "
                                    "(for --bake)."),
            ("--bake", "DURATION", "With --restart: after the health gate, wait DURATION "
                                   "(e.g. 10m), compare the engine's metrics before and "
                                   "after in Prometheus, and roll back as a failed health "
                                   "check does when they regress (ledger.yaml guards).")):
        f = click.option(name, metavar=metavar, default=None, expose_value=False,
                         callback=_keep_bake, help=text)(f)
    return f


def print_live(ctx, outcome) -> None:
    """What happened to the running services; exit 1 when a health check failed."""
    for p in outcome.planned:
        click.echo(f"would restart {p.target}: {safe(shlex.join(p.argv))}")
        click.echo(f"    then wait for health: {safe(p.health)}")
    if outcome.restart is not None:
        for step in outcome.restart.steps:
            click.echo(safe(step.describe()))
    if outcome.rollback_commit:
        click.echo(f"rolled back: workspace commit {outcome.rollback_commit[:10]} "
                   "(files and entries as before the command)")
        for step in outcome.rollback_restart.steps if outcome.rollback_restart else ():
            click.echo(f"after the rollback: {safe(step.describe())}")
    if outcome.bake is not None:
        click.echo(safe(outcome.bake.describe()))
    for commit in outcome.record_commits:
        click.echo(f"restarts recorded: workspace commit {commit[:10]}")
    for t in outcome.differing:
        obs = t.observed
        click.echo(f"pending restart: {t.target}'s running service (pid {obs.pid}, started "
                   f"{obs.started or '?'}) differs from its file:")
        for k in t.pending:
            click.echo(f"    {k.knob}: file {show_value(k.file)}, process "
                       f"{show_value(k.process)}")
        click.echo("    restart it (or rerun with --restart)")
    if outcome.failed:
        if outcome.rollback_commit:
            again = outcome.rollback_restart
            tail = "the service is healthy on the old configuration" if again and again.ok \
                else "the service is NOT healthy after the rollback either: check it now"
            what = "the bake found a regression" if outcome.bake is not None and \
                not outcome.bake.ok and not outcome.bake.error else \
                "the bake could not read Prometheus" if outcome.bake is not None and \
                not outcome.bake.ok else "health check failed"
            raise LedgerError(f"{what} after the change; rolled back ({tail})")
        raise LedgerError(outcome.error or "restart failed")


STATE_STYLE = {"live": "applied", "pending restart": "reverted", "drift": "drift",
               "not running": "suspected", "unreadable": "dim"}


def live_value(value: str | None, default: object = None, effective: str | None = None) -> str:
    """A ``status --live`` cell: ``(unset, effective 2048)`` where the server reports what it
    runs with, else ``(unset, default 2048)`` from the catalogs; a set value the server
    reads otherwise (``auto`` it resolves) shows both."""
    from ledger.values import default_text

    if value is None:
        if effective is not None:
            return f"(unset, effective {safe(effective)})"
        return show_value(None) if default is None else f"(unset, default {safe(default_text(default))})"
    if effective is None or _same_number(value, effective):
        return show_value(value)
    return f"{safe(value)} (effective {safe(effective)})"


def _same_number(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def print_status_live(reports) -> None:
    colour = use_colour()
    if not reports:
        click.echo("no target has a live probe (ledger target set NAME --live ...)")
    for r in reports:
        obs = r.observed
        where = f"pid {obs.pid}" if obs.pid else obs.state
        click.echo(f"{r.target}: {safe(obs.probe.describe() if obs.probe else 'no probe')} "
                   f"-> {where}" + (f", started {obs.started}" if obs.started else "")
                   + (f", read from {safe(obs.source)}" if obs.source else ""))
        if obs.detail:
            click.echo(f"    {safe(obs.detail)}")
        if r.error:
            click.echo(f"    {safe(r.error)}")
        rows = [[k.knob, paint(k.state, STATE_STYLE.get(k.state, ""), colour),
                 live_value(k.ledger, k.default) if k.managed else "-", live_value(k.file, k.default),
                 "?" if k.state in ("unreadable", "not running")
                 else live_value(k.process, k.default, k.effective)]
                for k in r.knobs]
        if rows:
            width = terminal_width()
            shown = table(rows, ["KNOB", "STATE", "LEDGER", "FILE", "PROCESS"],
                          keep=(0, 2, 3, 4), width=None if width is None else width - 4)
            click.echo("\n".join("    " + line for line in shown.splitlines()))
    ambiguous = [r for r in reports if r.ambiguous]
    if ambiguous:
        raise LedgerError("; ".join(f"{r.target}: {r.observed.detail}" for r in ambiguous))
