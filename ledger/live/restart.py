"""Restarting a target's service and waiting for its health check.

:func:`restart_and_check` is the library entry point (``--restart`` on mutating commands
uses it, and so can ``ledger bisect``): it restarts each named target's service in order
(``restart:`` in ledger.yaml, run as an argv list from the workspace directory, stdin
closed, output kept), then waits for that target's ``health:`` check, and stops at the
first target that fails — later ones are left alone, still on what they ran.  It returns
a :class:`RestartResult` (``.ok``, ``.steps``, ``.describe()``) and raises only for a
configuration that cannot be run at all (:func:`check_restartable`, before anything is
restarted).  It changes nothing in the workspace; recording the result is the caller's.

The health wait polls every quarter second until ``timeout_s``; with a ``pid_file`` or
``systemd`` probe, a process that is gone after the restart fails the check at once
(a server that dies on a bad knob need not be waited for).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass
from dataclasses import field
from typing import Sequence

from ledger.core.managed_file import Target
from ledger.errors import Refused
from ledger.live.probe import NOT_RUNNING
from ledger.live.probe import find_pid
from ledger.procs import exited_report
from ledger.procs import service_log
from ledger.store.workspace import Workspace

POLL_S = 0.25


@dataclass
class HealthResult:
    ok: bool
    seconds: float
    detail: str

    def to_dict(self) -> dict:
        return {"ok": self.ok, "seconds": round(self.seconds, 2), "detail": self.detail}


@dataclass
class Step:
    """One target's restart and health check."""

    target: str
    argv: list[str]
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0
    old_pid: int | None = None
    new_pid: int | None = None
    health: HealthResult | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.health is not None and self.health.ok

    def describe(self) -> str:
        pids = ""
        if self.old_pid or self.new_pid:
            pids = f" (pid {self.old_pid or '-'} -> {self.new_pid or '-'})"
        head = f"{self.target}: restarted{pids} in {self.seconds:.1f}s"
        if self.error:
            return f"{self.target}: restart FAILED: {self.error}"
        if self.health is None:
            return head
        verdict = "healthy" if self.health.ok else "health check FAILED"
        return f"{head}; {verdict}: {self.health.detail}"

    def to_dict(self) -> dict:
        return {"target": self.target, "argv": self.argv, "returncode": self.returncode,
                "output": self.output, "seconds": round(self.seconds, 2),
                "old_pid": self.old_pid, "new_pid": self.new_pid, "error": self.error,
                "health": self.health.to_dict() if self.health else None, "ok": self.ok}


@dataclass
class RestartResult:
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def failed(self) -> list[Step]:
        return [s for s in self.steps if not s.ok]

    @property
    def restarted(self) -> list[str]:
        return [s.target for s in self.steps]

    def describe(self) -> str:
        return "; ".join(s.describe() for s in self.steps) or "nothing restarted"

    def to_dict(self) -> dict:
        return {"ok": self.ok, "steps": [s.to_dict() for s in self.steps]}


def check_restartable(ws: Workspace, names: Sequence[str]) -> list[Target]:
    """The targets, each with a restart command and a health check, or a refusal naming
    every one that lacks them (nothing has been restarted yet)."""
    targets = [ws.target(n) for n in names]
    missing = []
    for t in targets:
        service = t.service
        lacks = [key for key, ok in (("restart", service and service.restart is not None),
                                     ("health", service and service.health is not None))
                 if not ok]
        if lacks:
            missing.append(f"{t.name} (no {' and no '.join(lacks)})")
    if missing:
        raise Refused(f"--restart: {ws.config_path}: target {', '.join(missing)}: add "
                      "`restart: [argv...]` and `health: {url: ..., expect: 200}` there "
                      "(or `ledger target set NAME --restart ... --health-url ...`)")
    return targets


def _pid_of(ws: Workspace, t: Target) -> tuple[int | None, str]:
    probe = t.service.live if t.service else None
    if probe is None or probe.kind == "url":
        return None, ""
    pid, state, detail = find_pid(probe, ws.root)
    return pid, (detail if state == NOT_RUNNING else "")


def _log_of(ws: Workspace, t: Target):
    """The service's log beside its pid file, if it has one (ledger.procs.service_log)."""
    from pathlib import Path

    probe = t.service.live if t.service else None
    if probe is None or probe.kind != "pid_file":
        return None
    path = Path(probe.value)
    return service_log(path if path.is_absolute() else ws.root / path)


