"""envknobs.assign.check_assignment: one call checks an assignment as the engine reading
each file takes it (grammar, catalogs, spelling, places), against real bash formats and
the bundled release catalogs; each refusal says which step and which file."""

from __future__ import annotations

import pytest

from envknobs.assign import AssignmentError
from envknobs.assign import InFile
from envknobs.assign import check_assignment
from envknobs.catalog import default_registry
from envknobs.catalog_release import release_of
from envknobs.formats import get_format
from envknobs.formats.common.places import AmbiguousKnob

BASH = get_format("bash")
SGLANG = "sglang==0.5.23"


def _script(flags: str) -> str:
    return ("#!/bin/bash\nexport SGLANG_ENABLE_TORCH_INFERENCE_MODE=false\n"
            "python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct \\\n"
            f"    --port 30001 {flags}\n")


def _check(knob, value, *texts, release=SGLANG, **kw):
    files = [InFile(BASH, t, declared=release) for t in texts]
    return check_assignment(default_registry(), knob, value, files, **kw)


def test_a_value_the_release_refuses_is_the_catalog_step_and_no_validate_skips_it():
    with pytest.raises(AssignmentError) as e:
        _check("SGLANG_ENABLE_TORCH_INFERENCE_MODE", "on", _script(""))
    assert e.value.step == "catalog" and "not a boolean the engine takes" in str(e.value)
    ok = _check("SGLANG_ENABLE_TORCH_INFERENCE_MODE", "on", _script(""), validate=False)
    assert ok.knob == "SGLANG_ENABLE_TORCH_INFERENCE_MODE" and ok.warnings == ()


def test_a_name_no_file_can_carry_is_the_grammar_step_of_the_file_that_refused():
    with pytest.raises(AssignmentError) as e:
        _check("BAD NAME", "1", _script(""), _script(""))
    assert (e.value.step, e.value.index) == ("grammar", 0)
    with pytest.raises(AssignmentError) as e:
        _check("SGLANG_X", "1", _script(""), before="a\x00b")
    assert e.value.step == "grammar"


def test_the_files_own_spelling_of_the_flag_is_the_one_changed():
    # SGLang's argparse reads --attn-dp-size and --attention-data-parallel-size as one flag
    checked = _check("--attn-dp-size", "4", _script("--attention-data-parallel-size 2"))
    assert checked.knob == "--attention-data-parallel-size"
    assert checked.spelled == (("--attn-dp-size", "--attention-data-parallel-size"),)
    assert checked.releases == (SGLANG,) and len(checked.places) == 1
    # without a release nothing says the two are one flag: the name as asked
    assert _check("--attn-dp-size", "4", _script("--attention-data-parallel-size 2"),
                  release=None, validate=False).knob == "--attn-dp-size"


def test_one_flag_spelt_twice_is_refused_with_both_places():
    text = _script("--attention-data-parallel-size 2 \\\n    --attn-dp-size 3")
    with pytest.raises(AssignmentError) as e:
        _check("--attn-dp-size", "4", text)
    assert e.value.step == "spellings" and e.value.release == SGLANG
    assert e.value.names == ("--attention-data-parallel-size", "--attn-dp-size")
    assert [p.line for p in e.value.places] == [4, 5]


def test_several_places_are_refused_without_a_selection_and_given_with_one():
    text = ("#!/bin/bash\nif [ -n \"$BIG\" ]; then\n  export SGLANG_X=2\nelse\n"
            "  export SGLANG_X=1\nfi\npython -m sglang.launch_server --port 1\n")
    with pytest.raises(AssignmentError) as e:
        _check("SGLANG_X", "3", text, release=None, validate=False)
    assert e.value.step == "places" and isinstance(e.value.cause, AmbiguousKnob)
    both = _check("SGLANG_X", "3", text, release=None, validate=False, at="all")
    assert sorted(p.line for p in both.places[0]) == [3, 5]


def test_defaults_and_the_string_source_come_back_when_asked():
    checked = _check("--port", "30002", _script(""), defaults=True, string=True)
    assert checked.defaults == (30000,) and checked.source == ' "30002"'
    assert _check("--port", "30002", _script("")).defaults == (None,)


def test_the_release_is_the_declared_one_else_the_one_the_text_names_else_the_fallback():
    pinned = "pip install sglang==0.5.23\n"
    assert release_of("vllm==0.34.0", pinned, None) == "vllm==0.34.0"
    assert release_of(None, pinned, "vllm==0.34.0") == SGLANG
    assert release_of(None, pinned + "pip install sglang==0.5.9\n", "x") == "x"
    assert release_of(None, "echo hi\n", None) is None
