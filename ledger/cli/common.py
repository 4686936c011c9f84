"""What every `ledger` command module shares: the invocation state and output helpers."""

from __future__ import annotations

import json
import shlex
import sys

import click

# The arguments of the command being run (set by LedgerGroup.main), for history.
_ARGV: list[str] | None = None


def set_argv(argv: list[str] | None) -> list[str] | None:
    """Set the arguments of the command being run; return the previous ones."""
    global _ARGV
    previous, _ARGV = _ARGV, argv
    return previous


class State:
    """The global options of one invocation; ``session()`` opens the workspace."""

    def __init__(self, workspace: str | None, json_out: bool, debug: bool) -> None:
        self.workspace = workspace
        self.json = json_out
        self.debug = debug

    def session(self, ctx: click.Context, **options):
        from ledger.commands.session import open_session

        s = open_session(self.workspace, command_line(ctx), **options)
        bake = ctx.meta.get("ledger.bake")
        if bake:  # --bake and its options (ledger.cli.live.bake_options)
            from ledger.commands.observe import BakeSpec

            if "bake" not in bake:
                from ledger.errors import UsageError

                raise UsageError("--prometheus, --match and --bake-step go with --bake")
            s.bake = BakeSpec(bake.get("bake") or "", bake.get("prometheus"),
                              bake.get("match"), bake.get("bake_step"))
        for notice in s.notices:
            click.echo(f"note: {notice}", err=True)
        return s


def command_line(ctx: click.Context) -> str:
    """The command as typed after `ledger`, for history and backups (quoted, as data)."""
    args = _without_workspace_flag(_ARGV or [])
    return " ".join(shlex.quote(a) for a in args) or ctx.command_path


def _without_workspace_flag(args: list[str]) -> list[str]:
    """`-C DIR` says where, not what: history keeps the command itself."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-C", "--workspace"):
            skip = True
        elif not a.startswith("--workspace="):
            out.append(a)
    return out


def json_option(f):
    return click.option("--json", "json_out", is_flag=True, help="Print JSON for scripts.")(f)


def dry_run_option(f):
    return click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")(f)


def wants_json(ctx: click.Context, flag: bool) -> bool:
    return flag or ctx.find_object(State).json


def emit_json(data) -> None:
    """Sorted keys always; indented for a person at a terminal, compact for a pipe
    (the indenting encoder is pure Python and costs seconds on a 10,000-entry ledger)."""
    indent = 2 if sys.stdout.isatty() else None
    click.echo(json.dumps(data, indent=indent, sort_keys=True, default=str,
                          ensure_ascii=False))



def safe_diff(text: str) -> str:
    from ledger.cli.output import safe

    return "\n".join(safe(line) for line in text.split("\n"))


def print_files(applied, dry_run: bool) -> None:
    """A dry run's diffs, or the backup and commit a real run made."""
    if dry_run:
        for text in applied.files.values():
            click.echo(safe_diff(text), nl=False)
        if applied.patch_diff:
            click.echo(safe_diff(applied.patch_diff), nl=False)
    elif applied.commit:
        backup = f"backup {applied.backup_id}; " if applied.backup_id else ""
        click.echo(f"{backup}workspace commit {applied.commit[:10]}")
