"""An import's run: ``evidence add`` joins bench result files to the entry's evidence.

Imports accumulate: ``evidence add`` for side A and then for side B should make one
A/B comparison, so an import extends the entry's latest import run.  Directories are
never rewritten in place: the merged run gets a new run id, its meta says which run it
``supersedes``, and the old directory is removed afterwards.  If a crash hits between
the two, readers skip the superseded run, so the ledger still shows one.  The run is
written, judged and read back by :mod:`ledger.evidence.store`.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from datetime import timezone
from pathlib import Path
from typing import Any
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.errors import EvidenceError
from ledger.evidence.load import LoadPoint
from ledger.evidence.load import of_row
from ledger.evidence.runs_csv import RUN_TIME
from ledger.evidence.store import SUMMARY_YAML
from ledger.evidence.store import evidence_dir
from ledger.evidence.store import host_info
from ledger.evidence.store import load_run
from ledger.evidence.store import load_yaml
from ledger.evidence.store import new_run_id
from ledger.evidence.store import now_iso
from ledger.evidence.store import run_dirs
from ledger.evidence.store import save_evidence


def _latest_import(ws_root: Path, entry_id: str) -> str | None:
    """The entry's latest run made by ``evidence add`` (the one new results join)."""
    for d in reversed(run_dirs(ws_root, entry_id)):
        if load_yaml(d / SUMMARY_YAML).get("source") == "import":
            return d.name
    return None


def _join_rows(rows: list[dict[str, Any]], imported: list[dict[str, Any]], parsed,
               side: str) -> None:
    """Append the parsed files' rows to ``rows`` (each load point's repeats counting on
    from the run's own) and each file to ``imported``."""
    next_repeat: dict[tuple[str, LoadPoint], int] = {}
    for r in rows:
        key = (r["side"], of_row(r))
        next_repeat[key] = max(next_repeat.get(key, 0), r["repeat"] + 1)
    for path, result in parsed:
        when = _run_time(result.origin) if len(result.rows) == 1 else None
        for r in result.rows:
            key = (side, of_row(r))
            rows.append({"side": side, "repeat": next_repeat.get(key, 0), **r,
                         **({RUN_TIME: when} if when is not None else {})})
            next_repeat[key] = next_repeat.get(key, 0) + 1
        imported.append({"path": str(path.resolve()), "shape": result.shape, "side": side,
                         "rows": len(result.rows), **_origin_meta(result.origin)})


