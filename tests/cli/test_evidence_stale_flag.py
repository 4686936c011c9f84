"""``[stale]`` names what differs: a hand edit of a launch-line flag the ledger does not
manage is shown as ``--mem-fraction-static 0.85 → 0.90``, not as another engine commit."""

from __future__ import annotations

from tests.cli.evidence_kit import REAL
from tests.cli.evidence_kit import one_entry

DETAILS = REAL / "sglang-0.5.2-bench_serving-output_details-engine.jsonl"

SCRIPT = """\
#!/usr/bin/env bash
export SGLANG_SM120_MMA_TARGET_CTAS=256
exec python -m sglang.launch_server --model-path /models/llama --mem-fraction-static 0.85
"""


def test_a_hand_edited_flag_is_named_with_its_old_and_new_value(tmp_path, ledger):
    root, script, entry = one_entry(tmp_path, ledger, SCRIPT, "SGLANG_SM120_MMA_TARGET_CTAS=512",
                                    "more CTAs")
    for side in "AB":
        r = ledger("-C", root, "evidence", "add", entry, DETAILS, "--side", side)
        assert r.exit_code == 0, r.stderr
    assert "[stale" not in ledger("-C", root, "evidence", "show", entry).stdout
    script.write_text(SCRIPT.replace("0.85", "0.90"))  # by hand, outside the ledger
    shown = ledger("-C", root, "evidence", "show", entry).stdout
    assert "[stale: --mem-fraction-static 0.85 → 0.90]" in shown
    assert "engine commit" not in shown
    assert "(stale: --mem-fraction-static 0.85 → 0.90)" in ledger("-C", root, "list").stdout
