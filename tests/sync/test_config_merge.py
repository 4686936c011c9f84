"""ledger.yaml targets merge by name where git's line merge collides."""

from __future__ import annotations

import pytest

from ledger.errors import MergeConflict
from ledger.store.config_merge import merge_config
from ledger.store.workspace import parse_config_text

BASE = """\
# knob ledger workspace — our decode fleet
version: 1
engine_repo:
targets:
  serve:
    path: deploy/serve.sh
    format: bash
"""


def add(text: str, name: str, path: str) -> str:
    return text + f"  {name}:\n    path: {path}\n    format: bash\n"


def test_two_new_targets_are_both_kept_with_the_local_comments():
    merged = merge_config(BASE, add(BASE, "prefill", "deploy/p.sh"),
                          add(BASE, "router", "deploy/r.sh"))
    config = parse_config_text(merged, "ledger.yaml")
    assert list(config.targets) == ["serve", "prefill", "router"]
    assert config.targets["router"].path == "deploy/r.sh"
    assert merged.startswith("# knob ledger workspace — our decode fleet\n")


def test_a_target_removed_on_one_side_and_untouched_on_the_other_goes():
    theirs = BASE.split("  serve:")[0] + "  {}\n"
    merged = merge_config(BASE, add(BASE, "prefill", "deploy/p.sh"), theirs)
    assert list(parse_config_text(merged, "ledger.yaml").targets) == ["prefill"]


def test_one_name_two_files_is_a_conflict():
    with pytest.raises(MergeConflict, match="ledger.yaml target decode"):
        merge_config(BASE, add(BASE, "decode", "deploy/a.sh"), add(BASE, "decode", "deploy/b.sh"))


def test_another_key_changed_differently_is_a_conflict():
    with pytest.raises(MergeConflict, match="ledger.yaml key engine_repo"):
        merge_config(BASE, BASE.replace("engine_repo:", "engine_repo: a"),
                     BASE.replace("engine_repo:", "engine_repo: b"))


def test_a_key_changed_on_one_side_is_taken():
    theirs = add(BASE, "router", "deploy/r.sh").replace("engine_repo:", "engine_repo: eng")
    merged = merge_config(BASE, add(BASE, "prefill", "deploy/p.sh"), theirs)
    config = parse_config_text(merged, "ledger.yaml")
    assert config.engine_repo == "eng" and list(config.targets) == ["serve", "prefill", "router"]
