"""`ledger root add|list`: named roots, so ledger.yaml holds no absolute path of one machine."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.cli.output import table


@click.group()
def root() -> None:
    """Named roots: where files outside the workspace live on each machine
    (ledger.yaml's roots, ledger.local.yaml, LEDGER_ROOT_<NAME>)."""


@root.command("add")
@click.argument("name")
@click.argument("directory")
@click.option("--local", is_flag=True, help="This machine's directory for the root, in the "
              "git-ignored ledger.local.yaml (the root is declared in ledger.yaml, with no "
              "default, if it is new).")
@dry_run_option
@click.pass_context
def root_add(ctx, name: str, directory: str, local: bool, dry_run: bool) -> None:
    """Declare root NAME at DIRECTORY; absolute paths under it become NAME:PATH."""
    from ledger.commands.roots import add_root

    s = ctx.find_object(State).session(ctx)
    r = add_root(s, name, directory, Path.cwd(), local=local, dry_run=dry_run)
    verb = "would add" if dry_run else "added"
    where = "ledger.local.yaml (this machine)" if r.local else "ledger.yaml"
    click.echo(f"{verb} root {r.name}: {safe(r.written)} in {where}; here {safe(r.directory)}")
    for what, (old, new) in r.rewritten.items():
        click.echo(f"  {what}: {safe(old)} -> {safe(new)}")


@root.command("list")
@json_option
@click.pass_context
def root_list(ctx, json_out: bool) -> None:
    """Each root: its directory on this machine and where that comes from."""
    from ledger.commands.roots import list_roots

    s = ctx.find_object(State).session(ctx)
    rows = list_roots(s.ws)
    if wants_json(ctx, json_out):
        return emit_json([r.to_dict() for r in rows])
    if not rows:
        click.echo("no roots (declare one with `ledger root add NAME DIR`)")
        return
    click.echo(table([[r.name, r.directory or "-", r.source or "-", r.default or "-"]
                      for r in rows], ["ROOT", "DIRECTORY (HERE)", "FROM", "DEFAULT"],
                     max_width=60))
    for r in rows:
        if r.problem:
            click.echo(f"warning: {r.problem}", err=True)
