"""`ledger init` and `ledger target add|list|show`."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ledger.cli.common import State
from ledger.cli.common import dry_run_option
from ledger.cli.common import emit_json
from ledger.cli.common import json_option
from ledger.cli.common import wants_json
from ledger.cli.output import safe
from ledger.cli.output import table
from ledger.values import FLAG_ENGINES
from ledger.values import FORMATS
from ledger.values import value_text


@click.command()
@click.argument("directory", required=False, default=".", type=click.Path(file_okay=False))
@click.option("--engine-repo", metavar="PATH", help="Git checkout of the engine that patch "
              "entries apply to.")
@click.option("--root", "roots", multiple=True, metavar="NAME=DIR", help="Declare a named "
              "root (repeatable): files outside the workspace are written NAME:PATH.")
@dry_run_option
def init(directory: str, engine_repo: str | None, roots: tuple[str, ...], dry_run: bool) -> None:
    """Create a workspace (a git repo with ledger.yaml) in DIRECTORY."""
    from ledger.commands.setup import init_workspace
    from ledger.errors import UsageError

    declared = {}
    for spec in roots:
        name, sep, value = spec.partition("=")
        if not sep or not value:
            raise UsageError(f"--root takes NAME=DIR, got {spec!r}")
        # typed relative to here; ledger.yaml holds it relative to the workspace
        if not os.path.isabs(value) and not value.startswith("~"):
            value = os.path.relpath(Path(value).absolute(), Path(directory).absolute())
        declared[name] = value
    root = init_workspace(Path(directory), engine_repo, dry_run=dry_run, roots=declared)
    verb = "would initialise" if dry_run else "initialised"
    click.echo(f"{verb} ledger workspace in {safe(root)}")
    if engine_repo is not None and not dry_run:
        from ledger.store.workspace import Workspace

        for name, default in Workspace(root).config.roots.items():
            if name not in declared:  # the engine repo's own root, declared by init
                click.echo(f"declared root {name} = {safe(default)} for the engine repo "
                           f"(another machine: `ledger root add {name} DIR --local`)")


@click.group()
def target() -> None:
    """Manage the config files under the ledger's care."""


@target.command("add")
@click.argument("name")
@click.argument("path")
@click.option("--format", "fmt", required=True, type=click.Choice(list(FORMATS)),
              help="File format: a bash serve script, a dotenv / EnvironmentFile, a systemd "
                   "unit (Environment= and ExecStart= flags), a k8s manifest's container "
                   "env, or a YAML map of knobs (yaml-map).")
@click.option("--container", metavar="ADDRESS",
              help="k8s: the container whose env list holds the knobs: its name, or where "
                   "that is not unique an address the error lists (NAME/CONTAINER, "
                   "ROLE/CONTAINER, KIND/NAME/ROLE/CONTAINER, DOC:PATH).")
@click.option("--key-path", metavar="PATH",
              help="yaml-map: where the map is, e.g. decode_environment or envs.decode "
                   "(default: the whole file).")
@click.option("--doc", metavar="N|KIND/NAME",
              help="yaml-map: the YAML document of a file of several, by number (from 1) "
                   "or kind/name (Deployment/vllm); the same as --key-path DOC:PATH.")
@click.option("--flags", type=click.Choice(list(FLAG_ENGINES)),
              help="yaml-map: the keys are this engine's server arguments (an "
                   "`sglang --config` / `vllm serve --config` file).")
@click.option("--root", "root_name", metavar="NAME", help="Write PATH under this root "
              "(NAME:PATH) rather than under the root that holds it most deeply.")
