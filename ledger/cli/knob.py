"""`ledger knob NAME [--engine E] [--json]`: a knob's history across engine releases."""

from __future__ import annotations

import click

from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json

_LABELS = {"sglang": "SGLang", "vllm": "vLLM", "knob-ledger-engine": "knob-ledger-engine"}
_KINDS = {"knobs": "env var", "flags": "flag", "fields": "config field", "removed": "removed name"}


@click.command("knob", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("--engine", type=click.Choice(sorted(_LABELS)), help="Only this engine's releases.")
@json_option
@click.pass_context
def knob(ctx, name, engine, json_out) -> None:
    """A knob's or flag's history across the catalogued engine releases: the releases it
    exists in, its type, default and choices by release, deprecation and renames.

    \b
      ledger knob SGLANG_ENABLE_JIT_DEEPGEMM
      ledger knob --max-num-seqs --engine vllm
      ledger knob --compilation-config.cudagraph_mode
      ledger knob ENGINE_MAX_RUNNING_REQUESTS --engine knob-ledger-engine

    A flag is named as written (``--max-num-seqs``); a config-object key as
    ``--flag.key``.  No workspace is read and nothing is fetched: the history is
    the one the installed package catalogues.
    """
    from ledger.commands.knob import knob_histories

    found = knob_histories(name, engine)
    if wants_json(ctx, json_out):
        emit_json([h.to_dict() for h in found])
        return
    for i, history in enumerate(found):
        if i:
            click.echo()
        click.echo(f"{history.name} ({_LABELS[history.engine]} {_KINDS[history.section]})")
        for line in history.lines():
            click.echo(f"  {line}")
