"""runs.csv: the raw runs table of one evidence run, one row per side x load point x repeat.

Columns: ``side,concurrency,repeat`` (``side,rate,repeat`` for a request-rate sweep, see
:mod:`ledger.evidence.load`), then every metric (sorted by name), then ``output_digest``
when any run reported one.  Rows are ordered by load point, repeat, side, i.e. the order
``run_alternating`` ran them in.  Floats are written with ``repr`` so they read back exactly (a
rate of ``inf`` too); a missing value is an empty cell.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any
from typing import Mapping
from typing import Sequence

from ledger.errors import EvidenceError
from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import RATE
from ledger.evidence.load import of_row

ID_COLUMNS = ("side", "concurrency", "repeat")
RATE_ID_COLUMNS = ("side", "rate", "repeat")
DIGEST_COLUMN = "output_digest"
RUN_TIME = "run_time"  # seconds since the epoch a run started, when an import knows it


def _id_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    kinds = {of_row(r).kind for r in rows}
    if len(kinds) > 1:
        raise EvidenceError("a runs table holds one kind of load point: concurrency or rate")
    return RATE_ID_COLUMNS if kinds == {RATE} else ID_COLUMNS


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def runs_csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """runs.csv content: fixed id columns, sorted metrics, digest last; rows in run order."""
    ids = _id_columns(rows)
    extra = sorted({k for r in rows for k in r} - set(ids) - {DIGEST_COLUMN, CONCURRENCY, RATE})
    has_digest = any(r.get(DIGEST_COLUMN) for r in rows)
    columns = list(ids) + extra + ([DIGEST_COLUMN] if has_digest else [])
    ordered = sorted(rows, key=lambda r: (of_row(r).value, int(r["repeat"]), str(r["side"])))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in ordered:
        w.writerow([_cell_text(r.get(c)) for c in columns])
    return buf.getvalue()


def parse_runs_csv(text: str, where: str) -> list[dict[str, Any]]:
    """Rows back from runs.csv text (metrics as floats, missing as None)."""
    reader = csv.DictReader(io.StringIO(text))
    fields = reader.fieldnames or []
    ids = RATE_ID_COLUMNS if RATE in fields and CONCURRENCY not in fields else ID_COLUMNS
    missing = [c for c in ids if c not in fields]
    if missing:
        raise EvidenceError(f"{where}: not a runs table (missing {', '.join(missing)})")
    rows = []
    try:
        for rec in reader:
            row: dict[str, Any] = {"side": rec["side"]}
            if ids is RATE_ID_COLUMNS:
                row[RATE] = float(rec[RATE])
            else:
                row[CONCURRENCY] = int(rec[CONCURRENCY])
            row["repeat"] = int(rec["repeat"])
            for k, v in rec.items():
                if k in ids:
                    continue
                if k == DIGEST_COLUMN:
                    row[k] = v or None
                else:
                    row[k] = float(v) if v else None
            rows.append(row)
    except (TypeError, ValueError) as e:
        raise EvidenceError(f"{where}: malformed row {reader.line_num}: {e}") from e
    return rows


__all__ = ["DIGEST_COLUMN", "ID_COLUMNS", "RATE_ID_COLUMNS", "parse_runs_csv", "runs_csv_text"]
