"""One A/B run with a real client: start the bundled engine, drive it with AIPerf, stop it.

``ledger ab ID --bench aiperf:MODEL_DIR`` runs, for every side and load point::

    {python} -m ledger.evidence.aiperf_bench --model MODEL_DIR --out {out}
        --concurrency {concurrency} --rate {rate} -- {flags}

which starts ``python -m engine serve --role both --model MODEL_DIR`` on a free loopback
port in the side's environment (its env knobs) with the side's launch ``{flags}``, waits
for ``GET /v1/models``, runs ``aiperf profile`` against its ``/v1/completions`` (streamed,
fixed synthetic input/output lengths, ``--export-outputs-json``) with ``--artifact-dir
{out}``, and stops the server's process group whatever happens.  The ledger then reads
``{out}`` as an AIPerf artifact directory (see :mod:`ledger.evidence.tools`): its summary
gives the metrics and percentiles, its ``outputs.json`` the output digest.  A load point
left empty (``--concurrency ''`` in a rate sweep) is not given to AIPerf.

MODEL_DIR is an engine checkpoint with a Hugging Face tokenizer (``tokenizer.json``):
AIPerf counts and makes prompts with it.  AIPerf is its own program (it installs without
torch, into a venv of its own is fine): ``--aiperf PATH``, else ``$AIPERF``, else
``aiperf`` on PATH.

This module is a command, not a library: it never imports the engine or the ledger's
workspace, and prints only to stderr.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

READY_TIMEOUT_S = 180.0
PREFIX = "aiperf:"
TEMPLATE = ("{{python}} -m ledger.evidence.aiperf_bench --model {model} --out {{out}} "
            "--concurrency {{concurrency}} --rate {{rate}} -- {{flags}}")


def bench_template(model_dir: str) -> str:
    """The ``--bench`` template that ``aiperf:MODEL_DIR`` stands for (MODEL_DIR quoted, so
    it stays one argument whatever it holds)."""
    import shlex

    return TEMPLATE.format(model=shlex.quote(model_dir))


def find_aiperf(given: str | None = None) -> str | None:
    """The aiperf program: ``given``, else ``$AIPERF``, else ``aiperf`` on PATH."""
    for candidate in (given, os.environ.get("AIPERF")):
        if candidate:
            return candidate if Path(candidate).is_file() else shutil.which(candidate)
    return shutil.which("aiperf")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"aiperf_bench: the engine server exited ({proc.returncode}):\n{tail}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise SystemExit(f"aiperf_bench: the engine server did not answer {url} in "
                     f"{READY_TIMEOUT_S:.0f}s")


def aiperf_argv(aiperf: str, args: argparse.Namespace, url: str) -> list[str]:
    """The ``aiperf profile`` command line for one run."""
    load = (["--concurrency", str(args.concurrency)] if args.concurrency
            else ["--request-rate", args.rate])
    return [aiperf, "profile", "--model", str(args.model), "--tokenizer", str(args.model),
            "--url", url, "--endpoint-type", "completions", "--streaming", *load,
            "--request-count", str(args.requests),
            "--synthetic-input-tokens-mean", str(args.input_len),
            "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(args.output_len), "--output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--random-seed", str(args.seed),
            "--artifact-dir", str(args.out), "--ui-type", "none", "--export-outputs-json"]


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run(args: argparse.Namespace) -> int:
    aiperf = find_aiperf(args.aiperf)
    if aiperf is None:
        raise SystemExit("aiperf_bench: AIPerf is not installed: `pip install aiperf` (a venv "
                         "of its own is fine) and put it on PATH, set AIPERF, or give --aiperf")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="aiperf-bench-") as tmp:
        log = Path(tmp) / "server.log"
        with open(log, "wb") as out:
            server = subprocess.Popen(
                [sys.executable, "-m", "engine", "serve", "--role", "both", "--port", str(port),
                 "--model", str(args.model), *args.flags],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        try:
            _wait_ready(server, url, log)
            done = subprocess.run(aiperf_argv(aiperf, args, url), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                sys.stderr.write(done.stdout.decode("utf-8", "replace")[-3000:])
                return done.returncode
        finally:
            _stop(server)
    return 0


def _count(text: str) -> int | None:
    return int(text) if text.strip() else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ledger.evidence.aiperf_bench",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, type=Path,
                   help="engine checkpoint with a tokenizer.json")
    p.add_argument("--out", required=True, type=Path, help="AIPerf artifact directory")
    p.add_argument("--concurrency", type=_count, default=None)
    p.add_argument("--rate", default="", help="request rate (when no --concurrency)")
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--output-len", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--aiperf", default=None, help="the aiperf program")
    p.add_argument("flags", nargs=argparse.REMAINDER, help="the engine server's launch flags")
    args = p.parse_args(argv)
    if not args.concurrency and not args.rate:
        p.error("give --concurrency or --rate")
    args.flags = [f for f in args.flags if f != "--"]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
