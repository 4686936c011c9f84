"""`ledger record knob|flag|patch`."""

from __future__ import annotations

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import print_files
from ledger.cli.common import wants_json
from ledger.cli.live import print_live
from ledger.cli.live import restart_option
from ledger.cli.output import safe
from ledger.cli.output import show_value
from ledger.errors import UsageError


@click.group()
def record() -> None:
    """Record a change: a knob in a target, or a patch to the engine."""


def string_option(f):
    return click.option("--string", "string", is_flag=True,
                        help="YAML targets: write the value as a string (\"32\"), not typed "
                        "as its neighbours or the flag catalog say.")(f)


def record_options(f):
    f = click.option("--why", default="", help="Why the change was made.")(f)
    f = click.option("--title", required=True, help="One line: what the change is.")(f)
    f = click.option("--class", "cls", required=True, type=click.Choice(["perf", "bugfix"]),
                     help="perf (for speed) or bugfix (fixes a real problem).")(f)
    return f


def place_options(f):
    f = click.option("--all", "all_places", is_flag=True,
                     help="Change every place of the knob; each keeps its own old value for "
                          "revert.")(f)
    f = click.option("--at", "at_line", type=click.IntRange(min=1), metavar="LINE",
                     help="Change the knob only at the place on LINE (or add it to the "
                          "launch command on LINE).")(f)
    return f


def check_options(f):
    f = restart_option(f)
    f = click.option("--force", is_flag=True, help="Overwrite drift in the target.")(f)
    f = click.option("--no-validate", is_flag=True,
                     help="Skip the catalog's type and range checks.")(f)
    return f


def past_options(f):
    """History the ledger did not see: real dates, a change already reverted by hand."""
    f = click.option("--not-a-revert", is_flag=True,
                     help="A perf entry that removes the knob (or puts it back to an older "
                          "value) is itself the perf change, not a revert of one.")(f)
    f = click.option("--suspected", is_flag=True,
                     help="With --already-reverted: it was taken back as a suspect "
                          "(--reverted-why is the hypothesis); held back until cleared.")(f)
    f = click.option("--reverted-why", default="", metavar="TEXT",
                     help="With --already-reverted: why it was taken back.")(f)
    f = click.option("--reverted-when", default="", metavar="TIME",
                     help="With --already-reverted: when it was taken back.")(f)
    f = click.option("--already-reverted", is_flag=True,
                     help="The change was made and reverted by hand before the ledger knew: "
                          "record it off the table (the file's value is its base; nothing is "
                          "written), so `diff` shows it and `restore` claws it back.")(f)
    f = when_option(f, "When the change was really made (ISO 8601, UTC unless +HH:MM); "
                       "the record time is kept too.")
    return f


def when_option(f, text: str = "When it really happened (ISO 8601 like 2026-12-02T14:14, "
                                "UTC unless +HH:MM); history and docs order by it."):
    return click.option("--when", "when", default="", metavar="TIME", help=text)(f)


def record_options_of(targets: str, knob: str, value: str | None, params: dict,
                      several: bool = True):
    """The command's options from the CLI's parameters, each declared once by the click
    options above under the name of its :class:`~ledger.core.recording.RecordOptions`
    field (the past's under :class:`~ledger.core.recording.Past`'s; ``--at``/``--all`` make
    ``at``, ``--before-unset`` ``before_given``); ``several``: TARGET may name several
    targets, separated by commas."""
    from dataclasses import fields

    from ledger.core.recording import Past
    from ledger.core.recording import RecordOptions

    params = dict(params)
    at = selection(params.pop("at_line"), params.pop("all_places"))
    before_unset = params.pop("before_unset", False)
    before_given = params.get("before") is not None or before_unset
    past = Past(**{f.name: params.pop(f.name) for f in fields(Past)})
    names = split_targets(targets) if several and "," in targets else [targets]
    return RecordOptions(targets=tuple(names), knob=knob, value=value, at=at, past=past,
                         before_given=before_given, **params)


def split_targets(text: str) -> list[str]:
    """``decode,prefill`` as target names, each once, in the order given."""
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise UsageError(f"TARGET {text!r}: name the targets separated by commas")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"TARGET {text!r}: {', '.join(twice)} named twice")
    return names


def selection(at_line: int | None, all_places: bool) -> int | str | None:
    if at_line is not None and all_places:
        raise UsageError("give --at LINE or --all, not both")
    return "all" if all_places else at_line


