"""``Environment=`` under a unit whose ``ExecStart=`` runs a container (issue 50).

``docker run`` / ``podman run`` and ``apptainer``/``singularity exec --cleanenv`` give
the server only their own ``-e``/``--env`` options (the wrappers table,
:mod:`envknobs.formats.common.wrappers`): the unit's ``Environment=`` reaches the wrapper
process, not the server.  So, by the same rule as a serve script:

* an ``Environment=K=V`` is the server's knob ``K`` only where the launch passes it on:
  an ``-e K`` pass-through of docker, or apptainer's ``APPTAINERENV_K`` /
  ``SINGULARITYENV_K`` (read as ``K``; an ``--env K=V`` wins, then ``APPTAINERENV_``);
  such an assignment is edited in place;
* every other ``Environment=`` line is listed in a note, not as a knob of the server;
* the launch's own ``-e K=V`` / ``--env K=V`` are named in a note with their line (the
  ledger does not edit a unit's ``ExecStart=`` env options); a new knob of an apptainer
  launch is an ``Environment=APPTAINERENV_K=V`` line, which reaches it; any other env
  write is refused naming the ``ExecStart=`` line and the option to write there by hand.
"""

from __future__ import annotations

from envknobs.formats.common.launch import Shape
from envknobs.formats.common.launch import word_text
from envknobs.formats.common import FormatError
from envknobs.formats.systemd.service import Service


def container_shape(launch) -> Shape | None:
    """The launch's shape where it runs a container that takes only its own env options."""
    shape = launch.shape if launch is not None else None
    return shape if shape is not None and shape.docker and shape.clean else None


def reaching(svc: Service, launch) -> dict[str, str] | None:
    """Knob -> the ``Environment=`` name that gives it, under a container launch (None:
    no container, every assignment reaches the server as itself)."""
    shape = container_shape(launch)
    if shape is None:
        return None
    own = {e.name for e in shape.env if not e.passthrough}
    out = {}
    for e in shape.env:
        if e.passthrough and e.name in svc.env and e.name not in own and shape.passes_script_env:
            out[e.name] = e.name
    for prefix in reversed(shape.env_prefixes):  # APPTAINERENV_ last: it wins
        for name in svc.env:
            knob = name[len(prefix):]
            if name.startswith(prefix) and knob and knob not in own:
                out[knob] = name
    return out


def env_knobs(svc: Service, launch, values: dict[str, str]) -> dict[str, str]:
    """``values`` (Environment= name -> value) as the server's knobs under ``launch``."""
    given = reaching(svc, launch)
    if given is None:
        return values
    return {knob: values[name] for knob, name in given.items() if name in values}


def container_notes(svc: Service, launch) -> list[str]:
    """What ``target show`` says of a container launch's env: its own options, and the
    ``Environment=`` lines that do not reach the server."""
    shape = container_shape(launch)
    if shape is None:
        return []
    line = launch.command.directive.line
    given = set(reaching(svc, launch).values())  # type: ignore[union-attr]
    runs = shape.container or "docker/podman run"
    notes = []
    own = [word_text(e.word) or e.word.text for e in shape.env if not e.passthrough]
    if own:
        notes.append(f"line {line}: the server's env is {runs}'s {shape.env_option} options "
                     f"on that line: {', '.join(own)} (edit them there by hand)")
    dropped = [f"{n} (line {a.directive.line})" for n, a in svc.env.items() if n not in given]
    if dropped:
        notes.append(f"line {line}: ExecStart= runs {runs}: Environment= {', '.join(dropped)} "
                     "reaches that wrapper, not the server")
    return notes


def assignment_of(svc: Service, launch, knob: str) -> str:
    """The ``Environment=`` name to edit for ``knob``: itself, or its ``APPTAINERENV_``
    name under a ``--cleanenv`` apptainer launch; FormatError where no assignment of the
    unit reaches the server as ``knob``."""
    given = reaching(svc, launch)
    if given is None:
        return knob
    if knob in given:
        return given[knob]
    shape = container_shape(launch)
    assert shape is not None
    own = [e for e in shape.env if e.name == knob and not e.passthrough]
    if shape.env_prefixes and not own:  # a new Environment=APPTAINERENV_K=V line reaches it
        return shape.env_prefixes[0] + knob
    runs = shape.container or "docker/podman run"
    doing = "edit its" if own else "write"
    raise FormatError(
        f"line {launch.command.directive.line}: ExecStart= runs {runs}: Environment= "
        f"reaches that wrapper, not the server, so {knob} would take no effect there; "
        f"{doing} {shape.env_option} {knob}=VALUE on that line by hand, then record {knob} "
        "with --adopt")
