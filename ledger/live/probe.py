"""Finding a target's running process and reading what it runs.

Probes (``live:`` in ledger.yaml, see :mod:`ledger.core.service`):

``pid_file: PATH``   the pid in that file (relative to the workspace);
``systemd: UNIT``    ``systemctl show -p MainPID --value UNIT`` (argv, no shell; 0 = not running);
``process: REGEX``   the one process whose ``/proc/PID/cmdline`` (arguments joined by
                     spaces) matches; several matches are an ambiguity, reported with every
                     pid and command line, never resolved by picking one;
``url: URL``         the server's ``/server_info``: the bundled engine's, SGLang's or vLLM's
                     (:mod:`ledger.live.engines`).

For a pid, the environment comes from ``/proc/PID/environ`` and the arguments from
``/proc/PID/cmdline``.  A process of another user cannot be read without privileges: that
is reported as ``unreadable`` with the reason (never guessed at, never an error that
hides the other targets).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from datetime import timezone
from pathlib import Path

from ledger.core.service import LiveProbe
from ledger.procs import PROC
from ledger.procs import pid_alive

RUNNING = "running"
NOT_RUNNING = "not running"
UNREADABLE = "unreadable"
AMBIGUOUS = "ambiguous"
NO_PROBE = "no probe"
URL_TIMEOUT_S = 3.0


@dataclass
class Observed:
    """What a probe found: the process's state, and what it runs when it could be read."""

    state: str
    probe: LiveProbe | None = None
    pid: int | None = None
    env: dict[str, str | None] | None = None  # None: could not be read
    argv: list[str] | None = None
    started: str | None = None  # ISO 8601 UTC
    source: str = ""  # where the values came from: /proc/PID/environ or the URL
    detail: str = ""  # why not running / unreadable / ambiguous
    info: dict = field(default_factory=dict)  # the server_info answer, for a url probe
    # /proc holds the whole environment (absent = unset); server_info only the knobs it
    # names (absent = not reported)
    env_complete: bool = True
    # what the server says it runs with, defaults applied (server_info ``knobs``); empty
    # when it says nothing of it (a /proc probe: only the raw environment is known)
    effective: dict[str, str] = field(default_factory=dict)
    # launch flags as a real engine reports them (SGLang's server_args, vLLM's config):
    # effective values, no command line (None: the probe read a command line, or nothing)
    flags: dict[str, str] | None = None
    engine: str = ""  # sglang | vllm for an engine's own answer; "" otherwise

    def to_dict(self) -> dict:
        return {"state": self.state, "probe": self.probe.to_dict() if self.probe else None,
                "pid": self.pid, "started": self.started, "source": self.source,
                "detail": self.detail, "argv": self.argv}


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def process_start(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), from /proc/PID/stat."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()
        uptime = float((PROC / "uptime").read_text().split()[0])
        return time.time() - uptime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid: int | str) -> list[str] | None:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]] or None


def find_pid(probe: LiveProbe, root: Path) -> tuple[int | None, str, str]:
    """(pid, state, detail) for a pid-giving probe; pid only when state is running."""
    if probe.kind == "pid_file":
        return _from_pid_file(Path(probe.value) if Path(probe.value).is_absolute()
                              else root / probe.value)
    if probe.kind == "systemd":
        return _from_systemd(probe.value)
    return _from_process_regex(probe.value)


def _from_pid_file(path: Path) -> tuple[int | None, str, str]:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None, NOT_RUNNING, f"pid file {path} does not exist"
    except OSError as e:
        return None, UNREADABLE, f"cannot read pid file {path}: {e.strerror}"
    if not text.isdigit():
        return None, UNREADABLE, f"pid file {path} does not hold a pid ({text[:40]!r})"
    pid = int(text)
    if not pid_alive(pid):
        return None, NOT_RUNNING, f"pid {pid} (from {path}) is not running"
    return pid, RUNNING, ""


def _from_systemd(unit: str) -> tuple[int | None, str, str]:
    try:
        out = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value", "--", unit],
                             capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return None, UNREADABLE, "systemctl is not installed here"
    except subprocess.TimeoutExpired:
        return None, UNREADABLE, f"systemctl show {unit} did not answer within 10s"
    if out.returncode != 0 or not out.stdout.strip().isdigit():
        return None, UNREADABLE, f"systemctl show {unit}: {(out.stderr or out.stdout).strip()}"
    pid = int(out.stdout.strip())
    if pid == 0 or not pid_alive(pid):
        return None, NOT_RUNNING, f"systemd unit {unit} has no main process"
    return pid, RUNNING, ""


