"""Issue 25 item 1: launch flags in a container's command:/args:, read and edited.

Each edit is checked by the real readers: PyYAML gives the argv Kubernetes runs, and for
an ``sh -c`` script bash itself expands the script's words (the launcher replaced by a
function printing its arguments).  Bytes outside the change are untouched, and writing
the old value back gives the file byte for byte.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from envknobs.formats import FormatError
from envknobs.formats import get_format
from tests.envknobs.argv_shapes import ALL_IN_COMMAND
from tests.envknobs.argv_shapes import FLOW_ARGS
from tests.envknobs.argv_shapes import SHELL_BLOCK
from tests.envknobs.argv_shapes import SPLIT_TOKENS


def _container(text: str) -> dict:
    return yaml.safe_load(text)["spec"]["template"]["spec"]["containers"][0]


def argv(text: str) -> list[str]:
    """The argv PyYAML reads; for a `sh -c` script, the words bash passes the launcher."""
    c = _container(text)
    words = list(c.get("command") or []) + list(c.get("args") or [])
    if words[:2] in (["/bin/bash", "-c"], ["/bin/sh", "-c"]):
        shim = 'python3() { printf "%s\\n" python3 "$@"; }\nPOD_INDEX=0\n'
        out = subprocess.run(["bash", "-c", shim + words[2]], capture_output=True, text=True,
                             check=True, timeout=30)
        return out.stdout.splitlines()
    return [str(w) for w in words]


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    a, b = before.splitlines(), after.splitlines()
    return [x for x in a if x not in b], [x for x in b if x not in a]


CASES = [
    # (text, container, flag, value, argv before -> after, as a list of the flag's words)
    (SPLIT_TOKENS, "sglang", "--tp", "2", ["--tp", "1"], ["--tp", "2"]),
    (SPLIT_TOKENS, "sglang", "--mem-fraction-static", "0.9",
     ["--mem-fraction-static", "0.85"], ["--mem-fraction-static", "0.9"]),
    (SPLIT_TOKENS, "sglang", "--model-path", "/models/llama",
     ["--model-path=meta-llama/Llama-3.1-8B-Instruct"], ["--model-path=/models/llama"]),
    (SPLIT_TOKENS, "sglang", "--cuda-graph-max-bs", "256", [], ["--cuda-graph-max-bs", "256"]),
    (SPLIT_TOKENS, "sglang", "--disable-radix-cache", "true", [], ["--disable-radix-cache"]),
    (SHELL_BLOCK, "sglang-container", "--tensor-parallel-size", "8",
     ["--tensor-parallel-size", "16"], ["--tensor-parallel-size", "8"]),
    (SHELL_BLOCK, "sglang-container", "--cuda-graph-max-bs", "128", [],
     ["--cuda-graph-max-bs", "128"]),
    (ALL_IN_COMMAND, "vllm-openai", "--port", "9000", ["--port", "8000"], ["--port", "9000"]),
    (ALL_IN_COMMAND, "vllm-openai", "--max-num-seqs", "32", [], ["--max-num-seqs", "32"]),
    (FLOW_ARGS, "vllm", "--max-num-seqs", "32", ["--max-num-seqs=64"], ["--max-num-seqs=32"]),
    (FLOW_ARGS, "vllm", "--gpu-memory-utilization", "0.9", [],
     ["--max-num-seqs=64", "--enforce-eager", "--gpu-memory-utilization=0.9"]),
]


def _has_run(words: list[str], run: list[str]) -> bool:
    return any(words[i : i + len(run)] == run for i in range(len(words) - len(run) + 1))


@pytest.mark.parametrize(("text", "container", "flag", "value", "old", "new"), CASES)
def test_set_changes_the_argv_a_real_reader_sees(text, container, flag, value, old, new):
    fmt = get_format("k8s", container=container)
    before = argv(text)
    assert not old or _has_run(before, old)
    out = fmt.set(text, flag, value)
    after = argv(out)
    assert _has_run(after, new), after
    assert fmt.parse(out)[fmt.canonical(out, flag)] == value
    # nothing else moved: the words outside the flag are the same, in order
    rest = [w for w in after if w not in new]
    assert rest == [w for w in before if w not in old and w not in new]
    removed, _ = changed_lines(text, out)
    assert len(removed) <= 1
    # back: the old value in place again is the file byte for byte; a new flag unset too
    back = fmt.set(out, flag, fmt.parse(text)[fmt.canonical(text, flag)]) if old else \
        fmt.unset(out, flag)
    assert back == text


def test_unset_of_a_switch_present_in_args_removes_it():
    fmt = get_format("k8s", container="sglang")
    assert fmt.parse(SPLIT_TOKENS)["--enable-metrics"] == "true"
    out = fmt.unset(SPLIT_TOKENS, "--enable-metrics")
    assert "--enable-metrics" not in argv(out) and "--enable-metrics" not in fmt.parse(out)
    assert changed_lines(SPLIT_TOKENS, out) == (["            - --enable-metrics   # scraped by prometheus"], [])
    out = fmt.unset(SPLIT_TOKENS, "--mem-fraction-static")  # a flag and its value word
    assert "--mem-fraction-static" not in argv(out) and "0.85" not in argv(out)


def test_reading_follows_argparse_last_occurrence_wins():
    text = SPLIT_TOKENS.replace("            - --mem-fraction-static\n",
                                "            - --tp=4\n            - --mem-fraction-static\n")
    fmt = get_format("k8s", container="sglang")
    assert fmt.parse(text)["--tp-size"] == "4"
    out = fmt.set(text, "--tp", "8")  # the occurrence that takes effect
    assert "--tp=8" in argv(out) and _has_run(argv(out), ["--tp", "1"])  # the dead one stays
    out = fmt.unset(text, "--tp")  # every occurrence: no earlier one comes back to life
    assert "--tp" not in " ".join(argv(out))


def test_an_env_knob_the_script_sets_is_refused_not_shadowed():
    text = SHELL_BLOCK.replace("        - |\n", "        - |\n          export NCCL_DEBUG=WARN\n")
    fmt = get_format("k8s", container="sglang-container")
    with pytest.raises(FormatError, match="NCCL_DEBUG is also set by the shell script"):
        fmt.set(text, "NCCL_DEBUG", "INFO")


def test_a_string_args_is_named_when_a_flag_is_edited():
    text = FLOW_ARGS.replace('args: ["Qwen/Qwen2.5-7B-Instruct", "--max-num-seqs=64", "--enforce-eager"]',
                             'args: "--max-num-seqs=64"')
    fmt = get_format("k8s", container="vllm")
    assert "--max-num-seqs" not in fmt.parse(text)
    with pytest.raises(FormatError, match="args of container vllm is not a list"):
        fmt.set(text, "--max-num-seqs", "32")


@pytest.mark.parametrize(("text", "container", "expected"), [
    (SPLIT_TOKENS, "sglang", {"--tp-size": "            - --tp",
                              "--enable-metrics": "            - --enable-metrics   # scraped by prometheus",
                              "SGLANG_ENABLE_TORCH_COMPILE": "            - name: SGLANG_ENABLE_TORCH_COMPILE"}),
    (SHELL_BLOCK, "sglang-container", {"--tp-size": "          --tensor-parallel-size 16 \\",
                                       "--enable-metrics": "          --enable-metrics"}),
])
def test_summary_gives_each_knob_and_flag_its_line(text, container, expected):
    """`target show` fills LINES for k8s targets: the line each one takes effect on."""
    summary = get_format("k8s", container=container).summary(text)
    lines = text.splitlines()
    for knob, line_text in expected.items():
        (place,) = summary.get(knob).places
        assert lines[place.line - 1] == line_text, knob


ONE_LINE_SCRIPT = """\
apiVersion: v1
kind: Pod
metadata:
  name: vllm
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:latest
      command: ["/bin/sh", "-c", "vllm serve Qwen/Qwen2.5-7B --max-num-seqs 64 --port 8000"]
