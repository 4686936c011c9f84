"""Start one server from its serve script, bench it online, stop it: a throughput gate.

    python bench_gate.py --script deploy/serve.sh --min-output-throughput 900
                         [--engine-path REPO] [--concurrency 32] [--num-prompts 64]
                         [--input-len 16] [--output-len 32] [--start-timeout 120]

A perf regression is a failure a bisect can look for when the check says so: this
starts ``bash SCRIPT`` (the file as it is now: its knobs and its engine release pin) on a
free loopback port, runs the bundled engine's online bench against it at one concurrency
(``python -m engine bench --mode online``), prints the output tok/s it measured, and exits
0 when that is at least ``--min-output-throughput``, 1 when it is below or the server does
not come up.  The server (its process group) is stopped before it exits.  Standard
library only; ``--engine-path`` goes first on PYTHONPATH, as in ``pd_check.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pd_check import free_port  # noqa: E402
from pd_check import wait_health  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", required=True, type=Path, help="the serve script to start")
    ap.add_argument("--min-output-throughput", required=True, type=float, metavar="TOKS")
    ap.add_argument("--engine-path", type=Path, help="put this folder first on PYTHONPATH")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--start-timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    port = free_port()
    env = {**os.environ, "PYTHON": sys.executable, "PORT": str(port)}
    env.setdefault("ENGINE_NUM_THREADS", "1")
    if args.engine_path:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.engine_path.resolve())] + [p for p in [env.get("PYTHONPATH")] if p])
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(["bash", str(args.script)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not wait_health(server, url, args.start_timeout):
            print(f"server did not come up (exit {server.poll()})")
            return 1
        return bench(args, url, env)
    finally:
        stop(server)


def bench(args: argparse.Namespace, url: str, env: dict[str, str]) -> int:
    with tempfile.TemporaryDirectory(prefix="bench_gate-") as tmp:
        out = Path(tmp) / "bench.jsonl"
        cmd = [sys.executable, "-m", "engine", "bench", "--mode", "online", "--url", url,
               "--concurrency", str(args.concurrency), "--num-prompts", str(args.num_prompts),
               "--input-len", str(args.input_len), "--output-len", str(args.output_len),
               "--json", str(out)]
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            print(f"bench failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
            return 1
        row = json.loads(out.read_text().splitlines()[0])
    tps = float(row["output_throughput"])
    release = row.get("server_info", {}).get("engine_release")
    ok = tps >= args.min_output_throughput
    print(f"output {tps:.0f} tok/s at c{args.concurrency} (engine release {release}): "
          f"{'at least' if ok else 'below'} {args.min_output_throughput:g}")
    return 0 if ok else 1


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
