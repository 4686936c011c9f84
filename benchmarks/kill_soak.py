"""The long crash-safety run: random-instant SIGKILLs of mixed real commands.

    python benchmarks/kill_soak.py [--kills 80] [--seed 7]

Each kill is followed by the next command (which recovers) and the checks of
``tests/store/killkit.py``: every file old or new, no drift, clean `git status` in the
workspace and the engine repo, no stale git lock, no temporary file, and the command
succeeding when run again.  CI runs 20 kills (tests/store/test_kills.py); this runs as
many as asked (the same as ``pytest -m soak tests/store/test_kills.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.store.killkit import make_rig  # noqa: E402
from tests.store.killkit import random_kills  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=80)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="kill-soak-") as tmp:
        rig = make_rig(Path(tmp))
        start = time.monotonic()
        counts = random_kills(rig, args.kills, seed=args.seed)
        took = time.monotonic() - start
    print(f"{args.kills} kills in {took:.0f}s: {counts['back']} rolled back, "
          f"{counts['forward']} rolled forward, {counts['done']} finished first; all checks held")


if __name__ == "__main__":
    main()
