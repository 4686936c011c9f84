"""What `ledger bisect` costs: check runs per search, and the ledger's own time per step.

    python benchmarks/bisect_cost.py [--sizes 8,32,128] [--overhead-at 1000] [--quick]

Check runs are counted with the real search (``ledger.core.bisect``) against synthetic
oracles — one culprit (every position for n <= 32, a spread of positions beyond), a
culprit pair (every pair for n <= 16, a spread beyond), none (the failure is outside).

The ledger's overhead per step is measured end to end on a real workspace: real
transactions (backup, intent, atomic writes, a git commit per toggle) on dotenv targets
of 100 knobs each, with a real check process (a small python script reading the
files).  Overhead = the time from "next probe" to "check may start" (``ledger_seconds``
in the record), i.e. without the check itself.  The workspace is built directly (entries
written with the ledger's own serializer) because recording 1,000 entries one command
at a time would dominate the benchmark; the bisect itself goes through the CLI library
exactly as `ledger bisect` does.

Goals (issue 14): one culprit among 32 in <= 7 checks, a pair in <= 16, "not in these
entries" in 2; overhead <= 0.3 s per step at 1,000 entries.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from pathlib import Path

from ledger.core.bisect import solve

PER_TARGET = 100


def ids(n: int) -> list[str]:
    return [f"{i:08x}" for i in range(1, n + 1)]


def oracle(family):
    family = [frozenset(s) for s in family]
    return lambda applied: any(s <= applied for s in family)


def spread(items, k: int):
    items = list(items)
    if len(items) <= k:
        return items
    step = len(items) / k
    return [items[int(i * step)] for i in range(k)]


def check_counts(n: int, quick: bool) -> dict[str, tuple[int, float, int]]:
    """(min, mean, max) check runs for one culprit, a pair, and none."""
    u = ids(n)
    singles = u if n <= 32 and not quick else spread(u, 16)
    pairs = list(itertools.combinations(u, 2))
    pairs = pairs if n <= 16 and not quick else spread(pairs, 64)
    out = {}
    for name, families in (("one culprit", [[{c}] for c in singles]),
                           ("culprit pair", [[set(p)] for p in pairs]),
                           ("none", [[set()]])):
        counts = [len(solve(u, oracle(f))[1]) for f in families]
        out[name] = (min(counts), statistics.mean(counts), max(counts))
    return out


CHECK = """\
import sys
vals = {}
for path in sys.argv[2:]:
    for line in open(path):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            vals[k] = v
need = [k for k in sys.argv[1].split(",") if k]
sys.exit(1 if need and all(vals.get(k) == "1" for k in need) or sys.argv[1] == "ALWAYS" else 0)
"""


def build_workspace(root: Path, n: int, per_target: int = PER_TARGET
                    ) -> tuple[Path, list[Path], list[str]]:
    """A workspace with ``n`` applied perf knob entries over dotenv targets."""
    from ledger.commands.setup import init_workspace
    from ledger.core.managed_file import Target
    from ledger.core.model import Entry
    from ledger.store import wsgit
    from ledger.store.config_file import dump_config
    from ledger.store.entries_file import entries_bytes
    from ledger.store.workspace import Workspace

    ws_root = root / "ws"
    init_workspace(ws_root, None)
    files, entries, knobs = [], [], []
    for t in range((n + per_target - 1) // per_target):
        names = [f"BISECT_K{i:04d}" for i in range(t * per_target, min(n, (t + 1) * per_target))]
        path = root / f"app{t}.env"
        path.write_text("# generated\n" + "".join(f"{k}=1\n" for k in names))
        files.append(path)
        for k in names:
            i = len(entries) + 1
            entries.append(Entry(id=f"{i:08x}", seq=i, kind="knob", cls="perf", title=f"set {k}",
                                 slug=f"set-{k.lower()}", recorded="2026-01-01T00:00:00Z",
                                 target=f"app{t}", knob=k, before=None, after="1"))
            knobs.append(k)
    ws = Workspace(ws_root)
    for t, p in enumerate(files):
        ws.config.targets[f"app{t}"] = Target(f"app{t}", str(p), "dotenv")
    (ws_root / "ledger.yaml").write_text(dump_config(ws.config))
    (ws_root / "entries.jsonl").write_bytes(entries_bytes(entries))
    wsgit.commit(ws_root, ["ledger.yaml", "entries.jsonl"], f"{n} entries\n")
    return ws_root, files, knobs


def overhead(n: int, scenario: str, tmp: Path, per_target: int) -> tuple[int, list[float]]:
    """Run a real bisect; return (checks, ledger seconds per step)."""
    from ledger.commands import bisect as ops
    from ledger.commands.session import open_session

    root = tmp / f"n{n}-{scenario.replace(' ', '-')}"
    root.mkdir()
    ws_root, files, knobs = build_workspace(root, n, per_target)
    need = {"one culprit": knobs[n * 2 // 3], "culprit pair": f"{knobs[n // 5]},{knobs[n - 2]}",
            "none": "ALWAYS"}[scenario]
    script = root / "check.py"
    script.write_text(CHECK)
    check = " ".join([sys.executable, str(script), need, *map(str, files)])
    start_bytes = [f.read_bytes() for f in files]
    s = open_session(str(ws_root), f"bisect --all-applied --check {check}")
    result = ops.bisect(s, ops.Options(check=check, all_applied=True), root)
    steps = result.record["steps"]
    assert [f.read_bytes() for f in files] == start_bytes, "the workspace did not end at its start"
    return len(steps), [st["ledger_seconds"] for st in steps]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,32,128")
    ap.add_argument("--overhead-at", default="1000", help="sizes for the end-to-end runs")
    ap.add_argument("--quick", action="store_true", help="fewer positions; one scenario at scale")
    ap.add_argument("--per-target", type=int, default=PER_TARGET,
                    help="knobs per dotenv target file")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print("check runs (min / mean / max over positions)")
    print(f"{'N':>6}  {'scenario':<13} {'min':>4} {'mean':>6} {'max':>4}")
    for n in sizes:
        for name, (lo, mean, hi) in check_counts(n, args.quick).items():
            print(f"{n:>6}  {name:<13} {lo:>4} {mean:>6.2f} {hi:>4}")
    print(f"\nledger overhead per step (real workspace, real check process, "
          f"{args.per_target} knobs per target file)")
    print(f"{'N':>6}  {'scenario':<13} {'checks':>6} {'median s':>9} {'max s':>7}")
    big = [int(x) for x in args.overhead_at.split(",") if x]
    with tempfile.TemporaryDirectory() as d:
        for n in sorted(set(sizes + big)):
            scenarios = ["one culprit"] if args.quick and n not in big else \
                ["one culprit", "culprit pair", "none"]
            for scenario in scenarios:
                checks, secs = overhead(n, scenario, Path(d), args.per_target)
                toggles = [x for x in secs if x > 0.001] or [0.0]
                print(f"{n:>6}  {scenario:<13} {checks:>6} {statistics.median(toggles):>9.3f} "
                      f"{max(toggles):>7.3f}")


if __name__ == "__main__":
    main()
