"""The `ledger` command line: parse, call one library function, format what comes back.

All decisions live in the library (``ledger.commands.ops``, ``ledger.commands.report`` and friends); this
module only turns arguments into calls and results into text or JSON.  Errors are
:class:`~ledger.errors.LedgerError` subclasses, caught once in :func:`main`: ``error: …``
on stderr and the error's exit code (1 refused/failed, 2 usage); ``--debug`` shows the
traceback.  ``diff --exit-code`` exits 3 when something is off the table.

The evidence commands live in ``cli_evidence.py``, ``render`` and ``demo`` in
``cli_docs.py``, the backup store's in ``cli_backups.py``; what they share in
``cli_common.py``.  Heavy modules (git, pandas, torch, matplotlib) are imported inside
commands, so ``ledger --help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ledger.cli.backups import backups
from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import safe_diff
from ledger.cli.common import set_argv
from ledger.cli.common import wants_json
from ledger.cli.docs import demo
from ledger.cli.docs import render
from ledger.cli.evidence import ab
from ledger.cli.evidence import evidence
from ledger.errors import LedgerError
from ledger.errors import UsageError
from ledger.cli.output import paint
from ledger.cli.output import safe
from ledger.cli.output import show_value
from ledger.cli.output import table
from ledger.cli.output import use_colour

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

class LedgerGroup(click.Group):
    """Catches LedgerError once: `error: …` on stderr, the error's exit code.

    ``--debug`` re-raises, so the traceback shows.  OS errors that escape the library
    (a disk full, a permission denied) get the same treatment with the file named.
    """

    def main(self, args=None, *rest, **kwargs):
        argv = list(args) if args is not None else sys.argv[1:]
        previous = set_argv(argv)
        try:
            return super().main(argv, *rest, **kwargs)
        finally:
            set_argv(previous)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LedgerError as e:
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            click.echo(f"error: {e}", err=True)
            ctx.exit(e.exit_code)
        except OSError as e:
            if isinstance(ctx.obj, State) and ctx.obj.debug:
                raise
            where = f"{e.filename}: " if getattr(e, "filename", None) else ""
            click.echo(f"error: {where}{e.strerror or e}", err=True)
            ctx.exit(1)


@click.group(cls=LedgerGroup, context_settings=CONTEXT)
@click.option(
    "-C",
    "--workspace",
    metavar="DIR",
    help="Workspace directory (default: search upward for ledger.yaml; env LEDGER_WORKSPACE).",
)
@click.option("--json", "json_out", is_flag=True, help="JSON output on read commands.")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(package_name="knob-ledger", prog_name="ledger")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, json_out: bool, debug: bool) -> None:
    """knob ledger: every knob change and engine patch, classified perf or bugfix, with
    evidence — and safe, class-selective rollback and claw-back.

    \b
    The incident story, in commands:
      ledger suspect ID --why "harness hangs"   take a perf change off the table
      ledger diff                               see what is off the table, and why
      ledger clear ID --why "proxy was it"      exonerate it
      ledger restore --perf-only                claw the perf back, with its evidence
    """
    ctx.obj = State(workspace, json_out, debug)


# -- workspace and targets ---------------------------------------------------------------


@cli.command()
@click.argument("directory", required=False, default=".", type=click.Path(file_okay=False))
@click.option("--engine-repo", metavar="PATH", help="Git checkout of the engine that patch "
              "entries apply to.")
@dry_run_option
def init(directory: str, engine_repo: str | None, dry_run: bool) -> None:
    """Create a workspace (a git repo with ledger.yaml) in DIRECTORY."""
    from ledger.commands.ops import init_workspace

    root = init_workspace(Path(directory), engine_repo, dry_run=dry_run)
    verb = "would initialise" if dry_run else "initialised"
    click.echo(f"{verb} ledger workspace in {safe(root)}")


@cli.group()
def target() -> None:
    """Manage the config files under the ledger's care."""


@target.command("add")
@click.argument("name")
@click.argument("path")
@click.option("--format", "fmt", required=True, type=click.Choice(["bash", "dotenv", "k8s"]),
              help="File format.")
@click.option("--container", help="k8s: the container whose env list holds the knobs.")
@dry_run_option
@click.pass_context
def target_add(ctx, name: str, path: str, fmt: str, container: str | None, dry_run: bool) -> None:
    """Put the file PATH under management as target NAME."""
    from ledger.commands.ops import add_target

    s = ctx.find_object(State).session(ctx)
    t = add_target(s, name, path, fmt, container, Path.cwd(), dry_run)
    verb = "would add" if dry_run else "added"
    click.echo(f"{verb} target {t.name}: {safe(t.path)} ({t.format})")


