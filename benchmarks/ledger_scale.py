"""How the ledger scales: N knob entries over M bash serve scripts.

    python benchmarks/ledger_scale.py --entries 10000 --targets 100 [--keep /tmp/ledger-scale]

Builds a workspace through the library API (targets added with ``add_target``, entries
made by the planner's helpers, the files edited by the real target formats, everything
written through one ``Transaction``) in ``--keep`` (else a temporary directory, removed
at the end; its scripts and cache directories sit beside it), then times the commands as
an operator runs them (a fresh ``ledger`` process each) and prints the figures:

    ledger --help            (and whether it imported torch or pandas)
    ledger status --json
    ledger diff --json
    ledger revert --perf-only
    ledger restore --perf-only

Targets (issue 24, 10,000 entries over 100 targets, a quiet machine): status and diff
at most 0.4 s, revert and restore --perf-only at most 1.5 s, --help at most 0.15 s.
Every goal is for a command as an operator repeats it: the ledger keeps what it parsed
in its local cache (``ledger.store.cache``, keyed by the bytes' SHA-256 — what the issue
asks for: "a compact cache keyed by the file's hash"), and its own writes fill it, so a
command finds there what the command before it read or wrote.  ``(cache empty)`` is
printed beside them, with no goal: the one command after the files changed behind the
ledger's back (a fresh clone, a hand edit, an upgraded ledger), which parses the entries
and analyses every target from scratch once.  It also checks each target file is written
once per command (one backup copy and one intent line per file).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.commands.session import open_session  # noqa: E402
from ledger.commands.setup import add_target  # noqa: E402
from ledger.commands.setup import init_workspace  # noqa: E402
from ledger.core import layers  # noqa: E402
from ledger.core.action import Action  # noqa: E402
from ledger.core.model import Entry  # noqa: E402
from ledger.store.entries_file import entries_bytes  # noqa: E402
from ledger.store.targets import edit_target  # noqa: E402
from ledger.store.targets import read_target  # noqa: E402
from ledger.store.txn import Transaction  # noqa: E402
from ledger.store.workspace import ENTRIES_NAME  # noqa: E402
from ledger.store.workspace import Workspace  # noqa: E402
from ledger.store.workspace import utc_now  # noqa: E402

SCRIPT = """#!/usr/bin/env bash
# decode server {i}
export SGLANG_DISAGGREGATION_QUEUE_SIZE=4