@dry_run_option
@click.pass_context
def target_add(ctx, name: str, path: str, fmt: str, container: str | None,
               key_path: str | None, doc: str | None, flags: str | None,
               root_name: str | None, dry_run: bool) -> None:
    """Put the file PATH under management as target NAME.

    Inside the workspace PATH is written relative (and the file is committed with the
    ledger); outside it, as ROOT:PATH under the declared root that holds it (`ledger root
    add`), or under a new root for its directory, declared with it."""
    from ledger.commands.setup import add_target
    from ledger.commands.setup import target_summary

    if doc is not None:
        from ledger.errors import UsageError

        if fmt != "yaml-map":
            raise UsageError("--doc selects a document of a yaml-map target (a k8s target's "
                             "--container takes KIND/NAME/CONTAINER or DOC:PATH)")
        key_path = f"{doc}:{key_path or ''}"
    s = ctx.find_object(State).session(ctx)
    t, new_root = add_target(s, name, path, fmt, container, Path.cwd(), dry_run, key_path,
                             flags, root_name)
    verb = "would add" if dry_run else "added"
    where = ", ".join(
        f"{k.replace('_', ' ')} {v}" for k, v in t.to_dict().items() if k not in ("path", "format")
    )
    detail = f", {safe(where)}" if where else ""
    click.echo(f"{verb} target {t.name}: {safe(t.path)} ({t.format}{detail})")
    if new_root is not None:
        root, default = new_root
        click.echo(f"{'would declare' if dry_run else 'declared'} root {root} = {safe(default)} "
                   f"(another machine: `ledger root add {root} DIR --local` or "
                   f"LEDGER_ROOT_{root.upper()}=DIR)")
    print_summary(target_summary(s, t.name, t))


@target.command("show")
@click.argument("name")
@json_option
@click.pass_context
def target_show(ctx, name: str, json_out: bool) -> None:
    """What the ledger sees in target NAME: each knob and launch flag, its value and lines,
    and whether it is conditional (depends on a branch), repeated (one place per launch
    line), computed by the shell, or on a launch line."""
    from ledger.commands.setup import target_summary

    s = ctx.find_object(State).session(ctx)
    d = target_summary(s, name)
    if wants_json(ctx, json_out):
        return emit_json(d)
    click.echo(f"{d['target']}: {safe(d['path'])} ({d['format']})")
    print_summary(d)


def _where(k: dict) -> str:
    scopes = list(dict.fromkeys(p["scope"] for p in k["places"]))
    launches = sorted({p["launch"] for p in k["places"] if p.get("launch")})
    parts = []
    if launches:
        parts.append("launch line" + ("s " if len(launches) > 1 else " ") + ",".join(map(str, launches)))
    parts += [sc for sc in scopes if sc != "top level" and not sc.startswith("background")]
    return "; ".join(parts) or "top level"


def print_summary(d: dict) -> None:
    """The knobs table of `target show` (also printed by `target add`)."""
    rows = []
    for k in d["knobs"]:
        places = k["places"]
        if k["state"] in ("conditional", "repeated"):
            # a place the shell computes ($ID in a loop) is computed, never "unset"
            value = " | ".join(dict.fromkeys(
                "(computed)" if p["computed"] else value_text(p["value"], default=k.get("default"))
                for p in places))
        else:
            value = "(computed)" if k["computed"] else value_text(k["value"], default=k.get("default"))
        lines = ",".join(str(p["line"]) for p in places)
        rows.append([k["knob"], value, k["state"], lines, _where(k)])
    if not rows:
        click.echo("  no knobs found")
    else:
        click.echo(table(rows, ["KNOB", "VALUE", "STATE", "LINES", "WHERE"], max_width=40))
    for launch in d.get("launches", []):
        kind = launch.get("container") or ("docker run" if launch["docker"] else
                                           (launch["engine"] or "exec"))
        click.echo(f"launch {launch['ordinal']}: line {launch['line']}-{launch['end_line']} ({kind})")
    for note in d.get("notes", []):
        click.echo(f"note: {safe(note)}")
    if any(k["state"] in ("conditional", "repeated") for k in d["knobs"]):
        if d.get("format") == "bash":
            click.echo("conditional/repeated knobs have no single value: record them with "
                       "--at LINE (one place) or --all")
        else:  # --at/--all select places in bash targets only
            click.echo("repeated knobs have no single value: keep one place by hand, then "
                       "record it")


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