@target.command("list")
@json_option
@click.pass_context
def target_list(ctx, json_out: bool) -> None:
    """The managed files."""
    s = ctx.find_object(State).session(ctx)
    targets = [{"name": n, **t.to_dict()} for n, t in s.ws.config.targets.items()]
    if wants_json(ctx, json_out):
        return emit_json(targets)
    click.echo(table([[t["name"], t["format"], t["path"]] for t in targets],
                     ["TARGET", "FORMAT", "PATH"], max_width=100))


# -- record ----------------------------------------------------------------------------


@cli.group()
def record() -> None:
    """Record a change: a knob in a target, or a patch to the engine."""


def record_options(f):
    f = click.option("--why", default="", help="Why the change was made.")(f)
    f = click.option("--title", required=True, help="One line: what the change is.")(f)
    f = click.option("--class", "cls", required=True, type=click.Choice(["perf", "bugfix"]),
                     help="perf (for speed) or bugfix (fixes a real problem).")(f)
    return f


@record.command("knob")
@click.argument("target_name", metavar="TARGET")
@click.argument("assignment", metavar="KNOB=VALUE | KNOB")
@record_options
@click.option("--unset", is_flag=True, help="Remove the knob (give KNOB alone).")
@click.option("--adopt", is_flag=True, help="Record a change already made by hand.")
@click.option("--before", help="With --adopt: the value before the hand edit.")
@click.option("--before-unset", is_flag=True, help="With --adopt: the knob was unset before.")
@click.option("--no-validate", is_flag=True, help="Skip the catalog's type and range checks.")
@click.option("--force", is_flag=True, help="Overwrite drift in the target.")
@json_option
@dry_run_option
@click.pass_context
def record_knob(ctx, target_name, assignment, cls, title, why, unset, adopt, before,
                before_unset, no_validate, force, json_out, dry_run) -> None:
    """Change KNOB in TARGET (with backup) and record the entry."""
    from ledger.commands.ops import record_knob as do_record

    if unset:
        if "=" in assignment:
            raise UsageError("--unset takes the knob name alone, not KNOB=VALUE")
        knob, value = assignment, None
    else:
        if "=" not in assignment:
            raise UsageError(f"expected KNOB=VALUE, got {assignment!r} (or use --unset)")
        knob, value = assignment.split("=", 1)
    if before is not None and before_unset:
        raise UsageError("give --before VALUE or --before-unset, not both")
    s = ctx.find_object(State).session(ctx)
    r = do_record(s, target=target_name, knob=knob, value=value, cls=cls, title=title, why=why,
                  adopt=adopt, before=before, before_given=before is not None or before_unset,
                  no_validate=no_validate, force=force, dry_run=dry_run)
    for w in r.warnings:
        click.echo(f"warning: {w}", err=True)
    if wants_json(ctx, json_out):
        return emit_json(_recorded_json(r.entry, r.applied, dry_run, r.warnings))
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if adopt else "recorded")
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}")
    click.echo(f"  {e.target}: {e.knob} {show_value(e.before)} -> {show_value(e.after)}")
    _print_files(r.applied, dry_run)


def _recorded_json(entry, applied, dry_run: bool, warnings: list[str]) -> dict:
    """The new entry itself (so `jq .id` works), plus what the command did."""
    return {**entry.to_dict(), "dry_run": dry_run, "backup": applied.backup_id,
            "commit": applied.commit, "files": applied.files,
            "patch_diff": applied.patch_diff, "warnings": warnings}


@record.command("patch")
@click.argument("patch_file", required=False, type=click.Path(dir_okay=False))
@click.option("--commit", "rev", metavar="REV", help="Adopt a commit already in the engine repo.")
@record_options
@json_option
@dry_run_option
@click.pass_context
def record_patch(ctx, patch_file, rev, cls, title, why, json_out, dry_run) -> None:
    """Apply PATCH_FILE to the engine repo (or adopt --commit REV) and record it."""
    from ledger.patches.entries import record_patch as do_record

    if bool(patch_file) == bool(rev):
        raise UsageError("give a patch FILE or --commit REV (one of them)")
    s = ctx.find_object(State).session(ctx)
    r = do_record(s, patch_file=patch_file, rev=rev, cls=cls, title=title, why=why,
                  dry_run=dry_run)
    if wants_json(ctx, json_out):
        return emit_json(_recorded_json(r.entry, r.applied, dry_run, []))
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if rev else "recorded")
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}")
    click.echo(f"  patch {', '.join(safe(f) for f in e.files)} (sha256 {e.sha256[:12]})")


# -- read commands ---------------------------------------------------------------------


def _state_cell(row: dict, colour: bool) -> str:
    state = row["display_state"]
    return paint(state, state.split(" ")[0], colour)


