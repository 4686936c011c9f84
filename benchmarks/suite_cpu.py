"""Where the test suite's CPU goes, per module: a pytest plugin and its summary.

The suite is CPU-bound on the 2-core CI machines (``vmstat`` shows no idle time through a
run), so its wall time follows the CPU it spends; this says which modules spend it.

    SUITE_CPU_OUT=/tmp/suite-cpu.jsonl .venv/bin/python -m pytest -q -p benchmarks.suite_cpu
    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite-cpu.jsonl [--top 25]

Each test appends one JSON line: its node id, the CPU seconds of its worker process
(``self``) and of the children that process reaped meanwhile (``children``: git, the
ledger's and the engine's subprocesses), and its wall seconds.  Blind spot: a process
that nobody reaps -- a server started detached (``engine service start``, which the demo,
the live tests and the Prometheus module use), Prometheus itself -- is counted nowhere;
the gap between ``time``'s user + sys and 2 x the wall time of a fully busy run is theirs
(measured 2026-12-07: some 300 s of a 10-minute run, most of it the Prometheus module's
engine serving a closed loop for its ~5 minutes).

Measured 2026-12-07 (warm tree, ``-n 4``; seconds of CPU, self + children): the engine's
upgrade story 103, the engine bisects 97, the demo 90 (when it played twice), the kernels
72 (two variants rebuilt), tests/cli/test_exact_property.py 42, then nothing above 20.

Then (the same tree, a later session): 845 s in the tests, 10m56s of wall, the Prometheus
module 397 s of wall, started ~6 min in by xdist's ranking and alone for its last minutes.
With the slow modules first (``--no-loadscope-reorder``) and the Prometheus module's
windows at 24 s: 763 s in the tests, 8m12s of wall, the engine bisects 82, the demo 78,
tests/cli/test_exact_property.py 37, the Prometheus module 205 s of wall.  A clean clone
through ``CI=true bash -c 'time bash .ci/run'`` with the kernels' build cache moved aside
(as on a fresh machine), with the upgrade story's gate at 64 prompts of 32 tokens: pytest
8m48s, 10m02s with the installs.  That gate saved 47 s of CPU but read a cured deployment
at 0.56 of itself on the next clean clone, and is not used (its module's docstring).

Then (a later session, 2 cores): 826 s in the tests with the kernels' three variants
rebuilt, 9m10s of wall.  Four cuts, none of them coverage: YAML composed once per text
(a manifest's summary composed it ~20 times: tests/cli/test_exact_property.py 43 -> 4 s),
the router's start-up without torch (~1.1 s a PD launch), the kernels' build without
<ATen/ATen.h> (a variant 21 -> 16.6 s of g++), and the project's bytecode compiled once
before the workers start (PYTHONDONTWRITEBYTECODE, set on these machines, had every
process compile the project from source).  Warm tree, kernels rebuilt: 709 s in the tests,
8m06s of wall.  Clean clones through ``.ci/run``: pytest 8m47s / 10m11s in all before the
bytecode, 8m21s / 9m44s after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict

_started: dict[str, tuple[float, float, float]] = {}


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime


def pytest_runtest_setup(item) -> None:
    _started[item.nodeid] = (*_cpu(), time.monotonic())


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    if nodeid not in _started:
        return
    own0, reaped0, t0 = _started.pop(nodeid)
    own1, reaped1 = _cpu()
    line = {"id": nodeid, "self": own1 - own0, "children": reaped1 - reaped0,
            "wall": time.monotonic() - t0}
    with open(os.environ.get("SUITE_CPU_OUT", "suite-cpu.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def summary(lines: list[dict], top: int) -> list[str]:
    """One row a module, the most CPU first: CPU (self + children), wall, tests."""
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for line in lines:
        row = by[line["id"].partition("::")[0]]
        row[0] += line["self"]
        row[1] += line["children"]
        row[2] += line["wall"]
        row[3] += 1
    total = sum(r[0] + r[1] for r in by.values())
    rows = [f"{total:8.1f} s CPU in {len(lines)} tests (detached servers not counted)"]
    for module, (own, reaped, wall, n) in sorted(by.items(), key=lambda kv: -sum(kv[1][:2])):
        rows.append(f"{own + reaped:8.1f}  self {own:6.1f}  children {reaped:6.1f}  "
                    f"wall {wall:6.1f}  tests {n:4d}  {module}")
    return rows[:top + 1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl", help="the file SUITE_CPU_OUT named")
    ap.add_argument("--top", type=int, default=25, help="modules to show (default 25)")
    args = ap.parse_args(argv)
    with open(args.jsonl, encoding="utf-8") as f:
        lines = [json.loads(x) for x in f if x.strip()]
    print("\n".join(summary(lines, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
