"""Request-rate sweeps through the evidence pipeline: runs.csv, judging, headline, imports."""

from __future__ import annotations

import json
import math
from datetime import datetime
from datetime import timezone
from pathlib import Path

import pytest

from ledger.errors import EvidenceError
from ledger.evidence.headline import format_headline
from ledger.evidence.import_run import import_evidence
from ledger.evidence.load import of_row
from ledger.evidence.runs_csv import parse_runs_csv
from ledger.evidence.runs_csv import runs_csv_text
from ledger.evidence.stats import analyze
from ledger.evidence.store import latest_summary
from ledger.evidence.store import load_run
from tests.evidence.test_evidence_importers import RATES
from tests.evidence.test_evidence_importers import sglang_old_result
from tests.evidence.test_evidence_importers import sglang_result

T0 = datetime(2026, 12, 2, 16, 1, 2, tzinfo=timezone.utc)


def rate_rows(shift: float, rates=(1.0, 4.0, math.inf), n: int = 5):
    rows = []
    for rate in rates:
        for r in range(n):
            for side, s in (("A", 0.0), ("B", shift)):
                v = 1000.0 * (1 + s) * (1 + 0.01 * ((r * 7) % 5 - 2))
                rows.append({"side": side, "rate": rate, "repeat": r, "output_throughput": v})
    return rows


def test_runs_csv_keeps_rates_exactly():
    rows = rate_rows(0.1)
    text = runs_csv_text(rows)
    assert text.splitlines()[0] == "side,rate,repeat,output_throughput"
    assert "A,inf,0," in text
    back = parse_runs_csv(text, "runs.csv")
    assert [of_row(r) for r in back] == sorted(of_row(r) for r in rows)
    with pytest.raises(EvidenceError, match="one kind of load point"):
        runs_csv_text(rows + [{"side": "A", "concurrency": 4, "repeat": 0}])


def test_a_rate_sweep_is_judged_per_rate_with_a_rate_headline():
    analysis = analyze(rate_rows(0.081))
    assert analysis["load"] == "rate"
    assert [b["rate"] for b in analysis["by_concurrency"]] == [1.0, 4.0, math.inf]
    assert analysis["verdict"] == "gain"
    headline = format_headline(analysis)
    assert headline.startswith("gain +8.1% output_throughput @rate ")
    with pytest.raises(EvidenceError, match="mixes concurrency and rate"):
        analyze(rate_rows(0.1) + [{"side": "A", "concurrency": 4, "repeat": 0,
                                   "output_throughput": 1.0}])


def write_sweep(path: Path, scale: float) -> Path:
    lines = [sglang_old_result(r, 1000.0 * scale * (1 + 0.001 * i)) for i, r in enumerate(RATES)]
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def test_importing_a_seven_line_sweep_for_each_side(tmp_path):
    a = [write_sweep(tmp_path / f"a{i}.jsonl", 1.0 + 0.003 * i) for i in range(3)]
    b = [write_sweep(tmp_path / f"b{i}.jsonl", 1.09 + 0.003 * i) for i in range(3)]
    import_evidence(tmp_path, "e0001", a, "A", now=T0)
    summary = import_evidence(tmp_path, "e0001", b, "B", now=T0)
    assert summary["load"] == "rate"
    assert [blk["rate"] for blk in summary["by_concurrency"]] == RATES
    assert "@rate " in summary["headline"]
    assert latest_summary(tmp_path, "e0001") == summary
    rows, _, _ = load_run(tmp_path, "e0001", summary["run_id"])
    assert len(rows) == 2 * 3 * 7 and all("concurrency" not in r for r in rows)
    # A concurrency sweep does not silently join a rate sweep.
    conc = tmp_path / "c.jsonl"
    conc.write_text(json.dumps(sglang_result(16, 900.0)) + "\n")
    with pytest.raises(EvidenceError, match="separate evidence"):
        import_evidence(tmp_path, "e0001", [conc], "A", now=T0)
