"""The bash format on real serve-script shapes, with real bash as the oracle on every branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.formats.common.places import ALL
from envknobs.formats.common.places import AmbiguousKnob
from envknobs.formats.common.places import PlaceEdit
from tests.envknobs.bash_fixtures import ALL as FIXTURES
from tests.envknobs.bash_fixtures import ARGS_SGLANG
from tests.envknobs.bash_fixtures import CASE_ROLES
from tests.envknobs.bash_fixtures import DOCKER_ENV_FILE
from tests.envknobs.bash_fixtures import DOCKER_VLLM
from tests.envknobs.bash_fixtures import PD_SGLANG
from tests.envknobs.bash_fixtures import PD_SGLANG_GRID
from tests.envknobs.bash_fixtures import PD_VLLM
from tests.envknobs.knob_oracles import bash_launch_grid
from tests.envknobs.knob_oracles import bash_syntax_ok
from tests.envknobs.scope_oracle import check_reading
from tests.envknobs.scope_oracle import docker_env

BASH = get_format("bash")


def launches(tmp_path: Path, text: str, names: list[str], grid: list[dict]) -> list:
    assert bash_syntax_ok(text), text
    path = tmp_path / "serve.sh"
    path.write_text(text)
    return bash_launch_grid(path, names, grid)


def revert(text: str, knob: str, places) -> str:
    """What the ledger does to revert: every changed place gets its own old text back."""
    return BASH.edit_places(
        text, knob, [PlaceEdit(p.key, p.value, raw=p.raw, anchor=p.anchor) for p in places]
    )


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_reading_matches_bash_on_every_branch(tmp_path: Path, name: str) -> None:
    text, grid = FIXTURES[name]
    check_reading(text, tmp_path / f"{name}.sh", grid)


def test_target_show_names_conditional_and_repeated_knobs() -> None:
    summary = BASH.summary(PD_SGLANG)
    state = {k.knob: k.state for k in summary.knobs}
    assert state["SGLANG_ENABLE_JIT_DEEPGEMM"] == "conditional"
    assert state["MODEL_PATH"] == "conditional"
    assert state["CUDA_VISIBLE_DEVICES"] == "repeated"
    assert state["--disaggregation-mode"] == state["--port"] == "repeated"
    assert state["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"] == "static"
    assert state["--mem-fraction-static"] == "static"  # in the array both launches expand
    assert state["MODEL_NAME"] == "computed"
    jit = summary.get("SGLANG_ENABLE_JIT_DEEPGEMM")
    assert jit.lines == (8, 11) and all(p.scope == "if (line 6)" for p in jit.places)
    cuda = summary.get("CUDA_VISIBLE_DEVICES")
    assert [(p.line, p.key, p.kind, p.value) for p in cuda.places] == [
        (25, "launch 1", "prefix", "0,1,2,3"),
        (29, "launch 2", "prefix", "4,5,6,7"),
    ]
    assert [(launch.line, launch.engine) for launch in summary.launches] == [
        (25, "sglang"), (29, "sglang")
    ]
    parsed = BASH.parse(PD_SGLANG)
    assert "CUDA_VISIBLE_DEVICES" not in parsed and "SGLANG_ENABLE_JIT_DEEPGEMM" not in parsed
    assert parsed["--mem-fraction-static"] == "0.85"
    assert summary.to_dict()["knobs"][0]["places"][0]["line"] == 4  # JSON-ready


def test_repeated_knob_is_refused_naming_both_lines() -> None:
    with pytest.raises(AmbiguousKnob) as refused:
        BASH.set(PD_SGLANG, "CUDA_VISIBLE_DEVICES", "0,1")
    message = refused.value.describe("serve.sh")
    assert "serve.sh:25" in message and "serve.sh:29" in message
    assert "--at LINE" in message and "--all" in message
    assert [p.line for p in refused.value.places] == [25, 29]
    with pytest.raises(AmbiguousKnob, match="line 25.*line 29"):
        BASH.unset(PD_SGLANG, "CUDA_VISIBLE_DEVICES")
    with pytest.raises(AmbiguousKnob, match=r"conditional.*line 8.*line 11"):
        BASH.set(PD_SGLANG, "SGLANG_ENABLE_JIT_DEEPGEMM", "1")


def test_at_line_changes_one_place_and_revert_gives_the_bytes_back(tmp_path: Path) -> None:
    before = BASH.places(PD_SGLANG, "CUDA_VISIBLE_DEVICES")
    out = BASH.set(PD_SGLANG, "CUDA_VISIBLE_DEVICES", "2,3", at=29)
    changed = [(a, b) for a, b in zip(PD_SGLANG.splitlines(), out.splitlines()) if a != b]
    line = PD_SGLANG.splitlines()[28]
    assert changed == [(line, line.replace("4,5,6,7", "2,3"))]
    for runs in launches(tmp_path, out, ["CUDA_VISIBLE_DEVICES"], PD_SGLANG_GRID[:2]):
        assert [r.values["CUDA_VISIBLE_DEVICES"] for r in runs] == ["0,1,2,3", "2,3"]
    assert revert(out, "CUDA_VISIBLE_DEVICES", [before[1]]) == PD_SGLANG


def test_at_all_sets_every_place_and_revert_restores_each_own_value(tmp_path: Path) -> None:
    before = BASH.places(PD_SGLANG, "SGLANG_ENABLE_JIT_DEEPGEMM")
    out = BASH.set(PD_SGLANG, "SGLANG_ENABLE_JIT_DEEPGEMM", "0", at=ALL)
    for runs in launches(tmp_path, out, ["SGLANG_ENABLE_JIT_DEEPGEMM"], PD_SGLANG_GRID):
        assert all(r.values["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0" for r in runs)
    assert revert(out, "SGLANG_ENABLE_JIT_DEEPGEMM", before) == PD_SGLANG


def test_unset_at_a_branch_reads_unset_there_and_reverts_byte_exact(tmp_path: Path) -> None:
    before = BASH.places(PD_SGLANG, "SGLANG_ENABLE_JIT_DEEPGEMM")
    out = BASH.unset(PD_SGLANG, "SGLANG_ENABLE_JIT_DEEPGEMM", at=8)
    assert out.splitlines()[7] == "    unset SGLANG_ENABLE_JIT_DEEPGEMM"
    runs = launches(tmp_path, out, ["SGLANG_ENABLE_JIT_DEEPGEMM"], PD_SGLANG_GRID[:2])
    assert [r.values["SGLANG_ENABLE_JIT_DEEPGEMM"] for r in runs[0]] == [None, None]
    assert [r.values["SGLANG_ENABLE_JIT_DEEPGEMM"] for r in runs[1]] == ["0", "0"]
    assert revert(out, "SGLANG_ENABLE_JIT_DEEPGEMM", [before[0]]) == PD_SGLANG
    # all places unset, then each back
    out = BASH.unset(PD_SGLANG, "SGLANG_ENABLE_JIT_DEEPGEMM", at=ALL)
    assert "SGLANG_ENABLE_JIT_DEEPGEMM" not in BASH.parse(out)
    assert revert(out, "SGLANG_ENABLE_JIT_DEEPGEMM", before) == PD_SGLANG


def test_unset_at_a_launch_line_removes_the_prefix_and_puts_it_back(tmp_path: Path) -> None:
    before = BASH.places(PD_SGLANG, "CUDA_VISIBLE_DEVICES")
    out = BASH.unset(PD_SGLANG, "CUDA_VISIBLE_DEVICES", at=25)
    assert out.splitlines()[24].startswith("python3 -m sglang.launch_server")
    runs = launches(tmp_path, out, ["CUDA_VISIBLE_DEVICES"], PD_SGLANG_GRID[:1])
    assert [r.values["CUDA_VISIBLE_DEVICES"] for r in runs[0]] == [None, "4,5,6,7"]
    assert revert(out, "CUDA_VISIBLE_DEVICES", [before[0]]) == PD_SGLANG


def test_removing_a_prefix_that_would_expose_an_export_is_refused() -> None:
    text = "export K=1\nK=2 python -m sglang.launch_server &\npython -m sglang.launch_server &\n"
    assert BASH.summary(text).get("K").repeated
    with pytest.raises(FormatError, match="would still see it from line 1"):
        BASH.unset(text, "K", at=2)
    assert BASH.unset(text, "K", at=ALL) == (
        "unset K\npython -m sglang.launch_server &\npython -m sglang.launch_server &\n"
    )


def test_new_knob_goes_to_top_level_before_the_branches(tmp_path: Path) -> None:
    out = BASH.set(PD_SGLANG, "SGLANG_NEW", "x y")
    assert out.splitlines()[5] == "export SGLANG_NEW='x y'"  # after line 5, before the if
    assert BASH.unset(out, "SGLANG_NEW") == PD_SGLANG
    for runs in launches(tmp_path, out, ["SGLANG_NEW"], PD_SGLANG_GRID[:2]):
        assert [r.values["SGLANG_NEW"] for r in runs] == ["x y", "x y"]


def test_new_knob_is_refused_when_every_launch_is_inside_a_case() -> None:
    with pytest.raises(FormatError, match="line 2: no top-level place before the launch commands"):
        BASH.set(CASE_ROLES, "SGLANG_NEW", "1")
    out = BASH.set(CASE_ROLES, "SGLANG_NEW", "1", at=8)  # a launch line: a prefix there
    assert out.splitlines()[7] == "    SGLANG_NEW=1 exec python -m sglang.launch_server --disaggregation-mode decode --port 30001"
    assert BASH.unset(out, "SGLANG_NEW") == CASE_ROLES


def test_flags_in_an_args_array_keep_their_form(tmp_path: Path) -> None:
    out = BASH.set(ARGS_SGLANG, "--mem-fraction-static", "0.9")
    out = BASH.set(out, "--chunked-prefill-size", "8192")
    out = BASH.set(out, "--mem_fraction_static", "0.8")  # any spelling of the flag
    lines = out.splitlines()
    assert lines[15] == "    --mem-fraction-static 0.8" and lines[16] == "    --chunked-prefill-size=8192"
    [runs] = launches(tmp_path, out, [], [{}])
    argv = runs[0].argv
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.8" and "--chunked-prefill-size=8192" in argv


def test_new_flag_goes_into_the_array_and_unset_gives_the_bytes_back(tmp_path: Path) -> None:
    out = BASH.set(ARGS_SGLANG, "--cuda-graph-max-bs", "256")
    assert out.splitlines()[18] == "    --cuda-graph-max-bs 256" and out.splitlines()[19] == ")"
    [runs] = launches(tmp_path, out, [], [{}])
    assert runs[0].argv[-2:] == ["--cuda-graph-max-bs", "256"]
    assert BASH.unset(out, "--cuda-graph-max-bs") == ARGS_SGLANG


def test_removed_switch_comes_back_at_its_place(tmp_path: Path) -> None:
    [place] = BASH.places(ARGS_SGLANG, "--disable-radix-cache")
    out = BASH.unset(ARGS_SGLANG, "--disable-radix-cache")
    assert "--disable-radix-cache" not in out and "# PD: radix off" not in out
    [runs] = launches(tmp_path, out, [], [{}])
    assert "--disable-radix-cache" not in runs[0].argv
    assert revert(out, "--disable-radix-cache", [place]) == ARGS_SGLANG


def test_new_flag_on_a_continued_launch_line_in_its_indentation(tmp_path: Path) -> None:
    with pytest.raises(AmbiguousKnob, match="launch commands are at: line 25, line 29"):
        BASH.set(PD_SGLANG, "--max-running-requests", "64")
    out = BASH.set(PD_SGLANG, "--max-running-requests", "64", at=29)
    assert out.splitlines()[31] == "    --max-running-requests 64 \\"
    runs = launches(tmp_path, out, [], PD_SGLANG_GRID[:1])[0]
    assert "--max-running-requests" not in runs[0].argv
    assert runs[1].argv[-4:] == ["--max-running-requests", "64", "--cuda-graph-max-bs", "128"]
    assert BASH.unset(out, "--max-running-requests") == PD_SGLANG
    both = BASH.set(PD_SGLANG, "--max-running-requests", "64", at=ALL)
    assert both.count("--max-running-requests 64 \\") == 2


def test_repeated_flag_follows_the_selection_rule(tmp_path: Path) -> None:
    with pytest.raises(AmbiguousKnob, match=r"--port has 2 places.*line 13.*line 17"):
        BASH.set(PD_VLLM, "--port", "9000")
    out = BASH.set(PD_VLLM, "--port", "9000", at=ALL)
    assert "--port 9000 \\" in out and "--port=9000 \\" in out  # each form kept
    before = BASH.places(PD_VLLM, "--port")
    assert revert(out, "--port", before) == PD_VLLM


def test_negatable_switches_use_the_no_form() -> None:
    out = BASH.set(DOCKER_VLLM, "--enable-prefix-caching", "false")
    assert out.endswith("    --no-enable-prefix-caching\n")
    assert BASH.parse(out)["--enable-prefix-caching"] == "false"
    assert BASH.set(out, "--enable-prefix-caching", "true") == DOCKER_VLLM
    with pytest.raises(FormatError, match="without a --no- form"):
        BASH.set(ARGS_SGLANG, "--disable-radix-cache", "false")


def test_docker_env_is_edited_in_place(tmp_path: Path) -> None:
    out = BASH.set(DOCKER_VLLM, "VLLM_ATTENTION_BACKEND", "TRITON_ATTN")
    out = BASH.set(out, "VLLM_USE_V1", "0")
    changed = [b for a, b in zip(DOCKER_VLLM.splitlines(), out.splitlines()) if a != b]
    assert changed == ["    -e VLLM_ATTENTION_BACKEND=TRITON_ATTN \\", "    --env=VLLM_USE_V1=0 \\"]
    out = BASH.set(out, "SGLANG_NEW", "a b")  # a new one, next to the others, in their form
    assert "    --env='SGLANG_NEW=a b' \\" in out.splitlines()
    [runs] = launches(tmp_path, out, [], [{}])
    env = docker_env(runs[0].argv)
    assert env["VLLM_ATTENTION_BACKEND"] == "TRITON_ATTN" and env["SGLANG_NEW"] == "a b"
    assert env["HUGGING_FACE_HUB_TOKEN"] == "hf_dummy" and env["VLLM_USE_V1"] == "0"
    assert BASH.summary(DOCKER_VLLM).get("HUGGING_FACE_HUB_TOKEN").computed
    assert "export" not in out


def test_docker_env_file_is_refused_naming_the_file() -> None:
    with pytest.raises(FormatError, match=r"line 2: .*--env-file ./serve.env.*dotenv target"):
        BASH.set(DOCKER_ENV_FILE, "SGLANG_NEW", "1")
    with pytest.raises(FormatError, match="--env-file ./serve.env"):
        BASH.unset(DOCKER_ENV_FILE, "SGLANG_X")
    assert "SGLANG_X=2" in BASH.set(DOCKER_ENV_FILE, "SGLANG_X", "2")  # in place: -e wins
    assert any("--env-file ./serve.env" in n for n in BASH.summary(DOCKER_ENV_FILE).notes)


def test_heredocs_strings_and_comments_are_never_knobs() -> None:
    names = {k.knob for k in BASH.summary(ARGS_SGLANG).knobs}
    assert not names & {"NOT_A_KNOB", "ALSO_NOT", "COMMENTED", "--cuda-graph-max-bs"}
    out = BASH.set(ARGS_SGLANG, "NOT_A_KNOB", "2")
    assert out.count("export NOT_A_KNOB=1\n") == 1 and "export NOT_A_KNOB=2\n" in out
    assert out.index("export NOT_A_KNOB=2") < out.index("cat > /dev/null")


def test_scripts_without_branches_behave_as_before() -> None:
    text = "#!/bin/bash\nexport A=1\nexport A=2\nK=3 exec python -m sglang.launch_server --port 1\n"
    assert BASH.parse(text) == {"A": "2", "K": "3", "--port": "1"}
    assert BASH.set(text, "A", "5") == text.replace("A=2", "A=5")
    assert BASH.unset(text, "A") == "#!/bin/bash\nK=3 exec python -m sglang.launch_server --port 1\n"
    assert BASH.set(text, "B", "1").splitlines()[3] == "export B=1"
