"""`ledger render` and `ledger demo`."""

from __future__ import annotations

import contextlib
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
    """Write the change history as docs: index.html, CHANGELOG.md and entries/<id>.md,
    and each Markdown doc as an HTML page (CHANGELOG.html, entries/<id>.html)."""
    from ledger.commands.render import render as do_render

    s = ctx.find_object(State).session(ctx)
    fmts = [f.strip() for f in formats.split(",") if f.strip()]
    written = do_render(s.ws, Path(out) if out else None, fmts)
    for line in written_summary(written):
        click.echo(line)


def written_summary(written: list[Path]) -> list[str]:
    """What `render` wrote, truthfully: the count, each top-level file, and the entry
    pages counted by kind (a ledger of thousands would list thousands of lines)."""
    if not written:
        return ["wrote no files"]
    top = min((p.parent for p in written), key=lambda p: len(p.parts))
    lines = [f"wrote {len(written)} file{'s' if len(written) != 1 else ''} to {safe(top)}"]
    lines += [f"  {safe(p)}" for p in written if p.parent == top]
    below: dict[Path, dict[str, int]] = {}
    for p in written:
        if p.parent != top:
            kinds = below.setdefault(p.parent, {})
            kinds[p.suffix] = kinds.get(p.suffix, 0) + 1
    for d, kinds in below.items():
        counted = ", ".join(f"{n} {suffix}" for suffix, n in sorted(kinds.items()))
        lines.append(f"  {safe(d)}/: {counted}")
    return lines


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Use DIRECTORY even if it is not empty (an earlier "
              "demo's directory is replaced without it).")
@click.option("--runs", type=int, default=None, help="A/B runs per side [default: 8: as "
              "interleaved pairs, a shared machine's slow spells cancel within each pair; "
              "then up to 4 more pairs until the verdict is decided].")
@click.pass_context
def demo(ctx, directory, force, runs) -> None:
    """The whole story on the bundled engine, printed as a transcript you can retype.

    Every command runs from DIRECTORY/ledger with paths relative to it, and with the
    interpreter ledger runs on first on PATH (as an activated venv has it), so each printed
    line is exactly what ran.  Running it again on the same DIRECTORY replaces that demo.
    """
    from ledger.commands.demo import DEMO_RUNS
    from ledger.commands.demo import prepare

    d = prepare(Path(directory), force=force, runs=DEMO_RUNS if runs is None else runs)
    if d.replaced:
        click.echo(f"# {d.root} held an earlier demo: replaced it")
    click.echo(f"# knob ledger demo in {d.root}: the bundled engine as a git repo "
               "(engine-repo/), its serve scripts (deploy/), two patches (patches/).\n"
               "# Retype with the venv active (`ledger` and `python` on PATH): the first "
               f"commands from {d.root}, the rest from {d.workspace} (the `cd` lines say so).")
    click.echo(f"$ cd {shlex.quote(str(d.root))}")
    click.echo("$ ledger init ledger --engine-repo engine-repo --root deploy=deploy "
               "--root engine=engine-repo")
    click.echo("$ cd ledger")
    with _demo_env(d.workspace):
        try:
            for step in d.steps:
                _run_step(ctx, d, step)
        finally:
            click.echo(f"\n# stop the demo's server\n$ {shlex.join(d.stop)}")
            subprocess.run(list(d.stop), capture_output=True, timeout=60)
    click.echo(f"\n# done. The docs: {d.root / 'docs' / 'index.html'} (CHANGELOG.html beside "
               f"it); what the bugfix fixes: {d.root / 'docs' / 'bugfix-check.md'}; the "
               f"workspace: {d.workspace}")


def _run_step(ctx, d, step) -> None:
    """Print one step, run it, and keep whatever it printed (errors too) under it."""
    import sys

    click.echo(f"\n# {step.note}")
    if step.command:
        click.echo("$ " + shlex.join(step.command))
        rc = run_command_step(step)
    else:
        click.echo("$ ledger " + shlex.join(step.args))
        # One stream: an `error:` or warning line stays under the step that printed it,
        # wherever stdout and stderr are sent.
        with contextlib.redirect_stderr(sys.stdout):
            rc = run_nested(ctx.find_root().command, ["-C", str(d.workspace), *step.args])
    sys.stdout.flush()
    sys.stderr.flush()
    if rc == 130 and step.expect != 130:
        # The step said what it put back (its own `error: interrupted:` line); the demo
        # only stops its server (below) and exits as interrupted, without a second error.
        click.echo("# interrupted: rerun the same `ledger demo` command to start over")
        raise click.exceptions.Exit(130)
    if rc != step.expect:
        shown = shlex.join(step.command) if step.command else "ledger " + shlex.join(step.args)
        raise LedgerError(f"demo step `{shown}` exited {rc}, expected {step.expect}")
    if step.expect:
        click.echo(f"# exit {rc}, as the story expects: {step.expected_why}")


@contextlib.contextmanager
def _demo_env(workspace: Path):
    """Run from the workspace with this interpreter's bin/ first on PATH; undo after."""
    import os
    import sys

    cwd, path = os.getcwd(), os.environ.get("PATH", "")
    os.chdir(workspace)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), path])
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ["PATH"] = path


def run_command_step(step, timeout: float = 180.0) -> int:
    """Run a step's own command (starting the demo's server, a fault check) and wait for the
    step's URL if it has one; its exit code."""
    import time
    import urllib.request

    done = subprocess.run(list(step.command), capture_output=True, text=True, timeout=timeout)
    click.echo(done.stdout.rstrip())
    if done.returncode != step.expect and done.stderr.strip():
        click.echo(done.stderr.rstrip()[-2000:])
    if done.returncode != step.expect or not step.wait_url:
        return done.returncode
    deadline = time.monotonic() + timeout
    while step.wait_url:
        try:
            with urllib.request.urlopen(step.wait_url, timeout=2):
                click.echo(f"{step.wait_url}: up")
                return 0
        except OSError:
            gone = service_gone(Path(step.pid_file)) if step.pid_file else None
            if gone:  # it died before it answered: say why now, do not wait it out
                raise LedgerError(gone) from None
            if time.monotonic() > deadline:
                raise LedgerError(f"{step.wait_url} did not answer within {timeout:g}s")
            time.sleep(0.25)


def service_gone(pid_file: Path) -> str | None:
    """Why the service of ``pid_file`` is not running (its log's tail, the likely
    cause), or None while it runs or has not written its pid yet."""
    from ledger.procs import exited_report
    from ledger.procs import pid_alive
    from ledger.procs import service_log

    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or pid_alive(int(text)):
        return None
    return exited_report(f"the service (pid {text}, {pid_file}) exited before it answered",
                         service_log(pid_file))


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
