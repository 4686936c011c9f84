"""Issue 25 items 1 and 2: flags and env kept in Helm values files (yaml-map targets).

PyYAML reads what the chart gets: the list of argument words its template renders into
the container's args (so the argv), and the name/value env list it renders into `env:`.
Every edit is undone byte for byte.
"""

from __future__ import annotations

import pytest
import yaml

from envknobs.formats import FormatError
from envknobs.formats import get_format
from tests.envknobs.helm_shapes import OPEA
from tests.envknobs.helm_shapes import PSTACK

EXTRA = "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs"
ENV = "servingEngineSpec.modelSpec[0].env"


def model_spec(text: str) -> dict:
    return yaml.safe_load(text)["servingEngineSpec"]["modelSpec"][0]


def extra_args(text: str) -> list[str]:
    return model_spec(text)["vllmConfig"]["extraArgs"]


def pod_env(text: str) -> dict[str, str]:
    return {i["name"]: i["value"] for i in model_spec(text)["env"] if "value" in i}


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--max-num-seqs", "32", ["--device=cpu", "--no-enable-prefix-caching", "--max-num-seqs=32"]),
    ("--device", "cuda", ["--device=cuda", "--no-enable-prefix-caching"]),
    ("--enable-prefix-caching", "true", ["--device=cpu", "--enable-prefix-caching"]),
    ("--enforce-eager", "true", ["--device=cpu", "--no-enable-prefix-caching", "--enforce-eager"]),
])
def test_a_block_extra_args_list_changes_the_argv_the_chart_renders(flag, value, words):
    fmt = get_format("yaml-map", key_path=EXTRA)
    out = fmt.set(PSTACK, flag, value)
    assert extra_args(out) == words and all(isinstance(w, str) for w in extra_args(out))
    assert fmt.parse(out)[flag] == value
    old = fmt.parse(PSTACK).get(flag)
    back = fmt.set(out, flag, old) if old is not None else fmt.unset(out, flag)
    assert back == PSTACK


def test_unset_of_a_present_item_removes_it_and_summary_names_its_line():
    fmt = get_format("yaml-map", key_path=EXTRA)
    out = fmt.unset(PSTACK, "--enable-prefix-caching")
    assert extra_args(out) == ["--device=cpu"]
    lines = PSTACK.splitlines()
    for knob, text in (("--device", '        - "--device=cpu"'),
                       ("--enable-prefix-caching", '        - "--no-enable-prefix-caching"')):
        (place,) = fmt.summary(PSTACK).get(knob).places
        assert lines[place.line - 1] == text


@pytest.mark.parametrize(("flag", "value", "run"), [
    ("--max-num-seqs", "128", ["--max-num-seqs", "128"]),
    ("--gpu-memory-utilization", "0.9", ["--gpu-memory-utilization", "0.9"]),
    ("--tp", "2", ["--tensor-parallel-size", "2"]),
])
def test_a_flow_extra_cmd_args_list_of_split_tokens(flag, value, run):
    """`--tp` is spelled as the target's engine (vLLM) spells it: `--tensor-parallel-size`."""
    fmt = get_format("yaml-map", key_path="extraCmdArgs", engine="vllm")
    before = yaml.safe_load(OPEA)["extraCmdArgs"]
    out = fmt.set(OPEA, flag, value)
    after = yaml.safe_load(out)["extraCmdArgs"]
    assert any(after[i:i + 2] == run for i in range(len(after) - 1)), after
    assert len(out.splitlines()) == len(OPEA.splitlines())
    knob = fmt.canonical(OPEA, flag)
    old = fmt.parse(OPEA).get(knob)
    back = fmt.set(out, flag, old) if old is not None else fmt.unset(out, flag)
    assert back == OPEA and yaml.safe_load(back)["extraCmdArgs"] == before


def test_unset_of_a_split_flag_removes_its_value_word_too():
    fmt = get_format("yaml-map", key_path="extraCmdArgs")
    out = fmt.unset(OPEA, "--block-size")
    assert yaml.safe_load(out)["extraCmdArgs"] == ["--tensor-parallel-size", "1",
                                                   "--max-num-seqs", "256"]


