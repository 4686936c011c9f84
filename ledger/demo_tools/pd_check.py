"""Start the PD deployment from its serve scripts, run the harness, stop it: a bisect check.

    python pd_check.py --deploy DIR [--engine-path REPO] [--via-proxy] [--rounds 6]

Knobs are read once at start-up, so a check of a configuration must start the servers
from the serve scripts as they are now: prefill, decode (``DIR/serve_prefill.sh``,
``DIR/serve_decode.sh``) and the router, on free loopback ports, with ``REPO`` (a
checkout holding the ``engine`` package, e.g. the demo's engine-repo) first on
PYTHONPATH so patch entries take effect too.  ``--via-proxy`` puts ``faulty_proxy.py``
in front of the router, as the client's network did.  Exit 0 when every round of the
harness is answered; 1 when a round is not, or a server does not come up.  Everything
it started is stopped (process groups) before it exits.  Standard library only.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deploy", required=True, type=Path, help="folder of the serve scripts")
    ap.add_argument("--engine-path", type=Path, help="put this folder first on PYTHONPATH")
    ap.add_argument("--via-proxy", action="store_true", help="through the faulty proxy")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--start-timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    ports = {role: free_port() for role in ("prefill", "decode", "router", "proxy")}
    url = {role: f"http://127.0.0.1:{p}" for role, p in ports.items()}
    env = {**os.environ, "PYTHON": sys.executable, "PREFILL_URL": url["prefill"],
           "DECODE_URL": url["decode"]}
    env.setdefault("ENGINE_NUM_THREADS", "1")
    if args.engine_path:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.engine_path.resolve())] + [p for p in [env.get("PYTHONPATH")] if p])
    procs: list[subprocess.Popen] = []

    def start(cmd: list[str], port: int) -> subprocess.Popen:
        p = subprocess.Popen(cmd, env={**env, "PORT": str(port)}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(p)
        return p

    try:
        workers = [start(["bash", str(args.deploy / f"serve_{r}.sh")], ports[r])
                   for r in ("prefill", "decode")]
        for p, r in zip(workers, ("prefill", "decode")):
            if not wait_health(p, url[r], args.start_timeout):
                print(f"{r} worker did not come up (exit {p.poll()})")
                return 1
        router = start(["bash", str(args.deploy / "serve_router.sh")], ports["router"])
        if not wait_health(router, url["router"], args.start_timeout):
            print("router did not come up")
            return 1
        target = url["router"]
        if args.via_proxy:
            proxy = start([sys.executable, str(HERE / "faulty_proxy.py"), "--port",
                           str(ports["proxy"]), "--upstream", url["router"]], ports["proxy"])
            if not wait_health(proxy, url["proxy"], 30):
                print("proxy did not come up")
                return 1
            target = url["proxy"]
        sys.stdout.flush()
        return subprocess.call([sys.executable, str(HERE / "harness.py"), "--url", target,
                                "--rounds", str(args.rounds)])
    finally:
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
