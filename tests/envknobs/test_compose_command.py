"""Issue 25 item 1: launch flags in a docker-compose service's `command:` / `entrypoint:`
(a yaml-map target at key path `services.NAME.command`).

The oracle is what compose hands the container: PyYAML reads the file, a string command is
split by `shlex` (compose's shell-word splitting), and a `sh -c` script is run by real bash
with the server stubbed to print its argv.  Fixtures follow real files: vLLM's image with
a token list or a folded flag block, SGLang's `docker/compose.yaml` (`entrypoint:` plus a
plain multi-line `command:`), OPEA's `/bin/sh -c "... api_server ..."`.
"""

from __future__ import annotations

import shlex
import subprocess

import pytest
import yaml

from envknobs.formats import FormatError
from envknobs.formats import get_format
from tests.envknobs.foreign_shapes import COMPOSE_ENV_LIST
from tests.envknobs.foreign_shapes import COMPOSE_ENV_MAP

FLOW = """\
services:
  vllm:
    image: vllm/vllm-openai:latest
    ipc: host
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2", "--max-num-seqs=64"]
"""

FOLDED = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.8.5
    ports:
      - "8000:8000"
    command: >
      --model meta-llama/Llama-3.1-8B-Instruct
      --gpu-memory-utilization 0.9
      --max-model-len 8192
    environment:
      - HF_TOKEN=${HF_TOKEN}
"""

SGLANG = """\
services:
  sglang:
    image: lmsysorg/sglang:latest
    container_name: sglang
    restart: always
    network_mode: host
    environment:
      HF_TOKEN: <secret>
    entrypoint: python3 -m sglang.launch_server
    command: --model-path meta-llama/Llama-3.1-8B-Instruct
      --host 0.0.0.0
      --port 30000
    ipc: host
"""

BLOCK_LIST = """\
services:
  vllm:
    image: vllm/vllm-openai:latest
    command:
      - --model
      - "Qwen/Qwen2.5-7B-Instruct"
      - --max-num-seqs
      - "16"
      - --enforce-eager
"""


def _service(text: str) -> dict:
    return next(iter(yaml.safe_load(text)["services"].values()))


def _words(part) -> list[str]:
    if part is None:
        return []
    return list(part) if isinstance(part, list) else shlex.split(part)


def argv(text: str) -> list[str]:
    """The argv compose starts (entrypoint words, then command words); a `sh -c`
    script is run by bash with `python3` printing the words it gets."""
    svc = _service(text)
    words = _words(svc.get("entrypoint")) + _words(svc.get("command"))
    if len(words) >= 3 and words[0].endswith("sh") and words[1] == "-c":
        stub = "python3() { printf '%s\\n' \"$@\"; }; cd() { :; }; "
        script = words[2].replace("$$", "$")
        run = subprocess.run(["bash", "-c", stub + script], capture_output=True, text=True,
                             env={"LLM_MODEL_ID": "m", "PATH": "/usr/bin:/bin"}, check=True)
        return run.stdout.splitlines()
    return words


def fmt(text: str):
    name = next(iter(yaml.safe_load(text)["services"]))
    return get_format("yaml-map", key_path=f"services.{name}.command")


def flags(words: list[str]) -> dict[str, str | None]:
    """argparse's view, last occurrence wins (`--x=v`, `--x v`, a bare switch)."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            k, _, v = w.partition("=")
            out[k] = v
        elif w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            if nxt is not None and not nxt.startswith("--"):
                out[w] = nxt
                i += 1
            else:
                out[w] = None
        i += 1
    return out


SHAPES = {"flow": FLOW, "folded": FOLDED, "sglang": SGLANG, "block list": BLOCK_LIST,
          "| block": COMPOSE_ENV_LIST, "sh -c": COMPOSE_ENV_MAP}


@pytest.mark.parametrize("shape", SHAPES)
def test_parse_reads_the_argv_compose_starts(shape):
    text = SHAPES[shape]
    seen = {k: v for k, v in flags(argv(text)).items() if v is not None and k != "--model"
            and k != "--model-path"}
    parsed = fmt(text).parse(text)
    assert {k: parsed[k] for k in seen} == seen


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("knob", "value"), [("--max-num-seqs", "128"), ("--port", "8001")])
def test_set_changes_what_compose_starts_and_unset_restores_bytes(shape, knob, value):
    text = SHAPES[shape]
    f = fmt(text)
    out = f.set(text, knob, value)
    before, after = flags(argv(text)), flags(argv(out))
    assert after[knob] == value
    assert {k: v for k, v in after.items() if k != knob} == \
        {k: v for k, v in before.items() if k != knob}
    if knob not in before:
        assert f.unset(out, knob) == text
    else:
        assert f.set(out, knob, before[knob]) == text


