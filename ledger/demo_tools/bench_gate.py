"""Bench the engine a serve script configures, at one concurrency: a throughput gate.

    python bench_gate.py --script deploy/serve.sh (--min-output-throughput 900 |
                         --reference before/serve.sh [--min-ratio 0.7])
                         [--mode offline|online] [--engine-path REPO] [--concurrency 32]
                         [--num-prompts 64] [--input-len 16] [--output-len 32] [--best-of N]
                         [--settle N]

A perf regression is a failure a bisect can look for when the check says so: this runs
``bash SCRIPT`` as it is now — its knobs, its engine release pin, its model — prints the
output tok/s measured (the best of ``--best-of N`` runs: a loaded machine only ever makes a
run slower), and exits 0 when that is at least ``--min-output-throughput``, 1 when it is
below or the engine does not run.  ``--reference SCRIPT`` (offline) judges against another
script measured in the same check instead — the two alternate, best of N each — and
passes when the script's output is at least ``--min-ratio`` of the reference's: an A/B on
a loaded machine moves both sides, where an absolute threshold drifts with the load.  A
ratio that lands close to the threshold (within a factor of ``CLOSE``, 1.3) is measured
again, one more run a side at a time, up to ``--settle N`` more (2): a neighbour's burst in
both of one side's runs once read a deployment at 0.55 of its own configuration, where a
real regression of the story's reads 0.2-0.35 and its cure ~1.0.  Far from the threshold
the first runs decide.

``--mode offline`` (the default) runs the script with ``$PYTHON`` standing for a shim
that turns its launch line ``python -m engine serve --role R [--release P] [--model M |
--preset P] ...`` into ``python -m engine bench --mode offline`` with the same release and
model, in the environment the script built: the engine as configured, measured without
HTTP (on a shared CPU, the HTTP threads' share of the cores is most of the noise).
``--mode online`` starts the server on a free loopback port and runs the online bench
against it; the server's process group is stopped before this exits.  Standard library
only; ``--engine-path`` goes first on PYTHONPATH, as in ``pd_check.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pd_check import free_port  # noqa: E402
from pd_check import stop_all  # noqa: E402
from pd_check import wait_health  # noqa: E402

# A ratio within this factor of --min-ratio is measured again (--settle): on a shared
# machine a burst can slow both runs of one side; far from the threshold it cannot flip.
CLOSE = 1.3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", required=True, type=Path, help="the serve script to start")
    ap.add_argument("--min-output-throughput", type=float, metavar="TOKS")
    ap.add_argument("--reference", type=Path, metavar="SCRIPT",
                    help="offline: judge against this script, measured alongside")
    ap.add_argument("--min-ratio", type=float, default=0.7)
    ap.add_argument("--engine-path", type=Path, help="put this folder first on PYTHONPATH")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--start-timeout", type=float, default=120.0)
    ap.add_argument("--mode", choices=("offline", "online"), default="offline")
    ap.add_argument("--best-of", type=int, default=1, metavar="N")
    ap.add_argument("--settle", type=int, default=2, metavar="N",
                    help="--reference: up to N more runs a side while the ratio is within a "
                         f"factor of {CLOSE} of --min-ratio (default 2; 0: never)")
    args = ap.parse_args(argv)
    if (args.min_output_throughput is None) == (args.reference is None):
        ap.error("give --min-output-throughput or --reference (one)")
    if args.reference is not None:
        if args.mode != "offline":
            ap.error("--reference goes with --mode offline")
        return relative(args)
    if args.mode == "offline":
        rows = [offline(args) for _ in range(max(1, args.best_of))]
        if any(row is None for row in rows):
            return 1
        return judge(args, max(rows, key=lambda row: float(row["output_throughput"])))
    port = free_port()
    env = {**_env(args), "PORT": str(port)}
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(["bash", str(args.script)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not wait_health(server, url, args.start_timeout):
            print(f"server did not come up (exit {server.poll()})")
            return 1
        return bench(args, url, env)
    finally:
        stop_all([server])


def relative(args: argparse.Namespace) -> int:
    """The script against the reference, alternating, best of N each; while the ratio is
    close to the threshold (:data:`CLOSE`), up to ``--settle`` more rounds."""
    best: dict[str, dict] = {}
    rounds, first = 0, None
    while True:
        for which, script in (("reference", args.reference), ("script", args.script)):
            row = offline(args, script)
            if row is None:
                return 1
            if which not in best or row["output_throughput"] > best[which]["output_throughput"]:
                best[which] = row
        rounds += 1
        if rounds < max(1, args.best_of):
            continue
        ratio = _ratio(best)
        first = ratio if first is None else first
        if decided(ratio, rounds, args.min_ratio, args.best_of, args.settle):
            break
    mine, ref = _speeds(best)
    ok = ratio >= args.min_ratio
    settled = "" if rounds <= max(1, args.best_of) else (
        f" (best of {rounds} runs a side: the first {max(1, args.best_of)} read "
        f"{first:.2f}, close to {args.min_ratio:g})")
    print(f"output {mine:.0f} tok/s at c{args.concurrency} (engine release "
          f"{best['script'].get('engine_release')}) vs {ref:.0f} tok/s of the reference "
          f"(release {best['reference'].get('engine_release')}): ratio {ratio:.2f}, "
          f"{'at least' if ok else 'below'} {args.min_ratio:g}{settled}")
    return 0 if ok else 1


def decided(ratio: float, rounds: int, min_ratio: float, best_of: int, settle: int) -> bool:
    """Whether ``rounds`` rounds (at least ``best_of``) reading ``ratio`` decide the gate:
    yes far from ``min_ratio`` (outside a factor of :data:`CLOSE`) or after ``settle``
    more rounds than ``best_of``."""
    close = min_ratio / CLOSE <= ratio < min_ratio * CLOSE
    return not close or rounds >= max(1, best_of) + max(0, settle)


def _speeds(best: dict[str, dict]) -> tuple[float, float]:
    """Output tok/s of the script and of the reference, the best run of each."""
    mine, ref = (float(best[k]["output_throughput"]) for k in ("script", "reference"))
    return mine, ref


def _ratio(best: dict[str, dict]) -> float:
    mine, ref = _speeds(best)
    return mine / ref if ref > 0 else 0.0


def offline(args: argparse.Namespace, script: Path | None = None) -> dict | None:
    """Run ``script`` (default: ``--script``) with ``$PYTHON`` the shim (:func:`launched`):
    its bench row."""
    env = _env(args)
    with tempfile.TemporaryDirectory(prefix="bench_gate-") as tmp:
        shim = Path(tmp) / "python"
        shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                        f"{shlex.quote(str(Path(__file__).resolve()))} --launched \"$@\"\n")
        shim.chmod(0o755)
        out = Path(tmp) / "bench.jsonl"
        env.update(PYTHON=str(shim), BENCH_GATE_OUT=str(out), BENCH_GATE_ARGS=" ".join(
            [str(args.concurrency), str(args.num_prompts), str(args.input_len),
             str(args.output_len)]))
        done = subprocess.run(["bash", str(script or args.script)], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0 or not out.is_file():
            print(f"the engine did not run (exit {done.returncode}): "
                  f"{done.stderr.strip()[-300:]}")
            return None
        return json.loads(out.read_text().splitlines()[0])


def launched(argv: list[str]) -> int:
    """The shim: ``-m engine serve FLAGS`` -> the offline bench of that release and model."""
    if argv[:3] != ["-m", "engine", "serve"]:
        print(f"bench_gate: not an engine launch: {' '.join(argv)}", file=sys.stderr)
        return 2
    keep, words = [], argv[3:]
    for i, word in enumerate(words):
        if word in ("--release", "--model", "--preset") and i + 1 < len(words):
            keep += [word, words[i + 1]]
    conc, prompts, input_len, output_len = os.environ["BENCH_GATE_ARGS"].split()
    cmd = [sys.executable, "-m", "engine", "bench", "--mode", "offline", *keep,
           "--concurrency", conc, "--num-prompts", prompts, "--input-len", input_len,
           "--output-len", output_len, "--json", os.environ["BENCH_GATE_OUT"]]
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False).returncode


def _env(args: argparse.Namespace) -> dict[str, str]:
    env = {**os.environ, "PYTHON": sys.executable}
    env.setdefault("ENGINE_NUM_THREADS", "1")
    if args.engine_path:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.engine_path.resolve())] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def judge(args: argparse.Namespace, row: dict) -> int:
    tps = float(row["output_throughput"])
    release = row.get("engine_release") or (row.get("server_info") or {}).get("engine_release")
    ok = tps >= args.min_output_throughput
    print(f"output {tps:.0f} tok/s at c{args.concurrency} (engine release {release}, "
          f"{args.mode}): {'at least' if ok else 'below'} {args.min_output_throughput:g}")
    return 0 if ok else 1


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
        return judge(args, json.loads(out.read_text().splitlines()[0]))


if __name__ == "__main__":
    sys.exit(launched(sys.argv[2:]) if sys.argv[1:2] == ["--launched"] else main())