def _run_time(origin: Mapping[str, Any]) -> float | None:
    """Seconds since the epoch of a result's ``date`` (vLLM's ``20250101-120000``, or ISO
    8601; naive times are taken as UTC), None when it has none.  Only a file holding one
    run gets it: the date of a file of many runs says when the first ran, not each."""
    date = origin.get("date")
    if not isinstance(date, str):
        return None
    for fmt in ("%Y%m%d-%H%M%S", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            parsed = datetime.strptime(date.replace("Z", "+0000"), fmt)
        except ValueError:
            continue
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    return None


def _origin_meta(origin: Mapping[str, Any]) -> dict[str, Any]:
    return {"origin": dict(origin)} if origin else {}


def _refuse_mixed_load(rows: list[dict[str, Any]], parsed) -> None:
    """A rate sweep and a concurrency sweep never share a run."""
    kinds = {of_row(r).kind for r in rows}
    kinds |= {of_row(r).kind for _, result in parsed for r in result.rows}
    if len(kinds) > 1:
        raise EvidenceError(
            "these results are measured at "
            + " and ".join(sorted(kinds))
            + " load points (with the entry's latest import): a rate sweep and a "
            "concurrency sweep are separate evidence; import them separately"
        )


def _rate_sweep_cap(rows: Sequence[Mapping[str, Any]], keys: Mapping[str, Any],
                    side: str) -> int | None:
    """The --max-concurrency cap of the rate sweep new results join (None if none)."""
    if not rows or of_row(rows[0]).kind != "rate":
        return None
    caps = {k.get("max_concurrency") for k in keys.values() if isinstance(k, Mapping)}
    caps.discard(None)
    return caps.pop() if len(caps) == 1 else None


def _run_joined(ws_root: Path, entry_id: str, previous: str | None, started: str):
    """What an import joins: the previous import run's rows, files, meta and start time
    (nothing, and ``started``, when it starts a new run)."""
    if not previous:
        return [], [], {}, started
    rows, old_meta, old_summary = load_run(ws_root, entry_id, previous)
    return (rows, list(old_meta.get("files") or []), old_meta,
            str(old_summary.get("started") or started))


def _parsed_files(files: list[Path], rows: list[dict[str, Any]], side: str,
                  old_meta: Mapping[str, Any], allow: Sequence[str], *,
                  concurrency: int | None, rate: float | None,
                  select: Mapping[str, str] | None) -> list:
    """``(path, parsed result)`` of every file, all read before anything is written; a
    rate sweep joins only the cap of the run it extends, and never a concurrency sweep."""
    from ledger.evidence.importers import read_result_files

    cap = _rate_sweep_cap(rows, old_meta.get("workload") or {}, side)
    parsed = list(zip(files, read_result_files(files, concurrency, rate, select=select,
                                               rate_cap=cap, allow=allow), strict=True))
    _refuse_mixed_load(rows, parsed)
    return parsed


def _checked_input(files: Iterable[Path], side: str) -> list[Path]:
    """The files to import, refused when there are none or the side is not A or B."""
    if side not in ("A", "B"):
        raise EvidenceError(f"side must be A or B, got {side!r}")
    paths = [Path(f) for f in files]
    if not paths:
        raise EvidenceError("no result files to import")
    return paths


def import_evidence(
    ws_root: Path,
    entry_id: str,
    files: Iterable[Path],
    side: str,
    *,
    concurrency: int | None = None,
    metric: str = "output_throughput",
    engine_commit: str | None = None,
    context: Mapping[str, str | None] | None = None,
    new_run: bool = False,
    now: datetime | None = None,
    rate: float | None = None,
    select: Mapping[str, str] | None = None,
    allow_mismatch: Sequence[str] = (),
    judging: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Import bench result files for one side; return the summary of the run written.

    Every file is parsed before anything is written: one bad file stores nothing.
    Unless ``new_run``, the rows join the entry's latest import run (see module docs);
    a rate sweep does not join a concurrency sweep (nor the reverse).
    ``concurrency`` / ``rate``: the load point of results that do not say it.
    ``select``: ``--workload KEY=VALUE`` pairs picking one workload of a file holding
    several.  The files of a side must measure one workload, and A and B the same one,
    but for the fields in ``allow_mismatch`` (see :mod:`ledger.evidence.workload`; an
    allowed ``input_len`` / ``output_len`` also joins results whose lengths, estimated
    from their token counts, differ within a file or a side).  ``judging``: the
    tolerance and guards of :func:`ledger.evidence.stats.analyze`; a file of one run
    that says when it ran gives its rows a ``run_time``, so A and B imported in
    alternating order are judged as pairs (see :func:`_run_time`).
    """
    from ledger.evidence.workload import check_allow
    from ledger.evidence.workload import check_sides
    from ledger.evidence.workload import side_workloads

    files = _checked_input(files, side)
    allow = check_allow(allow_mismatch)
    previous = None if new_run else _latest_import(ws_root, entry_id)
    rows, imported, old_meta, started = _run_joined(ws_root, entry_id, previous, now_iso(now))
    allow = sorted(set(allow) | set(old_meta.get("allowed_mismatch") or []))
    parsed = _parsed_files(files, rows, side, old_meta, allow,
                           concurrency=concurrency, rate=rate, select=select)
    keys = side_workloads(parsed, side, old_meta.get("workload") or {}, allow)
    workload = check_sides(keys, allow)
    _join_rows(rows, imported, parsed, side)
    meta = {"files": imported, "supersedes": previous, "workload": keys,
            **({"allowed_mismatch": allow} if allow else {}), "importer": host_info()}
    summary = save_evidence(
        ws_root, entry_id, rows, meta, source="import", metric=metric,
        engine_commit=engine_commit, context=context, started=started,
        finished=now_iso(now), run_id=new_run_id(now), workload=workload, judging=judging,
    )
    if previous:
        # The merged run is safely in place; readers already skip the old one.
        shutil.rmtree(evidence_dir(ws_root, entry_id) / previous, ignore_errors=True)
    return summary
