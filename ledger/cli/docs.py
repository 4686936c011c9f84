"""`ledger render` and `ledger demo`."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import click

from ledger.cli.common import State
from ledger.cli.output import safe
from ledger.errors import LedgerError


@click.command()
@click.option("--out", type=click.Path(file_okay=False), help="Output directory (default: "
              "docs/ in the workspace).")
@click.option("--format", "formats", default="md,html", show_default=True,
              help="Comma-separated: md, html.")
@click.pass_context
def render(ctx, out, formats) -> None:
    """Write the change history as docs: CHANGELOG.md, entries/<id>.md, index.html."""
    from ledger.commands.render import render as do_render

    s = ctx.find_object(State).session(ctx)
    fmts = [f.strip() for f in formats.split(",") if f.strip()]
    written = do_render(s.ws, Path(out) if out else None, fmts)
    click.echo(f"wrote {len(written)} files to {safe(written[0].parent if written else out)}")
    for p in written:
        if p.name in ("CHANGELOG.md", "index.html"):
            click.echo(f"  {safe(p)}")


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Use DIRECTORY even if it is not empty.")
@click.option("--runs", type=int, default=None, help="A/B runs per side [default: 8, "
              "enough for p < 0.05 with a shared machine's slow spells in the mix].")
@click.pass_context
def demo(ctx, directory, force, runs) -> None:
    """The whole story on the bundled engine, printed as a transcript you can retype."""
    from ledger.commands.demo import DEMO_RUNS
    from ledger.commands.demo import prepare

    d = prepare(Path(directory), force=force, runs=DEMO_RUNS if runs is None else runs)
    click.echo(f"# knob ledger demo in {d.root}: the bundled engine as a git repo "
               "(engine-repo/), its serve scripts (deploy/), two patches (patches/)")
    click.echo(f"$ ledger init {shlex.quote(str(d.workspace))} --engine-repo "
               f"{shlex.quote(str(d.root / 'engine-repo'))}")
    click.echo(f"$ cd {shlex.quote(str(d.workspace))}")
    try:
        for step in d.steps:
            click.echo(f"\n# {step.note}")
            if step.command:
                click.echo("$ " + shlex.join(step.command))
                run_command_step(step)
                continue
            click.echo("$ ledger " + " ".join(shlex.quote(a) for a in step.args))
            rc = run_nested(ctx.find_root().command, ["-C", str(d.workspace), *step.args])
            if rc != step.expect:
                raise LedgerError(f"demo step `ledger {' '.join(step.args)}` exited {rc}, "
                                  f"expected {step.expect}")
    finally:
        if d.stop:
            click.echo(f"\n# stop the demo's server\n$ {shlex.join(d.stop)}")
            subprocess.run(list(d.stop), capture_output=True, timeout=60)
    docs = d.root / "docs"
    click.echo(f"\n# done. The docs: {docs / 'index.html'} and {docs / 'CHANGELOG.md'}; "
               f"what the bugfix fixes: {docs / 'bugfix-check.md'}; the workspace: "
               f"{d.workspace}")


def run_command_step(step, timeout: float = 180.0) -> None:
    """Run a step's own command (starting the demo's server, a fault check), check its exit
    code against the step's, and wait for the step's URL if it has one."""
    import time
    import urllib.request

    done = subprocess.run(list(step.command), capture_output=True, text=True, timeout=timeout)
    click.echo(done.stdout.rstrip())
    if done.returncode != step.expect:
        raise LedgerError(f"demo step `{shlex.join(step.command)}` exited {done.returncode}, "
                          f"expected {step.expect}: {done.stderr[-2000:]}")
    deadline = time.monotonic() + timeout
    while step.wait_url:
        try:
            with urllib.request.urlopen(step.wait_url, timeout=2):
                click.echo(f"{step.wait_url}: up")
                return
        except OSError:
            if time.monotonic() > deadline:
                raise LedgerError(f"{step.wait_url} did not answer within {timeout:g}s")
            time.sleep(0.25)


def run_nested(cli: click.Command, argv: list[str]) -> int:
    """Run one `ledger` command (``cli`` is the root group) in this process; its exit code."""
    try:
        rv = cli.main(args=argv, prog_name="ledger", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return e.exit_code
    return rv if isinstance(rv, int) else 0
