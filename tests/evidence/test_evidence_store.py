"""The on-disk evidence store: layout, atomic writes, imports, headline and staleness."""

from __future__ import annotations

import json
from datetime import datetime
from datetime import timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ledger.errors import EvidenceError
from ledger.evidence import store
from ledger.evidence.import_run import import_evidence
from ledger.evidence.store import headline
from ledger.evidence.store import is_stale
from ledger.evidence.store import latest_summary
from ledger.evidence.store import load_run
from ledger.evidence.store import load_summaries
from ledger.evidence.store import parse_runs_csv
from ledger.evidence.store import runs_csv_text
from ledger.evidence.store import save_evidence

T0 = datetime(2026, 12, 2, 16, 1, 2, tzinfo=timezone.utc)
SUMMARY_KEYS = [
    "entry",
    "run_id",
    "source",
    "metric",
    "higher_is_better",
    "verdict",
    "outputs",
    "warnings",
    "engine_commit",
    "context",
    "started",
    "finished",
    "headline",
    "load",
    "tolerance_pct",
    "by_concurrency",
]


def rows_for(shift: float, n: int = 5, concs=(16, 64)):
    rows = []
    for c in concs:
        for r in range(n):
            for side, s in (("A", 0.0), ("B", shift)):
                # Deterministic spread: +-2% around the side's level.
                v = 1000.0 * (1 + s) * (1 + 0.01 * ((r * 7 + c) % 5 - 2))
                rows.append(
                    {
                        "side": side,
                        "concurrency": c,
                        "repeat": r,
                        "output_throughput": v,
                        "median_tpot_ms": 20000.0 / v,
                        "completed": 8.0,
                        "output_digest": "d0",
                    }
                )
    return rows


def save(ws: Path, rows, run_id="20261202T160102Z-aaaa", **kw):
    args = dict(
        source="ab",
        metric="output_throughput",
        engine_commit="abc1234def",
        context={"OTHER_KNOB": "1"},
        started="2026-12-02T16:01:02Z",
        finished="2026-12-02T16:05:00Z",
        run_id=run_id,
    )
    args.update(kw)
    return save_evidence(ws, "e0001", rows, {"command": "bench --json {out}"}, **args)


def test_layout_and_summary_schema(tmp_path):
    summary = save(tmp_path, rows_for(0.128))
    d = tmp_path / "evidence" / "e0001" / "20261202T160102Z-aaaa"
    assert sorted(p.name for p in d.iterdir()) == ["meta.yaml", "runs.csv", "summary.yaml"]
    loaded = latest_summary(tmp_path, "e0001")
    assert loaded == summary and list(loaded) == SUMMARY_KEYS
    assert loaded["verdict"] == "gain" and loaded["outputs"] == "identical"
    assert loaded["context"] == {"OTHER_KNOB": "1"}
    cell = loaded["by_concurrency"][1]["metrics"]["output_throughput"]
    assert set(cell) >= {
        "median_a",
        "median_b",
        "delta_pct",
        "ci_low_pct",
        "ci_high_pct",
        "p_value",
        "verdict",
        "higher_is_better",
        "design",
        "tolerance_pct",
    }
    assert cell["design"] == "unpaired" and cell["tolerance_pct"] == 2.0
    assert headline(loaded).startswith("gain +12.8% output_throughput @c")
    header = (d / "runs.csv").read_text().splitlines()[0]
    assert (
        header == "side,concurrency,repeat,completed,median_tpot_ms,output_throughput,output_digest"
    )
    assert len((d / "runs.csv").read_text().splitlines()) == 1 + 2 * 5 * 2


def test_yaml_is_deterministic(tmp_path):
    save(tmp_path / "one", rows_for(0.05))
    save(tmp_path / "two", list(reversed(rows_for(0.05))))
    rel = Path("evidence/e0001/20261202T160102Z-aaaa")
    for name in ("summary.yaml", "runs.csv"):
        assert (tmp_path / "one" / rel / name).read_bytes() == (
            tmp_path / "two" / rel / name
        ).read_bytes()
    text = (tmp_path / "one" / rel / "summary.yaml").read_text()
    assert text.startswith("entry: e0001\nrun_id: 20261202T160102Z-aaaa\nsource: ab\n")


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    real = store.write_file

    def write_then_fail(path, text):
        if path.name == "summary.yaml":
            raise KeyboardInterrupt  # Ctrl-C in the middle of writing the run
        real(path, text)

    monkeypatch.setattr(store, "write_file", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, rows_for(0.1))
    assert list((tmp_path / "evidence" / "e0001").iterdir()) == []
    assert load_summaries(tmp_path, "e0001") == [] and latest_summary(tmp_path, "e0001") is None


def test_existing_run_is_never_overwritten(tmp_path):
    save(tmp_path, rows_for(0.1))
    with pytest.raises(EvidenceError, match="already exists"):
        save(tmp_path, rows_for(0.1))


def test_bad_entry_ids_are_refused(tmp_path):
    for bad in ("../x", "a/b", "", ".."):
        with pytest.raises(EvidenceError, match="invalid entry id"):
            load_summaries(tmp_path, bad)