def test_a_helm_env_list_of_name_value_items():
    fmt = get_format("yaml-map", key_path=ENV, strings=True)
    assert fmt.parse(PSTACK) == pod_env(PSTACK)
    out = fmt.set(PSTACK, "VLLM_CPU_KVCACHE_SPACE", "40")
    assert pod_env(out)["VLLM_CPU_KVCACHE_SPACE"] == "40"
    assert len(out.splitlines()) == len(PSTACK.splitlines())
    out = fmt.set(out, "VLLM_USE_V1", "1")  # a new item in its neighbours' shape
    assert pod_env(out)["VLLM_USE_V1"] == "1"
    back = fmt.unset(out, "VLLM_USE_V1")
    back = fmt.set(back, "VLLM_CPU_KVCACHE_SPACE", "1",
                   source=fmt.source(PSTACK, "VLLM_CPU_KVCACHE_SPACE"))
    assert back == PSTACK
    (place,) = fmt.summary(PSTACK).get("HUGGING_FACE_HUB_TOKEN").places
    assert place.computed and "HUGGING_FACE_HUB_TOKEN" in PSTACK.splitlines()[place.line - 1]
    with pytest.raises(FormatError, match="line 29: HUGGING_FACE_HUB_TOKEN .* valueFrom"):
        fmt.set(PSTACK, "HUGGING_FACE_HUB_TOKEN", "x")


def test_an_empty_flow_env_list_takes_its_first_item():
    text = PSTACK.replace("    env:\n      - name: VLLM_CPU_KVCACHE_SPACE\n", "    env: []\n"
                          "    x:\n      - name: VLLM_CPU_KVCACHE_SPACE\n")
    fmt = get_format("yaml-map", key_path=ENV, strings=True)
    out = fmt.set(text, "VLLM_USE_V1", "1")
    assert model_spec(out)["env"] == [{"name": "VLLM_USE_V1", "value": "1"}]
    assert fmt.unset(out, "VLLM_USE_V1") == text


def test_record_flag_and_knob_through_the_cli(tmp_path, ledger):
    """(Two targets on one file are kept to two files here: a revert of both in one
    command is a separate matter, reported to the lead.)"""
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    files = {"args": tmp_path / "values.yaml", "env": tmp_path / "env-values.yaml"}
    C = ["-C", str(root)]
    for name, extra in (("args", ["--flags", "vllm", "--key-path", EXTRA]),
                        ("env", ["--key-path", ENV])):
        files[name].write_text(PSTACK)
        r = ledger(*C, "target", "add", name, str(files[name]), "--format", "yaml-map", *extra)
        assert r.exit_code == 0, r.stderr
    r = ledger(*C, "target", "show", "args")
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("--device"))
    assert row.split()[:4] == ["--device", "cpu", "static", "22"], r.stdout
    r = ledger(*C, "target", "show", "env")
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("VLLM_CPU_KVCACHE_SPACE"))
    assert row.split()[:4] == ["VLLM_CPU_KVCACHE_SPACE", "1", "static", "25"], r.stdout
    steps = [("flag", "args", "--max-num-seqs=32"), ("flag", "args", "--enable-prefix-caching"),
             ("knob", "env", "VLLM_CPU_KVCACHE_SPACE=40"), ("knob", "env", "VLLM_USE_V1=1")]
    for i, (kind, target, word) in enumerate(steps):
        r = ledger(*C, "record", kind, target, word, "--class", "perf", "--title", f"s{i}")
        assert r.exit_code == 0, r.stderr
    applied = {k: f.read_text() for k, f in files.items()}
    assert extra_args(applied["args"]) == ["--device=cpu", "--enable-prefix-caching",
                                           "--max-num-seqs=32"]
    assert pod_env(applied["env"]) == {"VLLM_CPU_KVCACHE_SPACE": "40",
                                       "VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_USE_V1": "1"}
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert all(f.read_text() == PSTACK for f in files.values())
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert {k: f.read_text() for k, f in files.items()} == applied
    r = ledger(*C, "record", "flag", "args", "--device", "--unset", "--class", "perf",
               "--title", "default device")
    assert r.exit_code == 0 and "--device=cpu" not in extra_args(files["args"].read_text())
