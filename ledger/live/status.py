"""``ledger status --live``: the running process against the file against the ledger.

Per target with a live probe, per knob — every knob the ledger manages there and every
knob the file sets — one state:

``live``             process = file (= ledger, for a managed knob);
``pending restart``  file = ledger, the process runs another value (both are shown): the
                     file changed after the process started;
``drift``            the file differs from the ledger (edited by hand): restarting would
                     not give the ledger's value either;
``not running``      the probe found no process;
``unreadable``       the process exists but its environment cannot be read (permission),
                     the probe is ambiguous, or ``server_info`` does not report the knob —
                     the reason is said, never guessed.

Beside the raw values, each row carries ``effective`` — the value the server reports it
runs with, its defaults applied (``server_info``'s ``knobs``; a ``/proc`` probe knows only
the raw environment, so none) — and ``default``, the engine's default from the catalogs
(the target's declared release first), for a side that is unset.  The state compares raw
values only: the effective value is shown, never used to call a knob live.

A real SGLang or vLLM (:mod:`ledger.live.engines`) reports effective values, no command
line: a flag's process value is what the server reports, and a knob the file leaves unset
that the server reports at its catalog default is ``live`` (it cannot be told apart).

Launch flags are knobs whose name starts with ``--``: the process's value comes from its
command line (:func:`ledger.live.probe.launch_flags`, spelled as the bash format spells
a script's launch flags), the file's from :func:`file_values`.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Callable
from typing import Container
from typing import Mapping
from typing import Sequence

from ledger.core import layers
from ledger.core.managed_file import Target
from ledger.errors import LedgerError
from ledger.values import default_text
from ledger.live.probe import AMBIGUOUS
from ledger.live.probe import NO_PROBE
from ledger.live.probe import NOT_RUNNING
from ledger.live.probe import RUNNING
from ledger.live.probe import Observed
from ledger.live.probe import launch_flags
from ledger.live.probe import observe
from ledger.store.targets import TargetFile
from ledger.store.targets import read_target
from ledger.store.workspace import Workspace

LIVE = "live"
PENDING = "pending restart"
DRIFT = "drift"
UNREADABLE = "unreadable"
_ABSENT = object()  # a knob the ledger does not manage
Defaults = Callable[[Target, Sequence[str]], Mapping[str, object]]


@dataclass
class KnobLive:
    knob: str
    state: str
    file: str | None
    process: str | None
    ledger: str | None = None
    managed: bool = False
    detail: str = ""
    effective: str | None = None  # what the server reports it runs with (defaults applied)
    default: object = None  # the engine's default, from the catalogs (None: unknown)

    def to_dict(self) -> dict:
        return {"knob": self.knob, "state": self.state, "file": self.file,
                "process": self.process, "ledger": self.ledger if self.managed else None,
                "managed": self.managed, "detail": self.detail,
                "effective": self.effective, "default": self.default}


@dataclass
class TargetLive:
    target: str
    observed: Observed
    knobs: list[KnobLive] = field(default_factory=list)
    error: str = ""  # the file could not be read

    @property
    def pending(self) -> list[KnobLive]:
        return [k for k in self.knobs if k.state == PENDING]

    @property
    def ambiguous(self) -> bool:
        return self.observed.state == AMBIGUOUS

    def to_dict(self) -> dict:
        return {"target": self.target, "process": self.observed.to_dict(),
                "knobs": [k.to_dict() for k in self.knobs], "error": self.error}


def file_values(tf: TargetFile) -> dict[str, str]:
    """Knob -> value the target file gives its process: env knobs, and for a bash serve
    script its launch flags (``--name``, as :mod:`envknobs.flags` spells them), from the
    format's reader; the one place to change if flags ever come from elsewhere."""
    return dict(tf.values)


