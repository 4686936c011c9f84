"""`ledger evidence prom`: an entry's effect as production measured it (Prometheus)."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.evidence import evidence
from ledger.cli.output import safe
from ledger.evidence.defaults import PRIMARY_METRIC


@evidence.command("prom")
@click.argument("ref", metavar="ID")
@click.option("--prometheus", "url", required=True, metavar="URL",
              help="The Prometheus server that scrapes the engine (http://host:9090); the "
                   "only address this command reaches.")
@click.option("--window", default="20m", show_default=True, metavar="DUR",
              help="Length of each side: before the entry's latest change, and after it.")
@click.option("--warmup", default="5m", show_default=True, metavar="DUR",
              help="Time after the change left out (the restart, caches filling).")
@click.option("--match", default=None, metavar="SEL",
              help="Label matchers of the engine's series, e.g. '{job=\"decode\"}' (one "
                   "role: never the sum of router, prefill and decode).")
@click.option("--step", default=None, metavar="DUR",
              help="Query step, one sample each (default window/30, at least 1s; keep it "
                   "at two scrape intervals or more).")
@click.option("--metric", default=PRIMARY_METRIC, show_default=True,
              help="Primary metric (per load bin), e.g. median_itl_ms.")
@json_option
@click.pass_context
def evidence_prom(ctx, ref, url, window, warmup, match, step, metric, json_out) -> None:
    """Judge an entry by the metrics its engine exported before and after its latest
    change, read from Prometheus: observed in production, not a controlled A/B.  Stored
    as evidence (source observed) beside, never mixed with, bench runs."""
    from ledger.commands.observe import observe_evidence

    s = ctx.find_object(State).session(ctx)
    summary = observe_evidence(s, ref, url, window=window, warmup=warmup, match=match,
                               step=step, metric=metric)
    if wants_json(ctx, json_out):
        return emit_json(summary)
    seen = summary["observed"]
    click.echo(f"{summary['entry']}: {safe(summary['headline'])}")
    for w in seen["windows"]:
        click.echo(f"  side {w['side']}: {w['start']} .. {w['end']}")
    click.echo(f"  from {safe(seen['prometheus'])} {safe(seen['match'])}, "
               f"{seen['engine']} metric names{' ' + seen['release'] if seen['release'] else ''}"
               f", a sample every {seen['step_s']:g}s; load bins: requests in the engine "
               f"(running + queued); left out: {seen['idle_steps']} idle steps, "
               f"{seen['sparse_steps']} in bins the other side has fewer than 3 of")
    for key, sides in sorted(seen["bucket_resolution"].items()):
        click.echo(f"  {key}: histogram buckets A {sides.get('A', '-')}, "
                   f"B {sides.get('B', '-')} (interpolated inside a bucket)")
    for w in summary.get("warnings") or ():
        click.echo(f"  note: {safe(w)}")
