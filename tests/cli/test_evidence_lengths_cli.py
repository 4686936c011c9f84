"""`ledger evidence add` of vLLM results of two input lengths: vLLM's files name no
length, so the ledger compares the tokens per request their totals give.

Side A is the real vllm-0.9.2-c4.json (tests/evidence/fixtures/real/README.md: 32 tokens
in per request); side B is a copy of it with HAND-EDITED totals (total_input_tokens as
for 1024 tokens per request), since every real vLLM fixture measured one length.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.evidence_kit import REAL
from tests.cli.evidence_kit import one_entry

C4 = REAL / "vllm-0.9.2-c4.json"


def _workspace(tmp_path, ledger):
    root, _, entry = one_entry(tmp_path, ledger)
    return root, entry


def _longer(tmp_path) -> Path:
    doc = json.loads(C4.read_text())
    doc["total_input_tokens"] = doc["completed"] * 1024  # hand-edited: 1024 in per request
    f = tmp_path / "vllm-c4-in1024.json"
    f.write_text(json.dumps(doc, indent=2))
    return f


def _stored(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "evidence").rglob("*"))


def test_a_b_of_two_input_lengths_is_refused_then_compared_knowingly(tmp_path, ledger):
    root, entry = _workspace(tmp_path, ledger)
    longer = _longer(tmp_path)
    assert ledger("-C", root, "evidence", "add", entry, C4, "--side", "A").exit_code == 0
    before = _stored(root)
    r = ledger("-C", root, "evidence", "add", entry, longer, "--side", "B")
    assert r.exit_code == 1 and r.stderr.startswith("error: side A and side B measured "
                                                    "different workloads: ")
    assert "input_len ~31.8 (A) vs ~1024 (B) tokens per request, from the results' token " \
        "counts" in r.stderr
    assert "give --allow-mismatch input_len to compare them knowingly" in r.stderr
    assert r.stdout == "" and _stored(root) == before
    r = ledger("-C", root, "evidence", "add", entry, longer, "--side", "B",
               "--allow-mismatch", "input_len", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.json()["workload"]["input_len_mean"] == {"A": 31.8, "B": 1024.0}
    shown = ledger("-C", root, "evidence", "show", entry).stdout
    assert "input_len_mean A 31.8 / B 1024.0" in shown and "output_len_mean 16.0" in shown


def test_one_side_of_two_input_lengths_is_refused_then_joined_knowingly(tmp_path, ledger):
    root, entry = _workspace(tmp_path, ledger)
    longer = _longer(tmp_path)
    r = ledger("-C", root, "evidence", "add", entry, C4, longer, "--side", "A")
    assert r.exit_code == 1
    assert f"error: {longer}: not a repeat of {C4} for side A: input_len ~31.8 (before) " \
        "vs ~1024 (this file) tokens per request" in r.stderr
    assert "--allow-mismatch input_len if they are repeats all the same" in r.stderr
    assert not (root / "evidence" / entry).exists()
    r = ledger("-C", root, "evidence", "add", entry, C4, longer, "--side", "A",
               "--allow-mismatch", "input_len", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.json()["by_concurrency"][0]["n_a"] == 2


def test_a_later_import_of_another_length_starts_a_run_of_its_own_with_new_run(tmp_path, ledger):
    """The refusal names --new-run, and --new-run is an option that does it: the earlier
    run stays as it was and the new file is a run of its own, not a repeat of it."""
    root, entry = _workspace(tmp_path, ledger)
    longer = _longer(tmp_path)
    assert ledger("-C", root, "evidence", "add", entry, C4, "--side", "A").exit_code == 0
    r = ledger("-C", root, "evidence", "add", entry, longer, "--side", "A")
    assert r.exit_code == 1 and "import it as another run with --new-run" in r.stderr
    r = ledger("-C", root, "evidence", "add", entry, longer, "--side", "A", "--new-run",
               "--json")
    assert r.exit_code == 0, r.stderr
    assert r.json()["by_concurrency"][0]["n_a"] == 1
    assert r.json()["workload"]["input_len_mean"] == 1024.0
    runs = ledger("-C", root, "evidence", "show", entry, "--json").json()
    assert len(runs["runs"]) == 2
