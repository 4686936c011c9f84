"""How fast `ledger check` is on a big deploy repo where one file changed.

    python benchmarks/check_scale.py [--targets 100] [--entries 1000] [--repeat 5]

Builds a deploy repository (ledger.yaml at its top, ``--targets`` bash serve scripts
under ``scripts/``, ``--entries`` knob entries over them, the scripts holding what the
entries say) on branch ``main``; then, on branch ``feature``, one entry is added and its
one script changed accordingly (a ledgered change: the check passes).  It times
``ledger check --base main`` as an operator runs it (a fresh process each time, median of
``--repeat``), with the parse cache empty and warm, and ``run_check`` in-process; and it
counts the blobs the check read (the goal, issue 48: it reads only what changed — two
versions of ledger.yaml, of entries.jsonl and of the one script — in at most 1 s).

Figures depend on the machine; on a shared, loaded one they swing: say so with them.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.core import layers  # noqa: E402
from ledger.core.action import Action  # noqa: E402
from ledger.core.managed_file import Target  # noqa: E402
from ledger.core.model import Entry  # noqa: E402
from ledger.store.config_file import Config  # noqa: E402
from ledger.store.config_file import dump_config  # noqa: E402
from ledger.store.entries_file import entries_bytes  # noqa: E402

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}
NOW = "2026-12-01T00:00:00Z"


def git(repo: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | GIT_ENV
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def script(i: int, values: dict[str, str]) -> str:
    exports = "".join(f"export {k}={v}\n" for k, v in sorted(values.items()))
    return (f"#!/usr/bin/env bash\n# decode server {i}\n{exports}\n"
            f"exec python -m sglang.launch_server --port {30000 + i}\n")


def entry(seq: int, target: str, knob: str, before: str | None, after: str) -> Entry:
    return Entry(id=f"{seq:08x}", seq=seq, kind="knob", cls="bugfix", title=f"change {seq}",
                 slug=f"change-{seq}", recorded=NOW, target=target, knob=knob, before=before,
                 after=after, history=(Action(NOW, "record", command="bench"),))


def write_state(root: Path, entries: list[Entry], n_targets: int) -> None:
    expected = layers.expected_knobs(entries)
    for i in range(n_targets):
        name = f"t{i:03d}"
        values = {k: v for (t, k), v in expected.items() if t == name and v is not None}
        (root / "scripts" / f"serve_{i:03d}.sh").write_text(script(i, values))
    (root / "entries.jsonl").write_bytes(entries_bytes(entries))


def build(root: Path, n_targets: int, n_entries: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    (root / "scripts").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    targets = {f"t{i:03d}": Target(f"t{i:03d}", f"scripts/serve_{i:03d}.sh", "bash")
               for i in range(n_targets)}
    (root / "ledger.yaml").write_text(dump_config(Config(targets=targets)))
    live: dict[tuple[str, str], str] = {}
    entries = []
    for seq in range(1, n_entries + 1):
        target = f"t{rng.randrange(n_targets):03d}"
        knob = f"SGLANG_BENCH_KNOB_{rng.randrange(4)}"
        after = str(rng.randrange(1, 10_000))
        entries.append(entry(seq, target, knob, live.get((target, knob)), after))
        live[(target, knob)] = after
    write_state(root, entries, n_targets)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"bench: {n_entries} entries over {n_targets} targets")
    git(root, "checkout", "-q", "-b", "feature")
    new = entry(n_entries + 1, "t007", "SGLANG_BENCH_KNOB_9", None, "42")
    write_state(root, entries + [new], n_targets)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one ledgered change")


def timed_check(root: Path, env: dict[str, str], *args: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ledger.cli", *(args or ("-C", str(root), "check",
                        "--base", "main"))], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"ledger check failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return elapsed


def blobs_read(root: Path) -> int:
    """How many blobs run_check asks git for (counted at the one place it reads them)."""
    from ledger.commands import check

    count = 0
    real = check.read_blobs

    def counting(repo, shas):
        nonlocal count
        count += len(set(shas))
        return real(repo, shas)

    check.read_blobs = counting
    try:
        t0 = time.perf_counter()
        report = check.run_check(root, "main", "HEAD")
        elapsed = time.perf_counter() - t0
    finally:
        check.read_blobs = real
    assert not report.failed(), [f.message for f in report.findings]
    print(f"run_check in-process (cache empty): {elapsed:.3f} s, {count} blobs read, "
          f"{len(report.changes)} change(s), {len(report.entries)} entry in the range")
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="check-scale-") as tmp:
        root = Path(tmp) / "deploy"
        t0 = time.perf_counter()
        build(root, args.targets, args.entries)
        print(f"built {args.targets} targets, {args.entries} entries in "
              f"{time.perf_counter() - t0:.1f} s; one script changed on branch feature")
        cache = Path(tmp) / "cache"
        # as an installed package runs: its modules compiled once (a PYTHONDONTWRITEBYTECODE
        # in the environment would compile ~150 modules from source in every process)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GIT_") and k != "PYTHONDONTWRITEBYTECODE"}
        cold = []
        for i in range(args.repeat):
            env["LEDGER_CACHE_DIR"] = str(cache / f"cold-{i}")  # empty each time
            cold.append(timed_check(root, env))
        env["LEDGER_CACHE_DIR"] = str(cache / "warm")
        timed_check(root, env)
        warm = [timed_check(root, env) for _ in range(args.repeat)]
        floor = [timed_check(root, env, "--help") for _ in range(args.repeat)]
        os.environ["LEDGER_CACHE_DIR"] = str(cache / "inproc")
        read = blobs_read(root)
        print(f"ledger check --base main (fresh process, cache empty): median "
              f"{statistics.median(cold):.3f} s of {args.repeat}")
        print(f"ledger check --base main (fresh process, cache warm):  median "
              f"{statistics.median(warm):.3f} s of {args.repeat}   goal <= 1 s")
        print(f"ledger --help (the interpreter and CLI start, the floor): median "
              f"{statistics.median(floor):.3f} s of {args.repeat}")
        print(f"blobs read: {read} (ledger.yaml, entries.jsonl and the changed script, each "
              "at base and head; a blob the same at both is read once)")
        print("machine: figures from whatever machine this ran on; a shared one swings")


if __name__ == "__main__":
    main()