def test_summaries_in_run_order_and_hidden_temps_ignored(tmp_path):
    save(tmp_path, rows_for(0.1), run_id="20261202T170000Z-bbbb")
    save(tmp_path, rows_for(-0.1), run_id="20261202T160000Z-cccc")
    (tmp_path / "evidence" / "e0001" / ".tmp-20261202T180000Z-dddd-x").mkdir()
    assert [s["verdict"] for s in load_summaries(tmp_path, "e0001")] == ["regression", "gain"]
    assert latest_summary(tmp_path, "e0001")["run_id"] == "20261202T170000Z-bbbb"


def engine_lines(path: Path, shift: float, digest="d0") -> Path:
    objs = []
    for c in (16, 64):
        for r in range(5):  # 4 per side at 2 concurrencies cannot reach p < 0.05 after Holm
            v = 1000.0 * (1 + shift) * (1 + 0.01 * (r - 2))
            objs.append(
                {
                    "max_concurrency": c,
                    "output_throughput": v,
                    "request_throughput": v / 16,
                    "median_tpot_ms": 20000 / v,
                    "output_digest": digest,
                }
            )
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def test_import_a_then_b_makes_one_comparison(tmp_path):
    a = engine_lines(tmp_path / "a.json", 0.0)
    b = engine_lines(tmp_path / "b.json", 0.10)
    first = import_evidence(tmp_path, "e0001", [a], "A", now=T0)
    assert first["verdict"] == "inconclusive" and first["source"] == "import"
    second = import_evidence(
        tmp_path, "e0001", [b], "B", engine_commit="abc1234", now=T0.replace(minute=9)
    )
    assert second["verdict"] == "gain" and second["outputs"] == "identical"
    summaries = load_summaries(tmp_path, "e0001")
    assert [s["run_id"] for s in summaries] == [second["run_id"]]  # the A-only run was superseded
    rows, meta, _ = load_run(tmp_path, "e0001", second["run_id"])
    assert {(r["side"], r["concurrency"]) for r in rows} == {(s, c) for s in "AB" for c in (16, 64)}
    assert sorted(r["repeat"] for r in rows if r["side"] == "A" and r["concurrency"] == 16) == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert [f["side"] for f in meta["files"]] == ["A", "B"] and meta["supersedes"] == first[
        "run_id"
    ]
    assert second["started"] == "2026-12-02T16:01:02Z"


def test_superseded_run_left_by_a_crash_is_skipped(tmp_path, monkeypatch):
    a = engine_lines(tmp_path / "a.json", 0.0)
    import_evidence(tmp_path, "e0001", [a], "A", now=T0)
    monkeypatch.setattr(store.shutil, "rmtree", lambda *a, **k: None)  # "crash" before the cleanup
    merged = import_evidence(
        tmp_path, "e0001", [engine_lines(tmp_path / "b.json", 0.1)], "B", now=T0.replace(minute=3)
    )
    assert len(list((tmp_path / "evidence" / "e0001").iterdir())) == 2
    assert [s["run_id"] for s in load_summaries(tmp_path, "e0001")] == [merged["run_id"]]


def test_malformed_import_stores_nothing(tmp_path):
    good = engine_lines(tmp_path / "a.json", 0.0)
    bad = tmp_path / "bad.json"
    bad.write_text('{"max_concurrency": 4, "output_throughput": ')
    with pytest.raises(EvidenceError, match="bad.json"):
        import_evidence(tmp_path, "e0001", [good, bad], "A", now=T0)
    assert not (tmp_path / "evidence").exists()
    with pytest.raises(EvidenceError, match="side must be A or B"):
        import_evidence(tmp_path, "e0001", [good], "C")


def test_headline_without_evidence():
    assert headline(None) == "no evidence"


@pytest.mark.parametrize(
    "commit, context, stale",
    [
        ("abc1234def", {"OTHER_KNOB": "1"}, False),
        ("abc1234", {"OTHER_KNOB": "1"}, False),  # short sha of the same commit
        ("fff0000", {"OTHER_KNOB": "1"}, True),
        (None, {"OTHER_KNOB": "1"}, False),  # live commit unknown: no proof of change
        ("abc1234def", {"OTHER_KNOB": "2"}, True),
        ("abc1234def", {"OTHER_KNOB": None}, True),  # unset now
        ("abc1234def", {"OTHER_KNOB": "1", "NEW_KNOB": "x"}, True),
        ("abc1234def", None, False),
    ],
)
def test_is_stale(tmp_path, commit, context, stale):
    summary = save(tmp_path, rows_for(0.1))
    assert is_stale(summary, commit, context) is stale


values = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("AB"),
            st.integers(1, 512),
            values,
            st.one_of(st.none(), st.text("abc:0123", min_size=1)),
        ),
        max_size=12,
    )
)
def test_runs_csv_round_trip(recs):
    rows = [
        {"side": s, "concurrency": c, "repeat": i, "output_throughput": v, "output_digest": d}
        for i, (s, c, v, d) in enumerate(recs)
    ]
    back = parse_runs_csv(runs_csv_text(rows), "runs.csv")
    key = lambda r: (r["concurrency"], r["repeat"], r["side"])  # noqa: E731
    expect = sorted(rows, key=key)
    if not any(r["output_digest"] for r in rows):
        for r in expect:
            r.pop("output_digest")
    assert back == expect