@record.command("knob", context_settings={"ignore_unknown_options": True})
@click.argument("target_name", metavar="TARGET")
@click.argument("assignment", metavar="KNOB=VALUE | KNOB")
@record_options
@place_options
@click.option("--unset", is_flag=True, help="Remove the knob (give KNOB alone).")
@string_option
@click.option("--in", "into", default=None, metavar="env|configmap[:NAME]",
              help="k8s targets: write the knob in the container's env: list or in the "
                   "ConfigMap of the file it takes through envFrom (configmap:NAME where "
                   "it takes several).")
@click.option("--adopt", is_flag=True, help="Record a change already made by hand.")
@click.option("--before", help="With --adopt: the value before the hand edit.")
@click.option("--before-unset", is_flag=True, help="With --adopt: the knob was unset before.")
@past_options
@check_options
@json_option
@dry_run_option
@click.pass_context
def record_knob(ctx, target_name, assignment, unset, json_out, restart, dry_run,
                **params) -> None:
    """Change KNOB in TARGET (with backup) and record the entry.

    In a bash script a knob set in several places that take effect (the branches of an
    if, a K=V prefix on two launch lines) is refused with every place as FILE:LINE:
    choose one with --at LINE, or all with --all.  Launch-line flags are recorded with
    `ledger record flag`.  One change across several targets is one entry: `ledger record
    knob decode,prefill,decode-k8s K=V ...` (every file written, or none).

    A tuning already reverted by hand is recorded off the table in one command, without
    touching the file: `ledger record knob decode K=512 --class perf --title T
    --already-reverted [--when T1] [--reverted-when T2] [--reverted-why W [--suspected]]`.
    A perf entry whose change is a revert (`--adopt --unset` of a tuning) is refused with
    that command named.
    """
    from ledger.commands.record import record_knob as do_record

    if unset:
        if "=" in assignment:
            raise UsageError("--unset takes the knob name alone, not KNOB=VALUE")
        knob, value = assignment, None
    else:
        if "=" not in assignment:
            raise UsageError(f"expected KNOB=VALUE, got {assignment!r} (or use --unset)")
        knob, value = assignment.split("=", 1)
    if params["before"] is not None and params["before_unset"]:
        raise UsageError("give --before VALUE or --before-unset, not both")
    if knob.startswith("-"):
        raise UsageError(f"{knob} is a launch flag: use `ledger record flag {target_name} "
                         f"{assignment}`")
    opts = record_options_of(target_name, knob, value, params)
    r = do_record(ctx.find_object(State).session(ctx), opts, dry_run=dry_run, restart=restart)
    _report(ctx, r, opts.adopt, json_out, dry_run, r.live)


def _report(ctx, r, adopt: bool, json_out: bool, dry_run: bool, live) -> None:
    for w in r.warnings:
        click.echo(f"warning: {w}", err=True)
    if wants_json(ctx, json_out):
        emit_json({**_recorded_json(r.entry, r.applied, dry_run, r.warnings),
                   **live.to_dict()})
        if live.failed:
            ctx.exit(1)
        return
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if adopt else "recorded")
    off = "" if e.applied else f"  (already {e.state}{', suspected' if e.suspected else ''}: " \
        "off the table, nothing written)"
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}{off}")
    if e.places:
        for key, place in e.places.items():
            click.echo(f"  {e.target}:{place.get('line')}: {e.knob} "
                       f"{show_value(place.get('before'))} -> {show_value(e.after)}  ({key})")
    else:
        click.echo(f"  {e.target}: {e.knob} {show_value(e.before)} -> {show_value(e.after)}")
        for name, other in (e.also or {}).items():
            click.echo(f"  {name}: {e.knob} {show_value(other.get('before'))} -> "
                       f"{show_value(e.after)}")
    print_files(r.applied, dry_run)
    print_live(ctx, live)


FLAG_HELP = """Change a launch-line flag of TARGET (a bash serve script) and record it.

\b
  ledger record flag TARGET --cuda-graph-max-bs=256 --class perf --title T
  ledger record flag TARGET --mem-fraction-static 0.85 --class perf --title T
  ledger record flag TARGET --disable-radix-cache --class perf --title T
  ledger record flag TARGET --enable-prefix-caching=false ...   (written --no-enable-prefix-caching)
  ledger record flag TARGET --disable-radix-cache --unset ...
  ledger record flag TARGET -- --title=x ...   (a flag named like one of ours: after --)

The flag is one token --FLAG=VALUE, or --FLAG VALUE, or --FLAG alone for a switch
(value true).  It is edited where the launch command has it (on the command line, or
in an args=( ... ) array expanded there), in the form found (--x v or --x=v); a new
flag goes on its own continuation line (or into the launch's args array).  Values are
checked against the SGLang and vLLM flag catalogs.  A flag on several launch lines
(prefill and decode) is refused with every place as FILE:LINE: choose with --at LINE
or --all.  Revert, restore, suspect, drift, diff, status and evidence treat it like
any env knob."""


