"""Issue 25 items 6 and 7: typed values in YAML maps, and negated keys of a --config file.

PyYAML (and ruamel's 1.2 reader, where it matters) gives the type the engine or the Helm
template sees; every edit goes back byte for byte.
"""

from __future__ import annotations

import pytest
import yaml

from envknobs.formats import FormatError
from envknobs.formats import get_format
from tests.envknobs.helm_shapes import PSTACK

VLLM_CONFIG = "servingEngineSpec.modelSpec[0].vllmConfig"

# a `vllm serve --config` file as vLLM's docs show one, with a negated switch
CONFIG = """\
# vllm serve --config config.yaml
model: meta-llama/Llama-3.1-8B-Instruct
host: "127.0.0.1"
port: 6379
uvicorn-log-level: "info"
no-enable-prefix-caching: true
"""

# a Helm values map whose neighbours are all quoted strings
QUOTED = """\
vllmConfig:
  dtype: "half"
  kvCacheDtype: "auto"
"""


VLLM_ARGS = """\
role:
  name: decode
  vllm_args:
    served_model_name: "llama"
    tokenizer_mode: "hf"
"""


def vllm_config(text: str) -> dict:
    return yaml.safe_load(text)["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]


@pytest.mark.parametrize(("text", "path", "key", "value", "written", "kind"), [
    (PSTACK, VLLM_CONFIG, "maxNumSeqs", "32", "maxNumSeqs: 32", int),
    (QUOTED, "vllmConfig", "maxNumSeqs", "32", "maxNumSeqs: 32", int),  # the catalog says int
    (QUOTED, "vllmConfig", "gpuMemoryUtilization", "0.9", "gpuMemoryUtilization: 0.9", float),
    (QUOTED, "vllmConfig", "enforceEager", "true", "enforceEager: true", bool),
    (QUOTED, "vllmConfig", "servedModelName", "123", 'servedModelName: "123"', str),  # a str flag
    (QUOTED, "vllmConfig", "myReplicas", "3", 'myReplicas: 3', int),  # no evidence: as typed
    ('a:\n  port: "8000"\n  replicas: "2"\n', "a", "workers", "3", 'workers: "3"', str),
    # a `vllm_args` map of server arguments in snake case, as deployment configs keep them
    (VLLM_ARGS, "role.vllm_args", "max_num_seqs", "32", "max_num_seqs: 32", int),
    (VLLM_ARGS, "role.vllm_args", "enable_chunked_prefill", "true",
     "enable_chunked_prefill: true", bool),
])
def test_a_new_value_takes_the_type_the_catalog_or_its_neighbours_say(
        text, path, key, value, written, kind):
    fmt = get_format("yaml-map", key_path=path, strings=True)  # no --flags: the CLI default
    out = fmt.set(text, key, value)
    assert any(ln.strip() == written for ln in out.splitlines()), out
    got = yaml.safe_load(out)
    for step in path.replace("[0]", ".0").split("."):
        got = got[int(step)] if step.isdigit() else got[step]
    assert isinstance(got[key], kind) and str(got[key]).lower() == value.lower()
    assert fmt.unset(out, key) == text


def test_an_existing_scalar_keeps_its_type():
    fmt = get_format("yaml-map", key_path=VLLM_CONFIG, strings=True)
    out = fmt.set(PSTACK, "maxModelLen", "8192")
    assert vllm_config(out)["maxModelLen"] == 8192
    out = fmt.set(PSTACK, "dtype", "float16")
    assert '      dtype: "float16"' in out.splitlines()
    back = fmt.set(out, "dtype", "bfloat16", source=fmt.source(PSTACK, "dtype"))
    assert back == PSTACK


def test_env_vars_in_an_env_map_stay_strings():
    fmt = get_format("yaml-map", key_path="env", strings=True)
    out = fmt.set("env:\n  A: WARN\n", "VLLM_USE_V1", "1")
    assert yaml.safe_load(out)["env"]["VLLM_USE_V1"] == "1"


def test_negated_keys_are_one_argument():
    fmt = get_format("yaml-map", engine="vllm")
    with pytest.raises(FormatError, match="line 6: no-enable-prefix-caching is the same argument"):
        fmt.set(CONFIG, "enable-prefix-caching", "true")
    with pytest.raises(FormatError, match="line 6: no-enable-prefix-caching"):
        fmt.unset(CONFIG, "enable-prefix-caching")  # "already unset" would be false
    out = fmt.set(CONFIG, "no-enable-prefix-caching", "false")
    assert yaml.safe_load(out)["no-enable-prefix-caching"] is False
    assert fmt.set(out, "no-enable-prefix-caching", "true") == CONFIG
    both = CONFIG + "enable-prefix-caching: true\n"
    for knob in ("enable-prefix-caching", "no-enable-prefix-caching"):
        with pytest.raises(FormatError, match="lines 7 and 6: .* written both ways"):
            fmt.set(both, knob, "false")
    assert any("written both ways" in n for n in fmt.summary(both).notes)


def test_through_the_cli_typed_string_and_negated(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    cfg, values = tmp_path / "config.yaml", tmp_path / "values.yaml"
    cfg.write_text(CONFIG)
    values.write_text(PSTACK)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "cfg", str(cfg), "--format", "yaml-map", "--flags",
                  "vllm").exit_code == 0
    assert ledger(*C, "target", "add", "helm", str(values), "--format", "yaml-map",
                  "--key-path", VLLM_CONFIG).exit_code == 0
    r = ledger(*C, "record", "knob", "cfg", "enable-prefix-caching=true", "--class", "perf",
               "--title", "pc")
    assert r.exit_code == 1 and "no-enable-prefix-caching" in r.stderr, r.stderr
    assert cfg.read_text() == CONFIG
    steps = [("cfg", "max-num-seqs=32", []), ("helm", "maxNumSeqs=32", []),
             ("helm", "swapSpace=4", ["--string"])]
    for i, (target, kv, extra) in enumerate(steps):
        r = ledger(*C, "record", "knob", target, kv, *extra, "--class", "perf", "--title", f"t{i}")
        assert r.exit_code == 0, r.stderr
    assert yaml.safe_load(cfg.read_text())["max-num-seqs"] == 32
    applied = values.read_text()
    assert vllm_config(applied)["maxNumSeqs"] == 32 and vllm_config(applied)["swapSpace"] == "4"
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert cfg.read_text() == CONFIG and values.read_text() == PSTACK
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert values.read_text() == applied
    r = ledger(*C, "record", "knob", "cfg", "port", "--string", "--unset", "--class", "perf",
               "--title", "x")
    assert r.exit_code == 2 and "--string" in r.stderr, r.stderr
    (tmp_path / "serve.sh").write_text("export A=1\n")
    assert ledger(*C, "target", "add", "sh", str(tmp_path / "serve.sh"), "--format",
                  "bash").exit_code == 0
    r = ledger(*C, "record", "knob", "sh", "A=2", "--string", "--class", "perf", "--title", "y")
    assert r.exit_code == 2 and "every value is a string" in r.stderr, r.stderr


def test_a_flag_name_is_refused_in_a_config_map_not_written_as_a_dashed_key():
    fmt = get_format("yaml-map", engine="vllm")
    for edit in (lambda: fmt.set(CONFIG, "--max-num-seqs", "32"),
                 lambda: fmt.unset(CONFIG, "--port")):
        with pytest.raises(FormatError, match="it is the key 'max-num-seqs'|it is the key 'port'"):
            edit()


def test_record_flag_on_a_config_file_is_refused_not_written_as_a_dashed_key(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    cfg = tmp_path / "config.yaml"
    cfg.write_text(CONFIG)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "cfg", str(cfg), "--format", "yaml-map", "--flags",
                  "vllm").exit_code == 0
    r = ledger(*C, "record", "flag", "cfg", "--max-num-seqs=32", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and "record knob TARGET max-num-seqs=VALUE" in r.stderr, r.stderr
    assert cfg.read_text() == CONFIG
