"""A fake bench with known distributions, in the bundled engine's JSON-lines format.

As a script (what ``run_alternating`` runs)::

    python fake_bench.py --out OUT (--concurrency C | --rate R) [--log LOG]

it writes one engine-format object for concurrency C to OUT (for ``--rate R``: with
``max_concurrency: null`` and ``request_rate: R``, as a request-rate sweep writes it).  Its throughput is
``BASE * (1 + FAKE_SHIFT) * (1 + FAKE_NOISE * N(0, 1))`` with the normal draw seeded from
``FAKE_SEED`` and the output file name (unique per run), so a whole A/B is reproducible.
Env: ``FAKE_SHIFT`` (default 0), ``FAKE_NOISE`` (default 0.03), ``FAKE_DIGEST`` (the
output digest; default a constant), ``FAKE_FAIL`` (exit 3 with a message on stderr),
``FAKE_SLEEP`` (seconds to sleep first, for Ctrl-C tests), ``FAKE_PIDFILE`` (write the pid).
``--log`` appends ``side-ish env + concurrency`` lines so tests can check the run order.

In-process, :func:`draw_result` gives the same metrics without a subprocess (the
100-trial A/A test needs that to stay fast).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time

BASE_THROUGHPUT = 1000.0
BASE_TPOT_MS = 20.0


def draw_result(rng: random.Random, concurrency: int, shift: float, noise: float) -> dict:
    """One bench result: throughput shifted by ``shift``, latency by its inverse, same noise."""
    z = rng.gauss(0.0, 1.0)
    scale = (1.0 + shift) * (1.0 + noise * z)
    return {
        "max_concurrency": concurrency,
        "completed": 8,
        "duration": 8 * 16 / (BASE_THROUGHPUT * scale),
        "request_throughput": BASE_THROUGHPUT * scale / 16,
        "output_throughput": BASE_THROUGHPUT * scale,
        "median_tpot_ms": BASE_TPOT_MS / scale,
        "mean_ttft_ms": 5.0 * (1.0 + noise * rng.gauss(0.0, 1.0)),
        "p99_itl_ms": BASE_TPOT_MS * 1.5 / scale,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--concurrency", type=int)
    ap.add_argument("--rate", type=float)
    ap.add_argument("--log")
    ap.add_argument("--env-file")
    args = ap.parse_args(argv)
    if os.environ.get("FAKE_PIDFILE"):
        with open(os.environ["FAKE_PIDFILE"], "w") as f:
            f.write(str(os.getpid()))
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    if os.environ.get("FAKE_FAIL"):
        print("fake bench: CUDA out of memory (simulated)", file=sys.stderr)
        return 3
    shift = float(os.environ.get("FAKE_SHIFT", "0"))
    noise = float(os.environ.get("FAKE_NOISE", "0.03"))
    seed_text = f"{os.environ.get('FAKE_SEED', '0')}|{os.path.basename(args.out)}"
    rng = random.Random(int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "little"))
    result = draw_result(rng, args.concurrency, shift, noise)
    if args.rate is not None:
        result["request_rate"] = args.rate
    result["output_digest"] = os.environ.get("FAKE_DIGEST", "sha256:0f0f")
    result["device"] = "cpu"
    if args.log:
        with open(args.log, "a") as f:
            f.write(
                json.dumps(
                    {
                        "shift": shift,
                        "concurrency": args.concurrency,
                        "rate": args.rate,
                        "cwd": os.getcwd(),
                        "env_file": args.env_file,
                    }
                )
                + "\n"
            )
    with open(args.out, "w") as f:
        f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