def matching_processes(regex: str) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line matches, but this one's."""
    pattern = re.compile(regex)
    own = {os.getpid(), os.getppid()}
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        argv = _cmdline(entry.name)
        if argv and pattern.search(" ".join(argv)) and pid_alive(int(entry.name)):
            found.append((int(entry.name), " ".join(argv)))
    return sorted(found)


def _from_process_regex(regex: str) -> tuple[int | None, str, str]:
    found = matching_processes(regex)
    if not found:
        return None, NOT_RUNNING, f"no process matches {regex!r}"
    if len(found) > 1:
        listed = "; ".join(f"pid {pid}: {cmd[:120]}" for pid, cmd in found)
        return None, AMBIGUOUS, (f"process {regex!r} matches {len(found)} processes ({listed}); "
                                 "make the regex match exactly one, or use pid_file/systemd")
    return found[0][0], RUNNING, ""


def read_proc(pid: int) -> tuple[dict[str, str | None] | None, list[str] | None, str]:
    """(environment, argv, problem) of ``pid`` from /proc; unreadable parts are None."""
    argv = _cmdline(pid)
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except PermissionError:
        owner = _owner(pid)
        return None, argv, (f"permission denied reading /proc/{pid}/environ (the process "
                            f"runs as uid {owner}; run the ledger as that user or root)")
    except OSError as e:
        return None, argv, f"cannot read /proc/{pid}/environ: {e.strerror}"
    env: dict[str, str | None] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env, argv, ""


def _owner(pid: int) -> str:
    try:
        return str((PROC / str(pid)).stat().st_uid)
    except OSError:
        return "?"


def observe(probe: LiveProbe | None, root: Path) -> Observed:
    """Run one probe; never raises for a process that is gone or unreadable."""
    if probe is None:
        return Observed(NO_PROBE, detail="no live probe configured (ledger target set --live)")
    if probe.kind == "url":
        return _observe_url(probe)
    pid, state, detail = find_pid(probe, root)
    if pid is None:
        return Observed(state, probe, detail=detail)
    env, argv, problem = read_proc(pid)
    return Observed(UNREADABLE if env is None else RUNNING, probe, pid, env, argv,
                    _iso(process_start(pid)), f"/proc/{pid}", problem)


def _fetch(url: str) -> tuple[int, bytes | str]:
    """(HTTP status, body) of a GET, or (0, why) when nothing answered."""
    import urllib.error  # here: loading urllib.request costs every command ~30 ms
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT_S) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError) as e:
        return 0, str(getattr(e, "reason", e))


def _sibling(url: str, path: str) -> str:
    """``path`` on the server of ``url`` (same scheme, host and port)."""
    from urllib.parse import urlsplit
    from urllib.parse import urlunsplit

    parts = urlsplit(url)
    base = parts.path.rsplit("/", 1)[0]
    return urlunsplit((parts.scheme, parts.netloc, base + path, "", ""))


def _observe_url(probe: LiveProbe) -> Observed:
    """A server's own account of what it runs (the answers of :mod:`ledger.live.engines`).

    The URL given first; where it is 404, SGLang's older ``/get_server_info`` and then
    vLLM's ``/metrics`` (``vllm:cache_config_info``) on the same server — never another
    host."""
    status, body = _fetch(probe.value)
    if status == 0:
        return Observed(NOT_RUNNING, probe, detail=f"no answer from {probe.value}: {body}")
    if status == 404:
        return _observe_fallbacks(probe)
    if status != 200:
        return Observed(UNREADABLE, probe, detail=f"{probe.value} answered HTTP {status}")
    try:
        info = json.loads(body)
    except ValueError:
        return Observed(UNREADABLE, probe, detail=f"{probe.value} did not answer JSON")
    if not isinstance(info, dict):
        return Observed(UNREADABLE, probe, detail=f"{probe.value} did not answer an object")
    if isinstance(info.get("env"), dict):
        return _bundled(probe, info)
    return _from_engine_answer(probe, probe.value, info)