@cli.command("list")
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
        ["ID", "CLASS", "STATE", "TITLE", "CHANGE", "EVIDENCE"], max_width=48))


@cli.command()
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
    click.echo(f"  change    {safe(d['change'])}" + (f"   in {d['target']}" if d.get("target") else ""))
    if d["why"]:
        click.echo(f"  why       {safe(d['why'])}")
    if d["suspicion"]:
        click.echo(f"  suspected {safe(d['suspect_why'])}")
        if d["suspicion"] == "cleared":
            click.echo(f"  cleared   {safe(d['clear_why'])}")
    click.echo(f"  evidence  {safe(d['evidence'])}")
    click.echo("  history")
    click.echo(_indent(table([[a["at"], a["action"], a["why"]] for a in d["history"]],
                             max_width=80), 4))


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


@cli.command()
@json_option
@click.pass_context
def status(ctx, json_out) -> None:
    """Each entry's recorded state against what is live; drift; suspects."""
    from ledger.commands.report import status as do_status

    s = ctx.find_object(State).session(ctx)
    st = do_status(s.ws)
    if wants_json(ctx, json_out):
        return emit_json(st.to_dict())
    colour = use_colour()
    rows = []
    for r in st.entries:
        live = "ok" if r["ok"] else paint("UNREADABLE" if r.get("unreadable") else "DRIFT",
                                          "drift", colour)
        rows.append([r["id"], r["class"], _state_cell(r, colour), r["change"], live, r["title"]])
    click.echo(table(rows, ["ID", "CLASS", "STATE", "CHANGE", "LIVE", "TITLE"], max_width=44)
               if rows else "no entries")
    _print_drift(st.drift, colour)
    suspects = [r for r in st.entries if r["suspicion"] == "suspected"]
    if suspects:
        click.echo("\nunder suspicion: " + ", ".join(f"{r['id']} {safe(r['title'])}" for r in suspects))
    for err in st.errors:
        click.echo(f"warning: {err}", err=True)


def _print_drift(drifts, colour: bool) -> None:
    if not drifts:
        return
    click.echo("\n" + paint("drift (live differs from the ledger):", "drift", colour))
    for d in drifts:
        click.echo(f"  {safe(d.describe())}")


@cli.command()
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
                if r["reverted_why"]:
                    click.echo(f"      reverted  {safe(r['reverted_why'])}  ({r['reverted_at']})")
                if r["suspicion"] == "cleared":
                    click.echo(f"      cleared   {safe(r['clear_why'])}")
                click.echo(f"      evidence  {safe(r['evidence'])}")
    _print_drift(out.drift, colour)
    for text in out.files.values():
        click.echo("")
        click.echo(safe_diff(text), nl=False)
    if out.patch_diff:
        click.echo("")
        click.echo(safe_diff(out.patch_diff), nl=False)
    for err in out.errors:
        click.echo(f"warning: {err}", err=True)


# -- revert / restore / suspect / clear --------------------------------------------------


def _print_applied(applied, verb: str, ctx, json_out: bool, infinitive: str = "") -> None:
    if wants_json(ctx, json_out):
        return emit_json(
            {
                "op": applied.op,
                "dry_run": applied.dry_run,
                "changed": [e.to_dict() for e in applied.changed],
                "skipped": [
                    {"id": k.entry.id, "title": k.entry.title, "reason": k.reason}
                    for k in applied.skipped
                ],
                "files": applied.files,
                "patch_diff": applied.patch_diff,
                "backup": applied.backup_id,
                "commit": applied.commit,
            }
        )
    done = f"would {infinitive or verb}" if applied.dry_run else verb
    if not applied.changed:
        click.echo(f"nothing to {infinitive or verb}")
    for e in applied.changed:
        click.echo(f"{done} {e.id} [{e.cls}] {safe(e.title)}  ({safe(_change(e))})")
    for k in applied.skipped:
        click.echo(f"skipped {k.entry.id} [{k.entry.cls}] {safe(k.entry.title)}: {safe(k.reason)}")
    _print_files(applied, applied.dry_run)


def _change(e) -> str:
    from ledger.commands.report import change_text

    return change_text(e)


def _print_files(applied, dry_run: bool) -> None:
    if dry_run:
        for text in applied.files.values():
            click.echo(safe_diff(text), nl=False)
        if applied.patch_diff:
            click.echo(safe_diff(applied.patch_diff), nl=False)
    elif applied.commit:
        backup = f"backup {applied.backup_id}; " if applied.backup_id else ""
        click.echo(f"{backup}workspace commit {applied.commit[:10]}")


