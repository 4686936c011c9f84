"""What one bench run of an A/B measured: its result file read into a row at the run's load
point, and the check that a side's runs all measured one workload.

The result is the bundled engine's bench JSON, sglang ``bench_serving --output-file``
JSONL, vLLM ``--save-result`` JSON or an AIPerf export (:mod:`ledger.evidence.importers`
knows the shapes); :mod:`ledger.evidence.runner` calls this after every run.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ledger.errors import EvidenceError
from ledger.evidence.importers import ImportFormatError
from ledger.evidence.importers import located_file
from ledger.evidence.importers import parse_results
from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import RATE
from ledger.evidence.load import LoadPoint
from ledger.evidence.load import of_row


def read_result(
    out: Path, point: LoadPoint, argv: list[str]
) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
    """The metrics row for ``point`` from a run's JSON, the device it reports (if any),
    and its workload key."""
    if not out.exists():
        raise EvidenceError(f"bench wrote no result to {out}: {shlex.join(argv)}")
    where = f"bench output of {shlex.join(argv)}"
    try:
        # A file (JSON, JSON lines, AIPerf CSV) or an AIPerf artifact directory.
        located = [(here.replace(str(out), where, 1), obj) for here, obj in located_file(out)]
        objs = [obj for _, obj in located]
        # Any known shape: the bundled engine's, sglang bench_serving's or vLLM's.  A
        # single result that does not say its load point ran at the one we asked for.
        says = [k for k in ("max_concurrency", "request_rate") if objs[0].get(k) is not None]
        single = len(objs) == 1 and (
            not says if point.kind == RATE else "max_concurrency" not in says
        )
        parsed = parse_results(
            located, where,
            int(point.value) if single and point.kind == CONCURRENCY else None,
            rate=point.value if single and point.kind == RATE else None,
        )
    except ImportFormatError as e:
        raise EvidenceError(str(e)) from e
    matching = [(r, o) for r, o in zip(parsed.rows, objs, strict=True) if of_row(r) == point]
    if len(matching) != 1:
        raise EvidenceError(
            f"bench output has {len(matching)} result(s) for {point.kind} "
            f"{point.label.removeprefix('c').removeprefix('rate ')} "
            f"(expected one): {shlex.join(argv)}"
        )
    row, obj = dict(matching[0][0]), matching[0][1]
    row.pop(CONCURRENCY, None)
    row.pop(RATE, None)
    device = obj.get("device")
    return row, (str(device) if device is not None else None), parsed.workload


def same_workload(keys: dict[str, dict[str, Any]], side: str, key: dict[str, Any],
                   label: str) -> None:
    """The runs of one side are repeats: each must measure the side's one workload.  Their
    estimated lengths are not compared: one side runs one command, so its runs asked for
    one workload, and the tokens the engine generated are a result (a difference between
    A and B shows as the summary's warning)."""
    from ledger.evidence.workload import compare_sides
    from ledger.evidence.workload import mismatch_text

    if side not in keys:
        keys[side] = key
        return
    diff = compare_sides(keys[side], key, estimates=False)
    if diff:
        raise EvidenceError(f"{label}: the bench measured another workload than the side's "
                            f"earlier runs: {mismatch_text(diff, ('before', 'now'))}")


__all__ = ["read_result", "same_workload"]