@pytest.mark.parametrize("shape", ["flow", "block list", "folded"])
def test_a_switch_is_added_and_removed(shape):
    text = SHAPES[shape]
    f = fmt(text)
    out = f.set(text, "--enable-prefix-caching", "true")
    assert "--enable-prefix-caching" in argv(out)
    assert f.unset(out, "--enable-prefix-caching") == text


def test_unset_of_a_present_switch_removes_it():
    out = fmt(BLOCK_LIST).unset(BLOCK_LIST, "--enforce-eager")
    assert "--enforce-eager" not in argv(out) and out != BLOCK_LIST


def test_a_flag_given_twice_is_noted_with_both_lines_and_the_last_is_edited():
    text = BLOCK_LIST.replace("      - --enforce-eager\n",
                              "      - --max-num-seqs\n      - \"32\"\n")
    f = fmt(text)
    note = " ".join(f.summary(text).notes)
    assert "--max-num-seqs is given 2 times" in note and "lines 7, 9" in note
    out = f.set(text, "--max-num-seqs", "64")
    assert flags(argv(out))["--max-num-seqs"] == "64"


def test_values_compose_would_interpolate_are_refused():
    with pytest.raises(FormatError, match="interpolates"):
        fmt(FLOW).set(FLOW, "--served-model-name", "${NAME}")


def test_a_string_command_with_shell_operators_is_refused_with_its_line():
    text = FOLDED.replace("      --max-model-len 8192\n", "      --max-model-len 8192 && echo x\n")
    with pytest.raises(FormatError, match=r"line 6: .*'&&'"):
        fmt(text).set(text, "--max-num-seqs", "1")


def test_an_env_name_is_refused_pointing_at_environment():
    with pytest.raises(FormatError, match="services.vllm.environment"):
        fmt(FLOW).set(FLOW, "VLLM_USE_V1", "1")


def test_summary_names_each_flag_on_its_line():
    s = fmt(FOLDED).summary(FOLDED)
    lines = {k.knob: k.places[0].line for k in s.knobs}
    assert lines == {"--model": 7, "--gpu-memory-utilization": 8, "--max-model-len": 9}


def test_record_revert_restore_through_the_cli(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "compose.yaml"
    f.write_text(SGLANG)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "sg", str(f), "--format", "yaml-map",
               "--key-path", "services.sglang.command")
    assert r.exit_code == 0, r.stderr
    for i, step in enumerate([("--port=30001",), ("--mem-fraction-static=0.8",)]):
        r = ledger(*C, "record", "flag", "sg", *step, "--class", "perf", "--title", f"s{i}")
        assert r.exit_code == 0, r.stderr
    applied = f.read_text()
    got = flags(argv(applied))
    assert got["--port"] == "30001" and got["--mem-fraction-static"] == "0.8"
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == SGLANG
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied


INTERPOLATED = """\
services:
  vllm:
    image: vllm/vllm-openai:latest
    command: ["--model", "x", "--max-num-seqs", "${MAX_SEQS:-128}"]
"""


def test_a_flag_compose_interpolates_is_computed_and_unset_really_removes_it():
    f = fmt(INTERPOLATED)
    place = f.summary(INTERPOLATED).get("--max-num-seqs").places[0]
    assert place.computed and place.line == 4
    out = f.unset(INTERPOLATED, "--max-num-seqs")
    assert "--max-num-seqs" not in argv(out)


def test_unset_of_a_shell_computed_flag_in_sh_c_removes_it():
    out = fmt(COMPOSE_ENV_MAP).unset(COMPOSE_ENV_MAP, "--model")
    assert "--model" not in argv(out) and "--port" in argv(out)


SH_C_LIST = """\
services:
  vllm:
    image: vllm/vllm-openai:latest
    entrypoint: ["/bin/bash", "-c"]
    command:
      - |
        python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B \\
          --max-num-seqs 32 \\
          --port 8000
"""


