"""Kill real `ledger` commands at chosen or random instants and check what is left.

Shared by tests/store/test_kills.py and benchmarks/kill_soak.py.  A kill takes the
command's whole process group (its git children too), as a power cut would.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ledger.commands.demo import prepare
from ledger.store.entries_file import parse_entries
from tests.store.kit import git
from tests.store.kit import git_locks
from tests.store.kit import git_status
from tests.store.kit import ledger_temps
from tests.store.kit import run_cli
from tests.store.kit import start_cli


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    # git children of the group die with it; give the kernel a moment to reap them
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def kill_when(proc: subprocess.Popen, ready: Callable[[], bool], timeout: float = 60) -> bool:
    """SIGKILL the group as soon as ``ready()``; False when the command ended first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if ready():
            kill_group(proc)
            return True
    if proc.poll() is None:
        kill_group(proc)
        raise AssertionError("the command neither finished nor reached the kill point")
    return False


def kill_after(proc: subprocess.Popen, delay: float) -> bool:
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return True


@dataclass
class Rig:
    """A demo workspace with knob and patch entries, perf and bugfix."""

    root: Path
    workspace: Path
    script: Path
    engine: Path
    ids: dict[str, str]

    @property
    def attention(self) -> Path:
        return self.engine / "engine" / "model" / "attention_ops.py"

    def files(self) -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in (self.script, self.attention)}

    def head(self) -> str:
        return git(self.workspace, "rev-parse", "HEAD").strip()


def make_rig(tmp: Path) -> Rig:
    d = prepare(tmp / "demo")
    ws, script = d.workspace, d.root / "deploy" / "serve_decode.sh"
    ok(run_cli(ws, "target", "add", "decode", script, "--format", "bash"))
    ids = {}
    for name, args in {
        "perf_knob": ("record", "knob", "decode", "ENGINE_DECODE_TARGET_CTAS=64", "--class",
                      "perf", "--title", "ctas 64"),
        "perf_patch": ("record", "patch", d.root / "patches" / "perf.patch", "--class", "perf",
                       "--title", "longer split-K partitions"),
        "fix_knob": ("record", "knob", "decode", "ENGINE_INFLIGHT_TIMEOUT_S=10", "--class",
                     "bugfix", "--title", "timeout 10"),
    }.items():
        r = ok(run_cli(ws, *args, "--json"))
        ids[name] = json.loads(r.stdout)["id"]
    return Rig(d.root, ws, script, d.root / "engine-repo", ids)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, (r.args, r.stdout, r.stderr)
    return r


def in_process(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The next command, run in this process (the same code, without the start-up cost)."""
    from click.testing import CliRunner

    from ledger.cli import cli

    r = CliRunner().invoke(cli, ["-C", str(root), *args], catch_exceptions=False)
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def cycle(rig: Rig) -> list[list[str]]:
    """Commands that each change something, in an order where each one applies."""
    i = rig.ids
    return [
        ["revert", "--perf-only", "--why", "incident"],       # a knob and an engine patch
        ["restore", "--perf-only"],
        ["record", "knob", "decode", "ENGINE_INFLIGHT_TIMEOUT_S=@", "--class", "bugfix",
         "--title", "timeout @"],
        ["suspect", i["perf_knob"], "--why", "hangs?"],
        ["restore", i["perf_knob"], "--include-suspects"],
        ["revert", i["perf_patch"], "--why", "bisect"],        # moves the engine patch alone
        ["restore", i["perf_patch"]],
    ]


def check_clean(rig: Rig) -> None:
    """What must hold once the next command has run: no drift, clean git, no stale lock,
    no temporary file, no intent record."""
    r = ok(in_process(rig.workspace, "status", "--json"))
    st = json.loads(r.stdout)
    assert st["clean"] and all(row["ok"] for row in st["entries"]), r.stdout
    assert git_status(rig.workspace) == ""
    assert git_status(rig.engine) == ""
    assert git_locks(rig.workspace) == [] and git_locks(rig.engine) == []
    assert ledger_temps(rig.workspace, rig.script.parent, rig.engine) == []
    assert not (rig.workspace / ".ledger" / "intent.json").exists()


def trial(rig: Rig, command: list[str], kill: Callable[[subprocess.Popen], bool]) -> str:
    """Run ``command``, kill it with ``kill``, then check old-or-new and recovery.

    Returns "done" (finished before the kill), "back" (rolled back, then re-run) or
    "forward" (the kill came after its commit).
    """
    before, head = rig.files(), rig.head()
    proc = start_cli(rig.workspace, *command)
    killed = kill(proc)
    if not killed:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        check_clean(rig)
        return "done"
    at_kill = rig.files()
    parse_entries((rig.workspace / "entries.jsonl").read_text(), "entries.jsonl")
    check_clean(rig)  # the next command recovers (status runs first)
    if rig.head() == head:
        assert rig.files() == before
        ok(in_process(rig.workspace, *command))  # the command succeeds when run again
        outcome = "back"
    else:
        outcome = "forward"
    after = rig.files()
    for path, data in at_kill.items():
        assert data in (before[path], after[path]), f"{path} is neither old nor new"
    check_clean(rig)
    return outcome


def kill_in_transaction(proc: subprocess.Popen, intent: Path, extra: float) -> bool:
    """Kill ``extra`` seconds after the command's intent record appears."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and not intent.exists() and time.monotonic() < deadline:
        pass
    if proc.poll() is not None:
        return False
    if extra <= 0:
        kill_group(proc)
        return True
    return kill_after(proc, extra)


def random_kills(rig: Rig, n: int, seed: int = 12, span: float = 1.5) -> dict[str, int]:
    """``n`` kills at random instants of the cycle's commands; outcomes counted.

    Half the kills land anywhere in the command's life (uniform over ``span`` seconds from
    its start), half inside its transaction (a random delay after the intent record
    appears), where the writes are.
    """
    rnd = random.Random(seed)
    intent = rig.workspace / ".ledger" / "intent.json"
    counts = {"done": 0, "back": 0, "forward": 0}
    commands = cycle(rig)
    for k in range(n):
        command = [a.replace("@", str(11 + k)) for a in commands[k % len(commands)]]
        if rnd.random() < 0.5:
            kill = functools.partial(kill_after, delay=rnd.uniform(0.0, span))
        else:
            kill = functools.partial(kill_in_transaction, intent=intent,
                                     extra=rnd.choice([0.0, rnd.uniform(0.0, 0.2)]))
        counts[trial(rig, command, kill)] += 1
    return counts