def process_value(obs: Observed, knob: str) -> tuple[bool, str | None]:
    """(known, value) of ``knob`` in the running process."""
    if knob.startswith("--"):
        if obs.argv is None and obs.flags is not None:  # an engine's effective flags
            return True, obs.flags.get(knob)
        if obs.argv is None:
            return False, None
        flags = launch_flags(obs.argv)
        return True, flags.get(knob)
    if obs.env is None:
        return False, None
    if knob in obs.env:
        return True, obs.env[knob]
    return obs.env_complete, None


def knob_state(obs: Observed, knob: str, file: str | None, ledger) -> KnobLive:
    """One knob's state (rules in the module docstring); ``ledger`` is _ABSENT when
    the ledger does not manage the knob."""
    managed = ledger is not _ABSENT
    row = KnobLive(knob, LIVE, file, None, None if not managed else ledger, managed)
    if obs.state == NOT_RUNNING:
        row.state, row.detail = NOT_RUNNING, obs.detail
        return row
    if obs.state != RUNNING:
        row.state, row.detail = UNREADABLE, obs.detail
        return row
    known, row.process = process_value(obs, knob)
    row.effective = obs.effective.get(knob)
    if managed and file != ledger:
        row.state = DRIFT
    elif not known:
        row.state = UNREADABLE
        row.detail = f"{obs.source} does not report {knob}"
    elif row.process != file:
        row.state = PENDING
    return row


def target_live(ws: Workspace, target: Target, obs: Observed | None = None,
                known: Container[str] | None = None, defaults: Defaults | None = None) -> TargetLive:
    """The live report of one target (probing it unless ``obs`` is given).

    ``known``: the knob names of the catalogs; a name the file sets that the ledger does
    not manage is shown only if known there (a serve script's own shell variables, such
    as ``model_flags=(...)``, never reach the process's environment).  ``defaults``
    gives each shown knob's engine default (``(target, names) -> {name: default}``)."""
    service = target.service
    obs = obs or observe(service.live if service else None, ws.root)
    out = TargetLive(target.name, obs)
    if obs.state == NO_PROBE:
        return out
    try:
        tf = read_target(ws, target)
    except LedgerError as e:
        out.error = str(e)
        return out
    values = file_values(tf)
    expected = {knob: value for (t, knob), value in
                layers.expected_knobs(ws.entries()).items() if t == target.name}
    shown = {k for k in values if known is None or k in known or k.startswith("--")}
    for knob in sorted(shown | set(expected)):
        out.knobs.append(knob_state(obs, knob, values.get(knob),
                                    expected.get(knob, _ABSENT) if knob in expected
                                    else _ABSENT))
    unset = [k.knob for k in out.knobs if None in (k.file, k.process, k.ledger)]
    found = defaults(target, unset) if defaults is not None and unset else {}
    for row in out.knobs:
        row.default = found.get(row.knob)
        if obs.engine and row.state == PENDING and row.file is None \
                and row.default is not None and row.process == default_text(row.default):
            # An engine's answer holds effective values: its default is the file's unset.
            row.state = LIVE
    return out


def live_status(ws: Workspace, names: Sequence[str] = (),
                known: Container[str] | None = None,
                defaults: Defaults | None = None) -> list[TargetLive]:
    """The live report of the named targets (default: every target with a probe)."""
    if names:
        targets = [ws.target(n) for n in names]
    else:
        targets = [t for t in ws.config.targets.values() if t.service and t.service.live]
    return [target_live(ws, t, known=known, defaults=defaults) for t in targets]


def differing(ws: Workspace, names: Sequence[str],
              known: Container[str] | None = None) -> list[TargetLive]:
    """Of the named targets with a live probe, those whose running process differs from
    the file (what a mutating command without --restart ends by telling)."""
    out = []
    for name in sorted(set(names)):
        t = ws.config.targets.get(name)
        if t is None or not t.service or not t.service.live:
            continue
        report = target_live(ws, t, known=known)
        if report.pending:
            out.append(report)
    return out