def _service_changes(live, no_live, restart_cmd, restart_shell, no_restart, health_url,
                     health_command, health_expect, health_timeout, no_health,
                     health_generate=None) -> dict:
    """The service settings `target set` was given, as set_service takes them.

    A setting with its own ``--no-...``, or two ways of giving one setting, is a
    UsageError: the command must not guess which one was meant.
    """
    import shlex

    from ledger.errors import UsageError

    changes: dict = {}
    if live and no_live or (restart_cmd or restart_shell) and no_restart \
            or (health_url or health_command or health_generate) and no_health:
        raise UsageError("a setting and its --no-... cannot go together")
    if restart_cmd and restart_shell or \
            sum(map(bool, (health_url, health_command, health_generate))) > 1:
        raise UsageError("give --restart or --restart-shell, and one of --health-url, "
                         "--health-command or --health-generate")
    if live:
        kind, sep, value = live.partition("=")
        if not sep:
            raise UsageError(f"--live takes KIND=VALUE, got {live!r}")
        changes["live"] = {kind: value}
    if no_live:
        changes["live"] = None
    if restart_cmd:
        changes.update(restart=shlex.split(restart_cmd), shell=None)
    if restart_shell:
        changes.update(restart=restart_shell, shell=True)
    if no_restart:
        changes.update(restart=None, shell=None)
    if health_url or health_command or health_generate:
        health = {"url": health_url, "expect": health_expect} if health_url else \
            {"generate": health_generate} if health_generate else \
            {"command": shlex.split(health_command)}
        if health_timeout is not None:
            health["timeout_s"] = health_timeout
        changes["health"] = health
    if no_health:
        changes["health"] = None
    if not changes:
        raise UsageError("nothing to set: give --live, --restart or --health-... (see --help)")
    return changes


@target.command("set")
@click.argument("name")
@click.option("--live", "live", metavar="KIND=VALUE", help="How to find the running process: "
              "pid_file=PATH, systemd=UNIT, process=REGEX or url=http://HOST:PORT/server_info.")
@click.option("--no-live", is_flag=True, help="Remove the live probe.")
@click.option("--restart", "restart_cmd", metavar="CMD", help="Restart command, split like a "
              "shell would into an argv list and run without a shell.")
@click.option("--restart-shell", metavar="CMD", help="Restart command run by /bin/sh -c "
              "(stored with shell: true).")
@click.option("--no-restart", is_flag=True, help="Remove the restart command.")
@click.option("--health-url", metavar="URL", help="Health check: GET URL answers --health-expect.")
@click.option("--health-command", metavar="CMD", help="Health check: CMD (argv, no shell) "
              "exits 0.")
@click.option("--health-generate", metavar="URL", help="Health check: a real 1-token "
              "completion from the server at URL (base URL; /v1/completions, else /generate) "
              "brings a token back.")
@click.option("--health-expect", type=int, default=200, show_default=True)
@click.option("--health-timeout", type=float, help="Seconds to wait for health (default 60).")
@click.option("--no-health", is_flag=True, help="Remove the health check.")
@dry_run_option
@click.pass_context
def target_set(ctx, name, live, no_live, restart_cmd, restart_shell, no_restart, health_url,
               health_command, health_generate, health_expect, health_timeout, no_health,
               dry_run) -> None:
    """Set how the service behind target NAME is probed, restarted and health-checked."""
    from ledger.commands.setup import set_service

    changes = _service_changes(live, no_live, restart_cmd, restart_shell, no_restart,
                               health_url, health_command, health_expect, health_timeout,
                               no_health, health_generate)
    s = ctx.find_object(State).session(ctx)
    t = set_service(s, name, changes, dry_run)
    verb = "would set" if dry_run else "set"
    spec = t.service.to_dict() if t.service else {}
    click.echo(f"{verb} target {t.name}: " + (", ".join(
        f"{k} {safe(v)}" for k, v in spec.items()) or "no live probe, restart or health"))
