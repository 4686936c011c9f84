"""Start the PD deployment from its serve scripts, run the harness, stop it: a bisect check.

    python pd_check.py --deploy DIR [--engine-path REPO] [--via-proxy] [--rounds 6]
                       [--drop-transfers] [--timeout S] [--report FILE]

Knobs are read once at start-up, so a check of a configuration must start the servers
from the serve scripts as they are now: prefill, decode (``DIR/serve_prefill.sh``,
``DIR/serve_decode.sh``) and the router, on free loopback ports, with ``REPO`` (a
checkout holding the ``engine`` package, e.g. the demo's engine-repo) first on
PYTHONPATH so patch entries take effect too.  ``--via-proxy`` puts ``faulty_proxy.py``
in front of the router, as the client's network did.  Exit 0 when every round of the
harness is answered; 1 when a round is not, or a server does not come up.  Everything
it started is stopped (process groups) before it exits.  Standard library only.

``--drop-transfers`` checks liveness under a fault instead: the prefill worker drops every
KV transfer (``ENGINE_TRANSFER_DROP_PROB=1``, set in a temporary copy of
``serve_prefill.sh``: the decode script, whose ``ENGINE_INFLIGHT_TIMEOUT_S`` is under
test, runs as it is), and the harness passes only when each round is refused with an
error within ``--timeout`` seconds (``harness.py --expect-error``); a round with no answer
in that time is a hang and exits 1.  ``--report FILE`` appends what the check saw (the
decode script's timeout, the harness's lines, the exit code) to FILE as markdown.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(proc: subprocess.Popen, url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def faulty_prefill(script: Path, into: Path) -> Path:
    """A copy of ``script`` (in ``into``) whose prefill worker drops every KV transfer."""
    text, n = re.subn(r"^export ENGINE_TRANSFER_DROP_PROB=.*$",
                      "export ENGINE_TRANSFER_DROP_PROB=1", script.read_text(), flags=re.M)
    if n != 1:
        raise SystemExit(f"{script}: no single 'export ENGINE_TRANSFER_DROP_PROB=' line")
    copy = into / script.name
    copy.write_text(text)
    return copy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deploy", required=True, type=Path, help="folder of the serve scripts")
    ap.add_argument("--engine-path", type=Path, help="put this folder first on PYTHONPATH")
    ap.add_argument("--via-proxy", action="store_true", help="through the faulty proxy")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--start-timeout", type=float, default=120.0)
    ap.add_argument("--drop-transfers", action="store_true",
                    help="prefill drops every KV transfer; pass when each round fails fast")
    ap.add_argument("--timeout", type=float, default=20.0, help="client seconds per round")
    ap.add_argument("--report", type=Path, help="append what the check saw here (markdown)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pd_check-") as tmp:
        scripts = {r: args.deploy / f"serve_{r}.sh" for r in ("prefill", "decode", "router")}
        if args.drop_transfers:
            scripts["prefill"] = faulty_prefill(scripts["prefill"], Path(tmp))
            timeout = re.findall(r"^export ENGINE_INFLIGHT_TIMEOUT_S=(\S+)$",
                                 scripts["decode"].read_text(), flags=re.M)
            head = [f"fault: the prefill worker drops every KV transfer; decode runs "
                    f"{scripts['decode'].name} as it is (ENGINE_INFLIGHT_TIMEOUT_S="
                    f"{','.join(timeout) or 'unset'}); the client waits {args.timeout:g}s"]
            print(head[0], flush=True)
        else:
            head = []
        t0 = time.monotonic()
        rc, lines = run(args, scripts)
        lines = head + lines
    if args.report:
        report(args.report, argv if argv is not None else sys.argv[1:], lines, rc,
               time.monotonic() - t0)
    return rc


def report(path: Path, argv: list[str], lines: list[str], rc: int, seconds: float) -> None:
    """Append one check's outcome to ``path`` as a markdown section."""
    import shlex

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(f"## `pd_check.py {shlex.join(argv)}`\n\nexit {rc} after {seconds:.1f}s "
                "(servers started and stopped included)\n\n```\n" + "\n".join(lines)
                + "\n```\n\n")


def run(args: argparse.Namespace, scripts: dict[str, Path]) -> tuple[int, list[str]]:
    """Start the servers from ``scripts``, run the harness, stop everything: its exit code
    and the lines it printed (printed here too, as they come)."""
    ports = {role: free_port() for role in ("prefill", "decode", "router", "proxy")}
    url = {role: f"http://127.0.0.1:{p}" for role, p in ports.items()}
    env = {**os.environ, "PYTHON": sys.executable, "PREFILL_URL": url["prefill"],
           "DECODE_URL": url["decode"]}
    env.setdefault("ENGINE_NUM_THREADS", "1")
    if args.engine_path:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.engine_path.resolve())] + [p for p in [env.get("PYTHONPATH")] if p])
    procs: list[subprocess.Popen] = []

    def say(line: str) -> tuple[int, list[str]]:
        print(line)
        return 1, [line]

    def start(cmd: list[str], port: int) -> subprocess.Popen:
        p = subprocess.Popen(cmd, env={**env, "PORT": str(port)}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(p)
        return p

    try:
        workers = [start(["bash", str(scripts[r])], ports[r]) for r in ("prefill", "decode")]
        for p, r in zip(workers, ("prefill", "decode")):
            if not wait_health(p, url[r], args.start_timeout):
                return say(f"{r} worker did not come up (exit {p.poll()})")
        router = start(["bash", str(scripts["router"])], ports["router"])
        if not wait_health(router, url["router"], args.start_timeout):
            return say("router did not come up")
        target = url["router"]
        if args.via_proxy:
            proxy = start([sys.executable, str(HERE / "faulty_proxy.py"), "--port",
                           str(ports["proxy"]), "--upstream", url["router"]], ports["proxy"])
            if not wait_health(proxy, url["proxy"], 30):
                return say("proxy did not come up")
            target = url["proxy"]
        harness = subprocess.Popen(
            [sys.executable, str(HERE / "harness.py"), "--url", target, "--rounds",
             str(args.rounds), "--timeout", str(args.timeout)]
            + (["--expect-error"] if args.drop_transfers else []),
            stdout=subprocess.PIPE, text=True)
        lines = []
        for line in harness.stdout:
            print(line, end="", flush=True)
            lines.append(line.rstrip("\n"))
        return harness.wait(), lines
    finally:
        stop_all(procs)


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every process group at once, then SIGKILL what is not gone in 10 s."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


if __name__ == "__main__":
    sys.exit(main())
