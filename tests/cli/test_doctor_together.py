"""`ledger doctor` with every kind of damage at once (issue 30): a hand edit in a target,
a stale git lock, a dead temporary, a wrong-shaped intent record and a corrupt backup
manifest.  Each is reported whatever else is wrong, and ``--repair`` keeps the hand edit."""

from __future__ import annotations

from tests.cli.test_doctor import checks
from tests.cli.test_doctor import doctor
from tests.cli.test_doctor import make_bad_manifest
from tests.cli.test_doctor import make_damaged_intent
from tests.cli.test_doctor import make_locks
from tests.cli.test_doctor import make_temps
from tests.cli.test_doctor import ws  # noqa: F401  (fixture)
import pytest

from tests.store.kit import CTAS
from tests.store.kit import git_locks
from tests.store.kit import ledger_temps
from tests.store.kit import run_cli

EVERYTHING = (make_locks, make_temps, make_damaged_intent, make_bad_manifest)
# Intent records of the wrong shape: valid JSON, not what a ledger command writes.
SHAPES = ('{"targets": 5}', "[]", "null", '{"targets": [5], "op": "x"}',
          '{"ledger_files": [7]}', '{"targets": [{"path": 5}]}', '{"temps": "a"}')


def hand_edit(story) -> bytes:
    story.script.write_text(story.script.read_text().replace(f"{CTAS}=512", f"{CTAS}=1024"))
    return story.script.read_bytes()


@pytest.mark.parametrize("shape", SHAPES)
def test_every_condition_is_reported_together_and_repair_keeps_the_hand_edit(ws, shape):  # noqa: F811
    edited = hand_edit(ws)
    for make in EVERYTHING:
        make(ws)
    (ws.root / ".ledger" / "intent.json").write_text(shape)
    code, report = doctor(ws)
    assert code == 1
    found = checks(report)
    assert {("git-lock", "index.lock"), ("temp", ".ledger-tmp-0a1b2c3d4e5f-serve_decode.sh"),
            ("intent", "intent.json"), ("backup", "manifest.json"),
            ("target", "serve_decode.sh")} <= found, report
    drift = [f for f in report["findings"] if f["check"] == "target"]
    assert "expected '512', found '1024'" in drift[0]["problem"], drift
    code, after = doctor(ws, "--repair")
    assert ws.script.read_bytes() == edited  # the hand edit is the operator's
    assert code == 1 and {f["check"] for f in after["findings"]} == {"target"}, after
    assert git_locks(ws.root) == [] and ledger_temps(ws.root, ws.script.parent) == []
    r = run_cli(ws.root, "status")
    assert "1024" in r.stdout and ws.script.read_bytes() == edited


@pytest.mark.parametrize("make", EVERYTHING, ids=lambda m: m.__name__)
def test_drift_is_reported_beside_each_condition_alone(ws, make):  # noqa: F811
    hand_edit(ws)
    make(ws)
    code, report = doctor(ws)
    assert code == 1 and ("target", "serve_decode.sh") in checks(report), report
    r = run_cli(ws.root, "doctor")
    assert r.returncode == 1 and "expected '512', found '1024'" in r.stdout, r.stdout