@record.command("flag", help=FLAG_HELP,
                context_settings={"ignore_unknown_options": True})
@click.argument("target_name", metavar="TARGET")
@click.argument("flag_words", nargs=-1, type=click.UNPROCESSED, metavar="--FLAG[=VALUE] [VALUE]")
@record_options
@place_options
@click.option("--unset", is_flag=True, help="Remove the flag from the launch command.")
@string_option
@click.option("--in", "into", default=None, metavar="args|env",
              help="k8s targets: put a new flag in the container's command/args or in its "
                   "env string of flags (VLLM_ADDITIONAL_ARGS) where it has both.")
@past_options
@check_options
@json_option
@dry_run_option
@click.pass_context
def record_flag(ctx, target_name, flag_words, unset, json_out, restart, dry_run,
                **params) -> None:
    from ledger.commands.record import record_knob as do_record

    flag, value = parse_flag_words(flag_words, unset)
    opts = record_options_of(target_name, flag, value, params, several=False)
    r = do_record(ctx.find_object(State).session(ctx), opts, dry_run=dry_run, restart=restart)
    _report(ctx, r, False, json_out, dry_run, r.live)


def parse_flag_words(words: tuple[str, ...], unset: bool) -> tuple[str, str | None]:
    """``("--x=1",)`` / ``("--x", "1")`` / ``("--x",)`` -> (flag, value); a switch is true."""
    words = tuple(w for w in words if w != "--")
    if not words or not words[0].startswith("-") or len(words) > 2:
        raise UsageError("give one flag: --FLAG=VALUE, --FLAG VALUE or --FLAG (a switch)")
    flag, eq, inline = words[0].partition("=")
    if len(words) == 2 and eq:
        raise UsageError(f"{words[0]} already has a value; {words[1]!r} is one too many")
    if unset:
        if eq or len(words) == 2:
            raise UsageError("--unset takes the flag alone, not a value")
        return flag, None
    if eq:
        return flag, inline
    return flag, (words[1] if len(words) == 2 else "true")


def _recorded_json(entry, applied, dry_run: bool, warnings: list[str]) -> dict:
    """The new entry itself (so `jq .id` works), plus what the command did."""
    return {**entry.to_dict(), "dry_run": dry_run, "backup": applied.backup_id,
            "commit": applied.commit, "files": applied.files,
            "patch_diff": applied.patch_diff, "warnings": warnings}


@record.command("patch")
@click.argument("patch_file", required=False, type=click.Path(dir_okay=False))
@click.option("--commit", "rev", metavar="REV", help="Adopt a commit already in the engine "
              "repo (its subject is the default title, its date the change's --when).")
@click.option("--why", default="", help="Why the change was made.")
@click.option("--title", help="One line: what the change is (default with --commit: the "
              "commit's subject).")
@click.option("--class", "cls", required=True, type=click.Choice(["perf", "bugfix"]),
              help="perf (for speed) or bugfix (fixes a real problem).")
@when_option
@restart_option
@json_option
@dry_run_option
@click.pass_context
def record_patch(ctx, patch_file, rev, why, title, cls, when, restart, json_out,
                 dry_run) -> None:
    """Apply PATCH_FILE to the engine repo (or adopt --commit REV) and record it."""
    from ledger.commands.record_patch import record_patch as do_record

    if bool(patch_file) == bool(rev):
        raise UsageError("give a patch FILE or --commit REV (one of them)")
    r = do_record(ctx.find_object(State).session(ctx), patch_file=patch_file, rev=rev,
                  cls=cls, title=title, why=why, dry_run=dry_run, restart=restart, when=when)
    live = r.live
    if wants_json(ctx, json_out):
        emit_json({**_recorded_json(r.entry, r.applied, dry_run, []), **live.to_dict()})
        if live.failed:
            ctx.exit(1)
        return
    e = r.entry
    verb = "would record" if dry_run else ("adopted" if rev else "recorded")
    click.echo(f"{verb} {e.id} [{e.cls}] {safe(e.title)}")
    click.echo(f"  patch {', '.join(safe(f) for f in e.files)} (sha256 {e.sha256[:12]})")
    if e.commit:
        click.echo(f"  commit {e.commit}" + (f", {e.made}" if e.history[0].when else ""))
    print_live(ctx, live)
