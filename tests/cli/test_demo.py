"""`ledger demo` end to end on the bundled engine (issue 6), and its final state."""

from __future__ import annotations

import json
import subprocess

import pytest


@pytest.mark.slow
def test_demo_plays_the_whole_story(tmp_path, ledger):
    root = tmp_path / "demo"
    r = ledger("demo", root, "--runs", "3")
    assert r.exit_code == 0, r.stdout[-3000:] + r.stderr
    out = r.stdout
    for command in ("$ ledger record knob decode ENGINE_DECODE_TARGET_CTAS=2",
                    "$ ledger record patch", "$ ledger ab decode-target-ctas-2",
                    "$ ledger suspect decode-target-ctas-2", "$ ledger diff",
                    "$ ledger bisect --class perf --clear-suspects",
                    "$ ledger restore --perf-only --restart", "$ ledger status --live",
                    "$ ledger render"):
        assert command in out, command
    assert "evidence: " in out and str(root / "docs" / "index.html") in out
    # After the claw-back, the running decode server runs every knob of its file...
    claw = out.split("$ ledger restore --perf-only --restart", 1)[1]
    live = claw.split("$ ledger status --live", 1)[1].split("\n#", 1)[0]
    rows = [line.split() for line in live.splitlines() if line.strip().startswith("ENGINE_")]
    assert rows and all(r[1] == "live" for r in rows), live
    assert ["ENGINE_DECODE_TARGET_CTAS", "live", "2", "2", "2"] in rows
    flags = [line.split() for line in live.splitlines() if line.strip().startswith("--")]
    assert ["--role", "live", "-", "decode", "decode"] in flags  # launch flags too
    # ...and a bad knob value is rolled back by the health gate, the server answering again.
    assert "health check FAILED" in claw and "rolled back: workspace commit" in claw
    assert "after the rollback: decode: restarted" in claw
    assert "$ ledger status --live" in claw.split("rolled back: workspace commit", 1)[1]
    assert not (root / "run" / "decode.pid").exists()  # the demo stopped its server
    # The bisect through the faulty proxy: not in the perf entries, suspect cleared by it;
    # the same check against the router directly passes.
    bisect_out = out.split("$ ledger bisect --class perf --clear-suspects", 1)[1]
    assert "not in these entries: the check fails with all 2 selected entries reverted" in \
        bisect_out.split("$ ledger restore", 1)[0]
    assert "cleared " in bisect_out.split("$ ledger restore", 1)[0]
    assert "cannot reproduce: the check passes with all 2 selected entries applied" in \
        bisect_out.split("$ ledger restore", 1)[1]
    # The bugfix knob shows what it fixes: with every KV transfer dropped, the shipped 30 s
    # timeout leaves the client without an answer (a hang); with the knob (5 s) the same
    # check is refused with a 504 naming the knob, before the client's 10 s are up.
    fault = "--drop-transfers --rounds 1 --timeout 10"
    before, after = out.split(fault)[1:3]
    before = before.split("$ ledger record knob decode ENGINE_INFLIGHT_TIMEOUT_S=5", 1)[0]
    assert "(ENGINE_INFLIGHT_TIMEOUT_S=30)" in before
    assert "hang: no answer within the client's 10s" in before and "HTTP 504" not in before
    answer = [x for x in after.splitlines() if x.startswith("round 1: ")][0]
    assert answer.startswith("round 1: HTTP 504 after ") and \
        "did not arrive within ENGINE_INFLIGHT_TIMEOUT_S=5s; aborted" in answer, answer
    assert float(answer.split(" after ")[1].split("s:")[0]) < 10
    assert "all 1 rounds failed fast with an error answer" in after
    report = (root / "docs" / "bugfix-check.md").read_text()
    assert "exit 1 after" in report.split("## ")[1] and "exit 0 after" in report.split("## ")[2]
    assert "hang: no answer" in report and "HTTP 504 after" in report
    # 3 runs a side (quick here) can never be significant: the A/B says so.
    assert "warning: 3 vs 3 runs cannot reach p < 0.05" in r.stderr

    ws = root / "ledger"
    st = ledger("-C", ws, "status", "--json").json()
    assert st["clean"]
    entries = {row["title"]: row for row in st["entries"]}
    bad = entries.pop("one KV page")
    assert bad["state"] == "reverted" and st["suspects"] == [bad["id"]]
    assert all(row["state"] == "applied" and row["ok"] for row in entries.values())
    script = (root / "deploy" / "serve_decode.sh").read_text()
    assert "export ENGINE_DECODE_TARGET_CTAS=2" in script
    assert "export ENGINE_INFLIGHT_TIMEOUT_S=5" in script
    repo = root / "engine-repo"
    assert "MIN_SPLIT_TOKENS = 64" in (repo / "engine" / "model" / "attention_ops.py").read_text()
    assert "must be true or false" in (repo / "engine" / "serving" / "requests.py").read_text()
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%b"], capture_output=True,
                         text=True, check=True).stdout
    assert "Ledger-Action: revert" in log and "Ledger-Action: restore" in log
    perf = [row for row in st["entries"] if row["title"] == "decode target CTAS 2"][0]
    runs = list((ws / "evidence" / perf["id"]).iterdir())
    assert len(runs) == 1 and (runs[0] / "runs.csv").exists()
    # Measured before the perf patch (which leaves the knob nothing to split at <= 64
    # tokens): A splits each c1 step's KV into partitions, B does not.
    splits = {row.split(",")[0]: row for row in (runs[0] / "runs.csv").read_text().splitlines()}
    header = (runs[0] / "runs.csv").read_text().splitlines()[0].split(",")
    col = header.index("decode_kv_splits_last")
    assert float(splits["A"].split(",")[col]) > 1 and float(splits["B"].split(",")[col]) == 1
    summary = (runs[0] / "summary.yaml").read_text()
    assert "outputs: identical" in summary
    for name in ("CHANGELOG.md", "index.html"):
        assert (root / "docs" / name).stat().st_size > 500
    shown = json.loads(ledger("-C", ws, "show", perf["id"], "--json").stdout)
    assert [a["action"] for a in shown["history"]] == ["record", "suspect", "clear", "restore",
                                                        "restart"]
    assert "bisect " in shown["clear_why"] and "persists with all 2" in shown["clear_why"]
    assert [b["role"] for b in shown["bisects"]][0].startswith("exonerated")


def test_demo_refuses_a_non_empty_directory(tmp_path, ledger):
    (tmp_path / "keep.txt").write_text("mine")
    r = ledger("demo", tmp_path)
    assert r.exit_code == 1 and "not empty" in r.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"
