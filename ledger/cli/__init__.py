"""The `ledger` command line: parse, call one library function, format what comes back.

Each command family has a module here that mirrors the library module deciding it:
``ledger/cli/record.py`` parses `ledger record …` and calls ``ledger/commands/record.py``;
likewise ``setup`` (init, target), ``roots`` (root add, root list), ``revert`` (revert, suspect, clear, amend), ``restore``, ``report``
(list, show, status, diff, log), ``evidence`` (ab, evidence), ``docs`` (render, demo),
``backups`` and ``sync`` (pull, push, the merge driver).  This module holds the group and
the one place errors are caught:
:class:`~ledger.errors.LedgerError` → ``error: …`` on stderr and the error's exit code (1
refused/failed, 2 usage); ``--debug`` shows the traceback.  Ctrl-C or SIGTERM: ``error: interrupted: …`` saying
what was put back and kept, exit 130; a closed pipe (``| head``): quiet, exit 141; click's
own usage errors: ``error: …``, exit 2.  ``diff --exit-code`` exits 3
when something is off the table.  Heavy modules (git, pandas, torch, matplotlib) are
imported inside commands, so ``ledger --help`` stays fast.
"""

from __future__ import annotations

import gc
import sys

import click

from ledger.cli.adopt import adopt
from ledger.cli.backups import backups
from ledger.cli.bisect import bisect
from ledger.cli.check import check
from ledger.cli.common import State
from ledger.cli.common import set_argv
from ledger.cli.docs import demo
from ledger.cli.docs import render
from ledger.cli.doctor import doctor
from ledger.cli.evidence import ab
from ledger.cli.evidence import evidence
from ledger.cli.record import record
from ledger.cli.report import diff
from ledger.cli.report import list_cmd
from ledger.cli.report import log
from ledger.cli.report import show
from ledger.cli.report import status
from ledger.cli.revert import amend
from ledger.cli.revert import clear
from ledger.cli.restore import restore
from ledger.cli.revert import revert
from ledger.cli.revert import suspect
from ledger.cli.roots import root
from ledger.cli.setup import init
from ledger.cli.setup import target
from ledger.cli.sync import merge_driver
from ledger.cli.sync import pull
from ledger.cli.sync import push
from ledger.cli.upgrade import record_upgrade
from ledger.cli.upgrade import upgrade
from ledger.errors import LedgerError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LedgerGroup(click.Group):
    """Catches LedgerError once: `error: …` on stderr, the error's exit code.

    ``--debug`` re-raises, so the traceback shows.  OS errors that escape the library
    (a disk full, a permission denied) get the same treatment with the file named.
    """

    def main(self, args=None, *rest, **kwargs):
        argv = list(args) if args is not None else sys.argv[1:]
        bad = _not_utf8(argv)
        if bad is not None:
            # Everything typed is stored as UTF-8 text (YAML, JSON, git messages, the lock
            # file): refuse up front rather than fail half-way through.
            click.echo(f"error: argument {bad[0]} is not valid UTF-8: {bad[1]}", err=True)
            sys.exit(1)
        previous = set_argv(argv)
        try:
            with _sigterm_as_interrupt():
                return super().main(argv, *rest, **kwargs)
        except BrokenPipeError:
            _quiet_closed_pipe()
        finally:
            set_argv(previous)

    def resolve_command(self, ctx: click.Context, args):
        """click's own resolution, except that a mistyped command gets the closest names
        best first (click lists them alphabetically: `restor` offered `record` first)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            from ledger.core.names import close_names

            close = close_names(name, self.list_commands(ctx))
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as e:
            _usage_error(e)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except click.ClickException as e:
            _usage_error(e)
        except LedgerError as e:
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            click.echo(f"error: {e}", err=True)
            ctx.exit(e.exit_code)
        except (KeyboardInterrupt, click.exceptions.Abort):
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            # No layer claimed it (a transaction, a bisect or an A/B says what it put
            # back): the command stopped outside any write.
            shown = " ".join(sys.argv[1:2] if ctx.invoked_subcommand is None else
                             [ctx.invoked_subcommand])
            click.echo(f"error: interrupted: `ledger {shown}` stopped outside any write: "
                       "nothing was half-done (every change is all or nothing; `ledger log` "
                       "shows what committed)", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            _quiet_closed_pipe()
        except OSError as e:
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            where = f"{e.filename}: " if getattr(e, "filename", None) else ""
            click.echo(f"error: {where}{e.strerror or e}", err=True)
            ctx.exit(1)


def _usage_error(e: click.ClickException) -> None:
    """click's own errors (a missing argument, an unknown option) in the tool's ``error:``
    style, with the usage line and the help hint; exit 2 for usage, else click's code."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())
    if no_args and isinstance(e, no_args):  # a bare `ledger` or `ledger record`: the help
        e.show()
        raise click.exceptions.Exit(e.exit_code)
    ctx = getattr(e, "ctx", None)
    if isinstance(e, click.UsageError) and ctx is not None:
        click.echo(ctx.get_usage(), err=True)
    click.echo(f"error: {e.format_message()}", err=True)
    if isinstance(e, click.UsageError) and ctx is not None and ctx.command.get_help_option(ctx):
        click.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
    raise click.exceptions.Exit(e.exit_code)