def run_restart(ws: Workspace, t: Target) -> Step:
    """Run one target's restart command (no health wait)."""
    service = t.service
    argv = service.restart_argv()
    step = Step(t.name, argv, old_pid=_pid_of(ws, t)[0])
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out:
        try:
            # Output to a file, not a pipe: a service forked by the command may keep the
            # pipe open for ever, and the ledger must not wait for it.
            proc = subprocess.run(argv, cwd=ws.root, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=service.restart_timeout_s)
            step.returncode = proc.returncode
        except FileNotFoundError as e:
            step.error = f"cannot run {argv[0]!r}: {e.strerror}"
        except subprocess.TimeoutExpired:
            step.error = f"`{' '.join(argv)}` still running after {service.restart_timeout_s:g}s"
        out.seek(0)
        step.output = out.read()[-2000:].decode("utf-8", "replace")
    step.seconds = time.monotonic() - t0
    if step.returncode not in (None, 0):
        last = step.output.strip().splitlines()[-1:] or [""]
        step.error = f"`{' '.join(argv)}` exited {step.returncode}: {last[0][:200]}"
    step.new_pid = _pid_of(ws, t)[0]
    return step


def wait_healthy(ws: Workspace, t: Target) -> HealthResult:
    """Poll the target's health check until it passes or its timeout runs out."""
    health = t.service.health
    t0 = time.monotonic()
    deadline = t0 + health.timeout_s
    last = "no answer yet"
    while True:
        ok, last = _check_once(health, max(0.5, min(5.0, deadline - time.monotonic())),
                               ws.root)
        elapsed = time.monotonic() - t0
        if ok:
            return HealthResult(True, elapsed, f"{last} after {elapsed:.1f}s")
        pid, gone = _pid_of(ws, t)
        if gone:
            return HealthResult(False, elapsed, exited_report(
                f"the process exited ({gone}); last check: {last}", _log_of(ws, t)))
        if time.monotonic() >= deadline:
            return HealthResult(False, elapsed, f"{health.describe()} not met: {last}")
        time.sleep(POLL_S)


def _check_once(health, timeout: float, cwd) -> tuple[bool, str]:
    import urllib.error  # here: loading urllib.request costs every command ~30 ms
    import urllib.request

    if health.generate:
        return generates_a_token(health.generate, timeout)
    if health.url:
        try:
            with urllib.request.urlopen(health.url, timeout=timeout) as resp:
                status = resp.status
        except urllib.error.HTTPError as e:
            status = e.code
        except (urllib.error.URLError, OSError) as e:
            return False, f"GET {health.url}: {getattr(e, 'reason', e)}"
        return status == health.expect, f"GET {health.url} = {status}"
    try:
        proc = subprocess.run(list(health.command), stdin=subprocess.DEVNULL, cwd=cwd,
                              capture_output=True, timeout=timeout)
    except FileNotFoundError as e:
        return False, f"cannot run {health.command[0]!r}: {e.strerror}"
    except subprocess.TimeoutExpired:
        return False, f"`{' '.join(health.command)}` did not finish within {timeout:.1f}s"
    return proc.returncode == 0, f"`{' '.join(health.command)}` exited {proc.returncode}"


def restart_and_check(ws: Workspace, names: Sequence[str]) -> RestartResult:
    """Restart each target's service in order and wait for its health; stop at the
    first failure.  Raises :class:`~ledger.errors.Refused` (before restarting anything)
    when a target has no restart command or no health check."""
    result = RestartResult()
    for t in check_restartable(ws, names):
        step = run_restart(ws, t)
        result.steps.append(step)
        if step.error:
            break
        step.health = wait_healthy(ws, t)
        if not step.health.ok:
            break
    return result


def generates_a_token(base_url: str, timeout: float) -> tuple[bool, str]:
    """(ok, what happened) of one 1-token completion sent to ``base_url``.

    OpenAI's ``/v1/completions`` first (vLLM, SGLang and the bundled engine all serve it;
    ``model`` is left out, which all three accept for their one model), then SGLang's
    ``/generate`` when that route is 404.  Ok only when the answer holds at least one
    completion token (``usage.completion_tokens``, or ``meta_info.completion_tokens``):
    an answer without a token is a failure, whatever its status."""
    import json
    import urllib.error  # here: loading urllib.request costs every command ~30 ms
    import urllib.request

    attempts = (("/v1/completions", {"prompt": "ok", "max_tokens": 1, "temperature": 0}),
                ("/generate", {"text": "ok", "sampling_params": {"max_new_tokens": 1,
                                                                 "temperature": 0}}))
    last = ""
    for path, body in attempts:
        url = base_url + path
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            last = f"POST {url} = {e.code}"
            if e.code == 404:
                continue
            return False, last
        except (urllib.error.URLError, OSError) as e:
            return False, f"POST {url}: no tokens within {timeout:.1f}s " \
                          f"({getattr(e, 'reason', e)})"
        except ValueError:
            return False, f"POST {url}: the answer is not JSON"
        counts = answer.get("usage") or answer.get("meta_info") if isinstance(answer, dict) \
            else None
        tokens = counts.get("completion_tokens") if isinstance(counts, dict) else None
        if isinstance(tokens, int) and tokens >= 1:
            return True, f"POST {url} generated {tokens} token"
        return False, f"POST {url} answered without a completion token"
    return False, last