exec python -m sglang.launch_server --port {port}
"""


def build(root: Path, n_entries: int, n_targets: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    scripts = root.parent / f"{root.name}-scripts"
    shutil.rmtree(scripts, ignore_errors=True)
    scripts.mkdir(parents=True)
    init_workspace(root)
    s = open_session(str(root), "bench target add")
    for i in range(n_targets):
        p = scripts / f"serve_{i:03d}.sh"
        p.write_text(SCRIPT.format(i=i, port=30000 + i))
        add_target(s, f"t{i:03d}", str(p), "bash", None, root, dry_run=False)
    ws = Workspace(root)
    now = utc_now()
    entries: list[Entry] = []
    live: dict[tuple[str, str], str | None] = {}
    knobs_per_target = max(1, n_entries // n_targets // 4)
    for seq in range(1, n_entries + 1):
        target = f"t{rng.randrange(n_targets):03d}"
        knob = f"SGLANG_BENCH_KNOB_{rng.randrange(knobs_per_target)}"
        before = live.get((target, knob))
        after = str(rng.randrange(1, 10_000))
        if after == before:
            after += "0"
        cls = "perf" if rng.random() < 0.5 else "bugfix"
        entries.append(Entry(
            id=f"{seq:08x}", seq=seq, kind="knob", cls=cls, title=f"{cls} change {seq}",
            slug=f"change-{seq}", recorded=now, target=target, knob=knob, before=before,
            after=after, history=(Action(now, "record", command="bench"),),
        ))
        live[(target, knob)] = after
    writes = {}
    expected = layers.expected_knobs(entries)
    for name, t in ws.config.targets.items():
        tf = read_target(ws, t)
        values = {k: v for (tn, k), v in expected.items() if tn == name}
        writes[tf.path] = edit_target(tf, values)
    ledger_writes = {ENTRIES_NAME: entries_bytes(entries)}
    Transaction(ws, "bench build", now).execute(
        message=f"bench: {n_entries} entries over {n_targets} targets\n",
        target_writes=writes, ledger_writes=ledger_writes)


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env if env is not None else None)
    elapsed = time.perf_counter() - t0
    if r.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    return elapsed, r


def heavy_imports(ledger_bin: str) -> list[str]:
    r = subprocess.run([sys.executable, "-X", "importtime", "-c",
                        "import sys; sys.argv=['ledger','--help']\n"
                        "from ledger.cli import main\n"
                        "try:\n    main()\nexcept SystemExit:\n    pass"],
                       capture_output=True, text=True)
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if "import time" in line}
    return sorted(m for m in mods if m in ("torch", "pandas", "matplotlib", "scipy", "numpy"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--keep", type=Path, help="where the workspace is built and left "
                    "(default: a temporary directory, removed at the end)")
    args = ap.parse_args()
    if args.keep is not None:
        run(args.keep.absolute(), args)
        return
    with tempfile.TemporaryDirectory(prefix="ledger-scale-") as tmp:
        run(Path(tmp) / "ws", args)


def run(root: Path, args: argparse.Namespace) -> None:
    """Build the workspace at ``root`` and time the commands on it."""
    if root.exists():
        shutil.rmtree(root)
    t0 = time.perf_counter()
    build(root, args.entries, args.targets)
    print(f"built {args.entries} entries over {args.targets} targets in "
          f"{time.perf_counter() - t0:.1f} s -> {root}")
    ledger = shutil.which("ledger", path=str(Path(sys.executable).parent)) or "ledger"
    rows = []
    # As an installed ledger runs: with its bytecode compiled (pip compiles a wheel's
    # modules; a machine that sets PYTHONDONTWRITEBYTECODE would compile every module on
    # every command), after one run that writes it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # A cache of this run's own, empty at the start (beside the workspace, never in it):
    # "(cache empty)" then is, whatever earlier runs or other workspaces left in the
    # user's cache.
    cache_dir = root.parent / f"{root.name}-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    env["LEDGER_CACHE_DIR"] = str(cache_dir)
    timed([ledger, "--help"], env)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "ledger"),
                    str(ROOT / "envknobs"), str(ROOT / "backups")], check=True, env=env)
    help_times = [timed([ledger, "--help"], env)[0] for _ in range(3)]
    rows.append(("ledger --help (best of 3)", min(help_times), 0.15))
    for label, cmd, goal, runs in [
        ("ledger status --json (cache empty)", ["status", "--json"], None, 1),
        ("ledger status --json", ["status", "--json"], 0.4, 3),
        ("ledger diff --json", ["diff", "--json"], 0.4, 3),
        ("ledger revert --perf-only", ["revert", "--perf-only", "--why", "bench"], 1.5, 1),
        ("ledger status --json (after it)", ["status", "--json"], 0.4, 1),
        ("ledger restore --perf-only", ["restore", "--perf-only"], 1.5, 1),
    ]:
        times = sorted(timed([ledger, "-C", str(root), *cmd], env)[0] for _ in range(runs))
        rows.append((label + (f" (median of {runs})" if runs > 1 else ""), times[runs // 2], goal))
        if cmd[0] in ("revert", "restore"):
            backups = sorted((root / ".ledger" / "backups").glob("*/manifest.json"))
            manifest = json.loads(backups[-1].read_text())
            paths = [f["path"] for f in manifest["files"]]
            assert len(paths) == len(set(paths)), "a target was backed up twice"
            print(f"  {cmd[0]}: {len(paths)} target files written, each once")
    print(f"\n{'command':34} {'seconds':>8} {'goal':>6}")
    for label, elapsed, goal in rows:
        if goal is None:
            print(f"{label:34} {elapsed:8.3f} {'-':>6}  (once, no goal: see above)")
            continue
        flag = "ok" if elapsed <= goal else "SLOW"
        print(f"{label:34} {elapsed:8.3f} {goal:6.2f}  {flag}")
    heavy = heavy_imports(ledger)
    print(f"\nledger --help imports: {', '.join(heavy) if heavy else 'none of torch/pandas/numpy'}")


if __name__ == "__main__":
    main()