def _quiet_closed_pipe() -> None:
    """The reader went away (``ledger log | head``): stop quietly, as git does, with the
    exit code of a process a SIGPIPE ended (141); nothing more is written to the pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(141)


class _sigterm_as_interrupt:
    """SIGTERM (a `kill`, systemd, a CI timeout) stops a command as Ctrl-C does: the same
    put-back paths run and the same ``error: interrupted: …`` line is printed."""

    def __enter__(self):
        import signal
        import threading

        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        return self

    def __exit__(self, *exc):
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _not_utf8(argv: list[str]) -> tuple[int, str] | None:
    """(position, shown with escapes) of the first argument that is not valid UTF-8."""
    for i, a in enumerate(argv, start=1):
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            return i, a.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


@click.group(cls=LedgerGroup, context_settings=CONTEXT)
@click.option(
    "-C",
    "--workspace",
    metavar="DIR",
    help="Workspace directory (default: search upward for ledger.yaml; env LEDGER_WORKSPACE).",
)
@click.option("--json", "json_out", is_flag=True, help="JSON output on read commands.")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.option("--color", "--colour", "color", type=click.Choice(["auto", "always", "never"]),
              default="auto", show_default=True,
              help="Colour the output: auto = on a terminal unless NO_COLOR is set.")
@click.version_option(package_name="knob-ledger", prog_name="ledger")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, json_out: bool, debug: bool,
        color: str) -> None:
    """knob ledger: every knob change and engine patch, classified perf or bugfix, with
    evidence — and safe, class-selective rollback and claw-back.

    \b
    The incident story, in commands:
      ledger suspect ID --why "harness hangs"   take a perf change off the table
      ledger diff                               see what is off the table, and why
      ledger clear ID --why "proxy was it"      exonerate it
      ledger restore --perf-only                claw the perf back, with its evidence
    """
    from ledger.cli.output import set_colour_mode

    set_colour_mode("never" if json_out else color)
    if color == "always" and not json_out:
        ctx.color = True  # click.echo strips colour from a pipe unless told
    ctx.obj = State(workspace, json_out, debug)


for command in (init, target, root, record, adopt, list_cmd, show, status, diff, log, revert, restore, suspect,
                clear, amend, bisect, ab, evidence, render, demo, backups, doctor, pull, push,
                merge_driver, check, upgrade):
    cli.add_command(command)
record.add_command(record_upgrade)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    One command is a short process that loads the whole ledger (10,000 entries are some
    40,000 objects, none of them garbage): with the cyclic collector's default threshold
    it walks them again and again while they load, a third of a ``status`` at that size.
    The first generation is collected every 100,000 allocations instead (as mypy's main
    does); reference counting frees everything else as always.

    When the command is done, every object left is frozen out of the collector's reach
    (``gc.freeze``): the interpreter's shutdown would otherwise walk them all in full
    collections as it tears the modules down, some 0.2 s after a ``revert`` at that
    size, to find no garbage.  They are still freed, atexit handlers still run and the
    streams are still flushed: only the pointless walks are skipped."""
    gc.set_threshold(100_000, 20, 20)
    from ledger.store.cache import keep_catalogs

    keep_catalogs()  # parsed catalogs from the local cache (ledger.store.cache)
    try:
        cli.main(args=argv, prog_name="ledger")
    finally:
        gc.freeze()
