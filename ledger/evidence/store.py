"""The evidence store: ``<workspace>/evidence/<entry-id>/<run-id>/`` on disk.

Each run directory holds

* ``runs.csv`` - one row per side x load point x repeat: ``side,concurrency,repeat``
  (``side,rate,repeat`` for a request-rate sweep),
  then every metric column (sorted), then ``output_digest``;
* ``meta.yaml`` - how the numbers were produced (command, env values that differ between
  sides, engine commit, host, Python/torch/device, times, imported files);
* ``summary.yaml`` - the judged result (schema in :mod:`ledger.evidence.summary`).

A run directory is written whole into a hidden temp directory beside it, fsynced, and
renamed into place: a reader (or a crash, or Ctrl-C) sees the complete run or none.
Hidden ``.tmp-*`` directories are never read; leftovers of a killed writer are swept
after an hour (the core's workspace lock makes us the only writer, the hour is a margin).

Directories are never rewritten in place: an import that extends a run
(:mod:`ledger.evidence.import_run`) writes a new one whose meta says which run it
``supersedes``; readers skip a superseded run.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
import time
from datetime import datetime
from datetime import timezone
from pathlib import Path
from typing import Any
from typing import Mapping
from typing import Sequence

from ledger.core.identifiers import NAME_RE as ENTRY_ID_RE
from ledger.errors import EvidenceError
from ledger.evidence.runs_csv import parse_runs_csv
from ledger.evidence.runs_csv import runs_csv_text
from ledger.evidence.summary import build_summary
from ledger.evidence.summary import headline
from ledger.evidence.summary import is_stale

EVIDENCE_DIR = "evidence"
RUNS_CSV = "runs.csv"
META_YAML = "meta.yaml"
SUMMARY_YAML = "summary.yaml"
STALE_TEMP_S = 3600
RUN_ID_RE = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4,}\Z")


def _yaml() -> Any:
    from ruamel.yaml import YAML

    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.sort_base_mapping_type_on_output = False  # keep the schema's key order
    y.width = 4096  # long headlines and commands on one line: stable diffs
    return y


def dump_yaml(data: Mapping[str, Any]) -> str:
    """Deterministic YAML text for ``data`` (key order as given)."""
    buf = io.StringIO()
    _yaml().dump(dict(data), buf)
    return buf.getvalue()


def now_iso(now: datetime | None = None) -> str:
    """UTC time as ``2026-12-02T16:01:02Z``."""
    return (
        (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def new_run_id(now: datetime | None = None) -> str:
    """A sortable run id: ``20261202T160102Z-3fa1`` (UTC time + random suffix)."""
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


def evidence_dir(ws_root: Path, entry_id: str) -> Path:
    """``<ws_root>/evidence/<entry_id>``; the id must be a plain path component."""
    if not isinstance(entry_id, str) or not ENTRY_ID_RE.match(entry_id):
        raise EvidenceError(f"invalid entry id {entry_id!r} for the evidence store")
    return Path(ws_root) / EVIDENCE_DIR / entry_id


# ---------------------------------------------------------------- atomic write


def write_file(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sweep_stale_temps(parent: Path) -> None:
    cutoff = time.time() - STALE_TEMP_S
    for p in parent.glob(".tmp-*"):
        try:
            if p.is_dir() and p.stat().st_mtime < cutoff:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass  # another process removed it: fine


def write_run(
    ws_root: Path,
    entry_id: str,
    run_id: str,
    rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    summary: Mapping[str, Any],
) -> Path:
    """Write one run directory atomically and return its path."""
    if not RUN_ID_RE.match(run_id):
        raise EvidenceError(f"invalid run id {run_id!r}")
    parent = evidence_dir(ws_root, entry_id)
    final = parent / run_id
    tmp: Path | None = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            raise EvidenceError(f"{final} already exists: refusing to overwrite evidence")
        _sweep_stale_temps(parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{run_id}-", dir=parent))
        os.chmod(tmp, 0o755)
        write_file(tmp / RUNS_CSV, runs_csv_text(rows))
        write_file(tmp / META_YAML, dump_yaml(meta))
        write_file(tmp / SUMMARY_YAML, dump_yaml(summary))
        _fsync_dir(tmp)
        os.rename(tmp, final)  # fails rather than merge if `final` appeared meanwhile
        tmp = None
        _fsync_dir(parent)
    except OSError as e:
        raise EvidenceError(f"cannot write evidence run {final}: {e.strerror or e}") from e
    finally:
        if tmp is not None:  # any failure, KeyboardInterrupt included: leave nothing half-written
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# ---------------------------------------------------------------- reading


def load_yaml(path: Path) -> dict[str, Any]:
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml().load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as e:
        raise EvidenceError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise EvidenceError(f"{path}: expected a mapping")
    return data


def run_dirs(ws_root: Path, entry_id: str) -> list[Path]:
    """Complete, non-superseded run directories of an entry, oldest first."""
    parent = evidence_dir(ws_root, entry_id)
    if not parent.is_dir():
        return []
    dirs = sorted(
        p
        for p in parent.iterdir()
        if p.is_dir() and RUN_ID_RE.match(p.name) and (p / SUMMARY_YAML).is_file()
    )
    superseded = set()
    for d in dirs:
        if (d / META_YAML).is_file():
            sup = load_yaml(d / META_YAML).get("supersedes")
            if sup:
                superseded.add(str(sup))
    return [d for d in dirs if d.name not in superseded]


def load_summaries(ws_root: Path, entry_id: str) -> list[dict[str, Any]]:
    """Every summary of an entry, oldest first (empty when it has no evidence)."""
    return [load_yaml(d / SUMMARY_YAML) for d in run_dirs(ws_root, entry_id)]


def latest_summary(ws_root: Path, entry_id: str) -> dict[str, Any] | None:
    """The newest summary of an entry, or None."""
    dirs = run_dirs(ws_root, entry_id)
    return load_yaml(dirs[-1] / SUMMARY_YAML) if dirs else None


def load_run(ws_root: Path, entry_id: str, run_id: str) -> tuple[list[dict[str, Any]], dict, dict]:
    """``(rows, meta, summary)`` of one run."""
    if not RUN_ID_RE.match(run_id):
        raise EvidenceError(f"invalid run id {run_id!r}")
    d = evidence_dir(ws_root, entry_id) / run_id
    if not (d / SUMMARY_YAML).is_file():
        raise EvidenceError(f"entry {entry_id} has no evidence run {run_id}")
    try:
        text = (d / RUNS_CSV).read_text(encoding="utf-8")
    except OSError as e:
        raise EvidenceError(f"cannot read {d / RUNS_CSV}: {e.strerror or e}") from e
    return (
        parse_runs_csv(text, str(d / RUNS_CSV)),
        load_yaml(d / META_YAML),
        load_yaml(d / SUMMARY_YAML),
    )


# ---------------------------------------------------------------- recording


def host_info() -> dict[str, Any]:
    """Host, Python and torch versions, without importing torch (it is slow and heavy)."""
    from importlib import metadata

    try:
        torch_version: str | None = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    return {"host": socket.gethostname(), "python": sys.version.split()[0], "torch": torch_version}


def save_evidence(
    ws_root: Path,
    entry_id: str,
    rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    *,
    source: str,
    metric: str,
    engine_commit: str | None,
    context: Mapping[str, str | None] | None,
    started: str,
    finished: str,
    run_id: str | None = None,
    workload: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    judging: Mapping[str, Any] | None = None,
    describe: Any = None,
) -> dict[str, Any]:
    """Judge ``rows`` and store them as a new run; return the summary written.

    ``describe(summary, analysis)``: keys to add to (or replace in) the summary before it
    is written (observed evidence says where its numbers came from).

    ``workload``: the run's workload key (see :func:`summary_workload`); ``notes``:
    warnings to keep in the summary beside the statistics' own; ``judging``: keyword
    arguments of :func:`ledger.evidence.stats.analyze` (``paired``, ``tolerance_pct``,
    ``guards``)."""
    from ledger.evidence.stats import analyze

    run_id = run_id or new_run_id()
    analysis = analyze(rows, metric, **dict(judging or {}))
    analysis["warnings"] = [*analysis.get("warnings", []), *notes]
    summary = build_summary(
        analysis,
        entry=entry_id,
        run_id=run_id,
        source=source,
        engine_commit=engine_commit,
        context=context,
        started=started,
        finished=finished,
        workload=workload,
    )
    if describe is not None:
        summary.update(describe(summary, analysis))
    full_meta = {"entry": entry_id, "run_id": run_id, "source": source, **meta}
    full_meta.setdefault("engine_commit", engine_commit)
    write_run(ws_root, entry_id, run_id, rows, full_meta, summary)
    return summary


def record_ab(
    ws_root: Path,
    entry_id: str,
    result: Any,
    *,
    metric: str = "output_throughput",
    engine_commit: str | None = None,
    context: Mapping[str, str | None] | None = None,
    judging: Mapping[str, Any] | None = None,
    sequential: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Store a :class:`ledger.evidence.runner.AbResult` as a new ``ab`` run; return its summary.

    ``sequential``: the record of ``ab --until-decided``'s looks
    (:meth:`ledger.evidence.sequential.Sequential.record`): the runs are judged at its
    last look's confidence, and the summary keeps it and says it in the headline.

    A and B run one bench template, so they differ only by the entry; when the entry
    changes what the bench reports of its workload (a model, a dataset), the summary
    warns of it rather than refusing: that difference is what was measured.  The runs
    ran A then B for each repeat, so they are judged as pairs (``judging`` adds the
    tolerance and guards)."""
    from ledger.evidence.summary import with_sequential
    from ledger.evidence.workload import compare_sides
    from ledger.evidence.workload import mismatch_text
    from ledger.evidence.workload import summary_workload

    meta = dict(result.meta)
    meta.setdefault("engine_commit", engine_commit)
    keys = meta.get("workload") or {}
    diff = compare_sides(keys.get("A"), keys.get("B"))
    notes = [f"the sides' benches report different workloads: {mismatch_text(diff)}"] \
        if diff else []
    return save_evidence(
        ws_root,
        entry_id,
        result.rows,
        meta,
        source="ab",
        metric=metric,
        engine_commit=engine_commit,
        context=context,
        started=result.started,
        finished=result.finished,
        workload=summary_workload(keys.get("A"), keys.get("B")),
        notes=notes,
        judging={**dict(judging or {}), "paired": True,
                 **({"confidence": sequential["confidence"]} if sequential else {})},
        describe=None if not sequential else lambda summary, _: with_sequential(summary,
                                                                                sequential),
    )


__all__ = [
    "EVIDENCE_DIR",
    "dump_yaml",
    "evidence_dir",
    "headline",
    "host_info",
    "is_stale",
    "latest_summary",
    "load_run",
    "load_summaries",
    "new_run_id",
    "now_iso",
    "parse_runs_csv",
    "record_ab",
    "run_dirs",
    "runs_csv_text",
    "save_evidence",
    "write_run",
]