def test_a_bash_c_block_in_a_list_is_edited_by_the_bash_reader():
    f = fmt(SH_C_LIST)
    out = f.set(SH_C_LIST, "--max-num-seqs", "64")
    assert flags(argv(out))["--max-num-seqs"] == "64" and flags(argv(out))["--port"] == "8000"
    assert f.set(out, "--max-num-seqs", "32") == SH_C_LIST
    added = f.set(SH_C_LIST, "--enable-prefix-caching", "true")
    assert "--enable-prefix-caching" in argv(added)
    assert f.unset(added, "--enable-prefix-caching") == SH_C_LIST


def test_a_switch_unset_from_a_flow_list_goes_back_in_its_place(tmp_path, ledger):
    text = FLOW.replace('"--tensor-parallel-size"', '"--enforce-eager", "--tensor-parallel-size"')
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "compose.yaml"
    f.write_text(text)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "v", str(f), "--format", "yaml-map",
               "--key-path", "services.vllm.command")
    assert r.exit_code == 0, r.stderr
    r = ledger(*C, "record", "flag", "v", "--enforce-eager", "--unset", "--class", "perf",
               "--title", "graphs")
    assert r.exit_code == 0, r.stderr
    unset = f.read_text()
    assert "--enforce-eager" not in argv(unset) and "--tensor-parallel-size" in argv(unset)
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == text
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == unset


def test_a_switch_unset_from_a_helm_flow_list_goes_back_in_its_place(tmp_path, ledger):
    """production-stack's `vllmConfig.extraArgs` flow list: the first item removed and
    reverted comes back first (byte-identical), not at the list's end."""
    from tests.envknobs.foreign_shapes import HELM_VALUES

    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "values.yaml"
    f.write_text(HELM_VALUES)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "helm", str(f), "--format", "yaml-map", "--flags", "vllm",
               "--key-path", "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs")
    assert r.exit_code == 0, r.stderr
    r = ledger(*C, "record", "flag", "helm", "--disable-log-requests", "--unset", "--class",
               "perf", "--title", "log requests")
    assert r.exit_code == 0, r.stderr
    assert "--disable-log-requests" not in f.read_text()
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == HELM_VALUES


def test_a_flag_unset_from_a_string_command_goes_back_in_its_place(tmp_path, ledger):
    text = SGLANG.replace("--model-path meta-llama/Llama-3.1-8B-Instruct\n",
                          "--model-path meta-llama/Llama-3.1-8B-Instruct --enable-metrics\n")
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "compose.yaml"
    f.write_text(text)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "sg", str(f), "--format", "yaml-map",
               "--key-path", "services.sglang.command")
    assert r.exit_code == 0, r.stderr
    for knob in ("--enable-metrics", "--host"):
        r = ledger(*C, "record", "flag", "sg", knob, "--unset", "--class", "perf",
                   "--title", knob)
        assert r.exit_code == 0, r.stderr
    unset = f.read_text()
    assert "--enable-metrics" not in argv(unset) and "--host" not in argv(unset)
    assert "--port" in argv(unset)
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == text


QUOTED_SCRIPT = """\
services:
  sglang:
    image: lmsysorg/sglang:latest
    command: >
      sh -c "python3 -m sglang.launch_server
      --model-path Qwen/Qwen2.5-7B-Instruct
      --tp 2
      --port 30000"
"""


@pytest.mark.parametrize(("knob", "value", "want"), [
    ("--tp", "4", {"--tp": "4"}), ("--port", None, {}), ("--enable-metrics", "true",
                                                         {"--enable-metrics": None})])
def test_a_quoted_sh_c_script_over_several_lines_is_edited_in_place(knob, value, want):
    """OPEA-style `sh -c "..."` folded over lines: only the changed line moves."""
    f = fmt(QUOTED_SCRIPT)
    out = f.set(QUOTED_SCRIPT, knob, value) if value else f.unset(QUOTED_SCRIPT, knob)
    got = flags(argv(out))
    assert all(got.get(k, "absent") == v for k, v in want.items()) and (value or knob not in got)
    before, after = QUOTED_SCRIPT.splitlines(), out.splitlines()
    assert len([ln for ln in after if ln not in before]) <= 1
    # (a removed last line hands its closing quote to the line before it)
    assert len([ln for ln in before if ln not in after]) <= (1 if value else 2)
    assert len(after) == len(before) - (0 if value else 1)
    if value == "4":
        assert f.set(out, knob, "2") == QUOTED_SCRIPT
    if value == "true":
        assert f.unset(out, knob) == QUOTED_SCRIPT