@cli.command()
@click.argument("refs", nargs=-1, metavar="[ID...]")
@click.option("--perf-only", is_flag=True, help="Every applied perf entry; no bugfix is touched.")
@click.option("--class", "cls", type=click.Choice(["perf", "bugfix"]), help="Every applied entry "
              "of this class.")
@click.option("--why", default="", help="Why (kept in each entry's history).")
@click.option("--force", is_flag=True, help="Overwrite drift in the target files.")
@json_option
@dry_run_option
@click.pass_context
def revert(ctx, refs, perf_only, cls, why, force, json_out, dry_run) -> None:
    """Revert entries: by ID, or --perf-only, or --class CLASS."""
    from ledger.commands import ops

    s = ctx.find_object(State).session(ctx)
    r = ops.revert(
        s, refs=refs, perf_only=perf_only, cls=cls, why=why, force=force, dry_run=dry_run
    )
    _print_applied(r, "reverted", ctx, json_out, "revert")


@cli.command()
@click.argument("refs", nargs=-1, metavar="[ID...]")
@click.option("--perf-only", is_flag=True, help="Every reverted perf entry; no bugfix is touched.")
@click.option("--include-suspects", is_flag=True, help="Also restore entries under suspicion.")
@click.option("--force", is_flag=True, help="Restore even what evidence calls a regression; "
              "overwrite drift.")
@click.option("--require-evidence", is_flag=True, help="Only restore entries whose evidence "
              "shows a gain.")
@click.option("--why", default="", help="Why (kept in each entry's history).")
@json_option
@dry_run_option
@click.pass_context
def restore(ctx, refs, perf_only, include_suspects, force, require_evidence, why, json_out,
            dry_run) -> None:
    """Re-apply reverted entries, showing the evidence for each."""
    from ledger.commands import ops

    s = ctx.find_object(State).session(ctx)
    r = ops.restore(s, refs=refs, perf_only=perf_only, include_suspects=include_suspects,
                    force=force, require_evidence=require_evidence, why=why, dry_run=dry_run)
    if not wants_json(ctx, json_out):
        _print_restore(s, r)
        return
    _print_applied(r, "restored", ctx, json_out, "restore")


def _print_restore(s, applied) -> None:
    from ledger.evidence.view import evidence_for

    prefix = "would restore" if applied.dry_run else "restored"
    if not applied.changed:
        click.echo("nothing to restore")
    for e in applied.changed:
        click.echo(f"{prefix} {e.id} [{e.cls}] {safe(e.title)}  ({safe(_change(e))})")
        click.echo(f"    evidence: {safe(evidence_for(s.ws, e).text)}")
    for k in applied.skipped:
        click.echo(f"held back {k.entry.id} [{k.entry.cls}] {safe(k.entry.title)}: "
                   f"{safe(k.reason)}")
        click.echo(f"    evidence: {safe(evidence_for(s.ws, k.entry).text)}")
    _print_files(applied, applied.dry_run)


@cli.command()
@click.argument("ref", metavar="ID")
@click.option("--why", required=True, help="The hypothesis: why it is suspected.")
@click.option("--force", is_flag=True, help="Overwrite drift in the target file.")
@json_option
@dry_run_option
@click.pass_context
def suspect(ctx, ref, why, force, json_out, dry_run) -> None:
    """Revert an entry and mark it suspected of causing an incident."""
    from ledger.commands import ops

    s = ctx.find_object(State).session(ctx)
    _print_applied(
        ops.suspect(s, ref, why, force=force, dry_run=dry_run),
        "suspected",
        ctx,
        json_out,
        "suspect",
    )


@cli.command()
@click.argument("ref", metavar="ID")
@click.option("--why", required=True, help="What exonerated it.")
@json_option
@dry_run_option
@click.pass_context
def clear(ctx, ref, why, json_out, dry_run) -> None:
    """Clear a suspect (it stays reverted until `ledger restore`)."""
    from ledger.commands import ops

    s = ctx.find_object(State).session(ctx)
    _print_applied(ops.clear(s, ref, why, dry_run=dry_run), "cleared", ctx, json_out, "clear")


@cli.command()
@click.option("-n", "--limit", type=int, help="At most this many commits.")
@json_option
@click.pass_context
def log(ctx, limit, json_out) -> None:
    """The workspace's audit trail: one commit per command."""
    from ledger.commands.report import workspace_log

    s = ctx.find_object(State).session(ctx)
    commits = workspace_log(s.ws, limit)
    if wants_json(ctx, json_out):
        return emit_json(commits)
    for c in commits:
        click.echo(f"{c['sha'][:10]}  {c['time']}  {safe(c['subject'])}")


for command in (ab, evidence, render, demo, backups):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="ledger")

