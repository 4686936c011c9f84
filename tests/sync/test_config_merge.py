"""ledger.yaml targets merge by name where git's line merge collides."""

from __future__ import annotations

import pytest

from ledger.errors import MergeConflict
from ledger.store.config_file import parse_config_text
from ledger.store.config_merge import merge_config

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


def _rooted(text: str, roots: str) -> str:
    return text.replace("engine_repo:\n", f"roots:\n{roots}engine_repo:\n")


def test_roots_merge_by_name_and_rooted_targets_keep_their_root():
    ours = add(_rooted(BASE, "  deploy:\n"), "prefill", "deploy:p.sh")
    theirs = add(_rooted(BASE, "  models: /models\n"), "router", "models:r.sh")
    config = parse_config_text(merge_config(BASE, ours, theirs), "ledger.yaml")
    assert config.roots == {"deploy": None, "models": "/models"}
    assert config.targets["prefill"].path == "deploy:p.sh"
    assert config.targets["router"].path == "models:r.sh"


def test_one_root_given_two_defaults_is_a_conflict_naming_both():
    ours = _rooted(BASE, "  deploy:\n")  # declared, each machine sets it
    theirs = _rooted(BASE, "  deploy: /opt/sglang\n")
    with pytest.raises(MergeConflict) as e:
        merge_config(BASE, ours, theirs)
    assert "root deploy: '/opt/sglang'" in str(e.value) and "root deploy: None" in str(e.value)


def test_the_workspace_engine_release_changed_on_one_side_is_taken():
    theirs = add(BASE, "router", "deploy/r.sh").replace("engine_repo:\n", "engine_repo:\nengine: vllm==0.34.0\n")
    merged = merge_config(BASE, add(BASE, "prefill", "deploy/p.sh"), theirs)
    config = parse_config_text(merged, "ledger.yaml")
    assert config.engine == "vllm==0.34.0" and list(config.targets) == ["serve", "prefill", "router"]
    with pytest.raises(MergeConflict, match="ledger.yaml key engine"):
        merge_config(BASE, BASE.replace("engine_repo:\n", "engine_repo:\nengine: vllm==0.30.0\n"), theirs)