"""


def test_a_one_line_sh_c_string_is_read_and_edited_through_the_shell_words():
    fmt = get_format("k8s", container="vllm")
    assert fmt.parse(ONE_LINE_SCRIPT)["--max-num-seqs"] == "64"
    out = fmt.set(ONE_LINE_SCRIPT, "--max-num-seqs", "32")
    script = yaml.safe_load(out)["spec"]["containers"][0]["command"][2]
    assert script == "vllm serve Qwen/Qwen2.5-7B --max-num-seqs 32 --port 8000"
    out = fmt.set(out, "--enforce-eager", "true")
    words = subprocess.run(["bash", "-c", 'vllm() { printf "%s\\n" "$@"; }\n'
                            + yaml.safe_load(out)["spec"]["containers"][0]["command"][2]],
                           capture_output=True, text=True, check=True).stdout.split()
    assert "--enforce-eager" in words and words[words.index("--max-num-seqs") + 1] == "32"
    assert fmt.unset(fmt.set(out, "--max-num-seqs", "64"), "--enforce-eager") == ONE_LINE_SCRIPT


def test_container_like_specs_without_a_containers_list():
    """Dynamo's extraPodSpec.mainContainer (a `sh -c` script of `python3 -m dynamo.vllm`,
    which takes vLLM's flags) and KServe's predictor.model (args and env) are containers."""
    from tests.envknobs.argv_shapes import DYNAMO_GRAPH
    from tests.envknobs.argv_shapes import KSERVE_PREDICTOR

    worker = get_format("k8s", container="1:spec.services.VllmDecodeWorker.extraPodSpec.mainContainer")
    assert worker.parse(DYNAMO_GRAPH) == {"--model": "Qwen/Qwen3-0.6B", "--max-num-seqs": "64"}
    out = worker.set(DYNAMO_GRAPH, "--max-num-seqs", "32")
    main = yaml.safe_load(out)["spec"]["services"]["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]
    assert main["args"] == ["python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --max-num-seqs 32"]
    assert worker.set(out, "--max-num-seqs", "64") == DYNAMO_GRAPH

    model = get_format("k8s", container="1:spec.predictor.model")
    assert model.parse(KSERVE_PREDICTOR)["VLLM_LOGGING_LEVEL"] == "INFO"
    assert model.parse(KSERVE_PREDICTOR)["--max-model-len"] == "4096"
    out = model.set(model.set(KSERVE_PREDICTOR, "--max-model-len", "8192"), "VLLM_LOGGING_LEVEL", "DEBUG")
    spec = yaml.safe_load(out)["spec"]["predictor"]["model"]
    assert "--max-model-len=8192" in spec["args"]
    assert {e["name"]: e.get("value") for e in spec["env"]}["VLLM_LOGGING_LEVEL"] == "DEBUG"
    back = model.set(model.set(out, "--max-model-len", "4096"), "VLLM_LOGGING_LEVEL", "INFO")
    assert back == KSERVE_PREDICTOR


def test_unset_of_a_flag_the_script_computes_removes_it():
    """`--model $MODEL` in an `sh -c` script: the value is computed (absent from parse),
    yet the flag is there; --unset removes it instead of 'nothing to do'."""
    text = ONE_LINE_SCRIPT.replace("Qwen/Qwen2.5-7B --max-num-seqs 64",
                                   "--model $MODEL --max-num-seqs 64")
    fmt = get_format("k8s", container="vllm")
    assert "--model" not in fmt.parse(text)
    out = fmt.unset(text, "--model")
    script = yaml.safe_load(out)["spec"]["containers"][0]["command"][2]
    assert script == "vllm serve --max-num-seqs 64 --port 8000"


FOLDED_SCRIPT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang-decode
spec:
  template:
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:latest
          command: ["/bin/sh", "-c"]
          args:
            - >
              python3 -m sglang.launch_server
              --model-path Qwen/Qwen2.5-7B-Instruct
              --tp-size 2
              --port 30000
"""