def _from_engine_answer(probe: LiveProbe, url: str, info: dict) -> Observed:
    from ledger.live import engines

    if engines.is_sglang(info):
        return _engine_observed(probe, url, engines.from_sglang(info), info)
    if "vllm_config" in info:
        if not isinstance(info["vllm_config"], dict):  # the text format: ask for JSON
            status, body = _fetch(url + ("&" if "?" in url else "?") + "config_format=json")
            try:
                info = json.loads(body) if status == 200 else info
            except ValueError:
                pass
        if isinstance(info.get("vllm_config"), dict):
            return _engine_observed(probe, url, engines.from_vllm(info), info)
    return Observed(UNREADABLE, probe, detail=f"{url} is not a server_info answer the ledger "
                    "reads (the bundled engine's, SGLang's or vLLM's)")


def _observe_fallbacks(probe: LiveProbe) -> Observed:
    from ledger.live import engines

    older = _sibling(probe.value, "/get_server_info")
    status, body = _fetch(older)
    if status == 200:
        try:
            info = json.loads(body)
        except ValueError:
            info = None
        if isinstance(info, dict):
            return _from_engine_answer(probe, older, info)
    metrics = _sibling(probe.value, "/metrics")
    status, body = _fetch(metrics)
    if status == 200:
        state = engines.from_vllm_metrics(body.decode("utf-8", "replace"))
        if state is not None:
            return _engine_observed(probe, metrics + " (vllm:cache_config_info)", state, {})
    return Observed(UNREADABLE, probe, detail=f"{probe.value} answered 404, and neither "
                    f"{older} nor vllm:cache_config_info in {metrics} answered")


def _engine_observed(probe: LiveProbe, source: str, state, info: dict) -> Observed:
    """An SGLang or vLLM answer: flags and env as reported (effective values)."""
    return Observed(RUNNING, probe, env=dict(state.env), source=source, info=info,
                    env_complete=False, effective={**state.flags, **state.env},
                    flags=dict(state.flags), engine=state.engine)


def _bundled(probe: LiveProbe, info: dict) -> Observed:
    env = {str(k): None if v is None else str(v) for k, v in info["env"].items()}
    argv = info.get("argv") if isinstance(info.get("argv"), list) else None
    pid = info.get("pid") if isinstance(info.get("pid"), int) else None
    started = info.get("start_time") if isinstance(info.get("start_time"), str) else None
    from ledger.values import default_text

    knobs = info.get("knobs") if isinstance(info.get("knobs"), dict) else {}
    effective = {str(k): default_text(v) for k, v in knobs.items() if v is not None}
    return Observed(RUNNING, probe, pid, env, argv, started, probe.value, info=info,
                    env_complete=False, effective=effective)


def launch_flags(argv: list[str] | None) -> dict[str, str]:
    """A running process's command line as flag knobs, spelled as the bash format
    reports a serve script's launch flags (:mod:`envknobs.flags`): ``--x v`` and ``--x=v``
    give ``v``; a switch (a catalog boolean, or a flag followed by another flag or by
    nothing) gives ``true``; ``--no-x`` of a negatable catalog flag gives ``--x``:
    ``false``; a catalog ``nargs`` flag joins its words with spaces.  Names are canonical
    (``--cuda_graph_max_bs`` is ``--cuda-graph-max-bs``); the last occurrence wins, as with
    argparse; nothing after a bare ``--`` is a flag."""
    from envknobs.catalog import lookup_flag
    from envknobs.flags import FLAG_NAME_RE
    from envknobs.flags import canonical_flag

    def is_flag(word: str) -> bool:
        return word.startswith("--") and bool(FLAG_NAME_RE.match(word.partition("=")[0]))

    args = list(argv or ())
    flags: dict[str, str] = {}
    k = 0
    while k < len(args):
        word = args[k]
        k += 1
        if word == "--":
            break
        if not is_flag(word):
            continue
        name, eq, inline = word.partition("=")
        flag = lookup_flag(name)
        if flag is None and name.startswith("--no-"):
            base = lookup_flag("--" + name[5:])
            if base is not None and getattr(base, "negatable", False):
                flags[base.name] = "false"
                continue
        knob = flag.name if flag is not None else canonical_flag(name)
        if eq:
            flags[knob] = inline
            continue
        if flag is not None and getattr(flag, "type", None) == "bool":
            flags[knob] = "true"
            continue
        words = []
        while k < len(args) and not is_flag(args[k]) and args[k] != "--" and (
                not words or (flag is not None and getattr(flag, "nargs", None))):
            words.append(args[k])
            k += 1
        flags[knob] = " ".join(words) if words else "true"
    return flags