def _folded_words(text: str) -> list[str]:
    """The words bash passes the launcher of the folded script (as PyYAML folds it)."""
    (script,) = _container(text)["args"]
    return subprocess.run(["bash", "-c", 'python3() { printf "%s\\n" "$@"; }\n' + script],
                          capture_output=True, text=True, check=True, timeout=30).stdout.split()


def test_a_folded_script_is_read_with_each_flags_line():
    """A `- >` block under `sh -c`: YAML folds it into one line, which bash runs; the
    flags are read from those words and shown on the lines they are written on."""
    words = _folded_words(FOLDED_SCRIPT)
    fmt = get_format("k8s", container="sglang")
    flags = {k: v for k, v in fmt.parse(FOLDED_SCRIPT).items() if k.startswith("--")}
    assert flags == dict(zip(words[2::2], words[3::2]))
    lines = FOLDED_SCRIPT.splitlines()
    for knob in flags:
        (place,) = fmt.summary(FOLDED_SCRIPT).get(knob).places
        assert lines[place.line - 1].strip().startswith(knob)


@pytest.mark.parametrize(("flag", "value", "run", "gone"), [
    ("--tp-size", "4", ["--tp-size", "4"], ["2"]),
    ("--cuda-graph-max-bs", "128", ["--cuda-graph-max-bs", "128"], []),
    ("--port", None, [], ["--port", "30000"]),
    ("--model-path", None, [], ["--model-path", "Qwen/Qwen2.5-7B-Instruct"]),
])
def test_a_folded_script_is_edited_where_its_words_are_written(flag, value, run, gone):
    fmt = get_format("k8s", container="sglang")
    out = fmt.set(FOLDED_SCRIPT, flag, value) if value else fmt.unset(FOLDED_SCRIPT, flag)
    before, after = _folded_words(FOLDED_SCRIPT), _folded_words(out)
    assert _has_run(after, run) and not any(w in after for w in gone)
    assert [w for w in after if w not in run] == [w for w in before if w not in gone + run]
    removed, added = changed_lines(FOLDED_SCRIPT, out)
    assert len(removed) <= 1 and len(added) <= 1  # the other lines keep their bytes
    old = fmt.parse(FOLDED_SCRIPT).get(flag)
    if value is not None:
        back = fmt.set(out, flag, old) if old is not None else fmt.unset(out, flag)
        assert back == FOLDED_SCRIPT


def test_a_folded_script_through_the_cli_reverts_byte_identical(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "decode.yaml"
    f.write_text(FOLDED_SCRIPT)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "d", str(f), "--format", "k8s", "--container", "sglang")
    assert r.exit_code == 0, r.stderr
    for i, words in enumerate([("--model-path", "--unset"), ("--tp-size=4",), ("--enable-metrics",)]):
        r = ledger(*C, "record", "flag", "d", *words, "--class", "perf", "--title", f"s{i}")
        assert r.exit_code == 0, r.stderr
    applied = f.read_text()
    assert _folded_words(applied) == ["-m", "sglang.launch_server", "--tp-size", "4", "--port",
                                      "30000", "--enable-metrics"]
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == FOLDED_SCRIPT
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied
