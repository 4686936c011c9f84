"""The yaml-map format: engine --config files and env maps at a key path, typed as in the file."""

from __future__ import annotations

import io
import math

import pytest
import yaml
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.formats.yaml.map import key_checker
from envknobs.registry import KnobError

from tests.envknobs.knob_oracles import values

PROPERTY = settings(max_examples=100, derandomize=True, deadline=None)

CONFIG = """\
# sglang --config for the decode servers
model-path: /models/glm-4.6   # weights on the node
tp-size: 8
mem-fraction-static: 0.85
cuda-graph-max-bs: 256
attention-backend: fa3
served-model-name: "glm"
chunked-prefill-size: '8192'
enable-metrics: true
disable-radix-cache: false
cuda-graph-bs: [1, 2, 4, 8]

# scheduler
schedule-policy: lpm
"""

RECIPE = """\
name: glm-pd
model: /models/glm-4.6
prefill_environment:
  SGLANG_DISAGGREGATION_THREAD_POOL_SIZE: "8"
  SGLANG_TIMEOUT_KEEP_ALIVE: "5"   # seconds
decode_environment: {SGLANG_SM120_MMA_TARGET_CTAS: "512", NCCL_DEBUG: 'WARN'}
router:
  environment:
  args: [--policy, cache_aware]
"""

SGLANG = get_format("yaml-map")


def load(text: str, reader: str):
    if reader == "pyyaml":
        return yaml.safe_load(text)
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


def same_value(loaded, value: str) -> bool:
    """Whether a loaded YAML value is what the knob text ``value`` says."""
    if isinstance(loaded, bool):
        return str(loaded).lower() == value.lower()
    if isinstance(loaded, (int, float)):
        return math.isclose(loaded, float(value)) or (math.isinf(loaded) and "inf" in value)
    return loaded == value


def test_parse_reads_scalar_values_as_written() -> None:
    assert SGLANG.parse(CONFIG) == {
        "model-path": "/models/glm-4.6",
        "tp-size": "8",
        "mem-fraction-static": "0.85",
        "cuda-graph-max-bs": "256",
        "attention-backend": "fa3",
        "served-model-name": "glm",
        "chunked-prefill-size": "8192",
        "enable-metrics": "true",
        "disable-radix-cache": "false",
        "schedule-policy": "lpm",
    }


def test_no_op_saves_are_byte_identical() -> None:
    for knob, value in SGLANG.parse(CONFIG).items():
        assert SGLANG.set(CONFIG, knob, value) == CONFIG
    assert SGLANG.unset(CONFIG, "absent-key") == CONFIG


@pytest.mark.parametrize(
    "knob, value, line, kind",
    [
        ("mem-fraction-static", "0.9", "mem-fraction-static: 0.9", float),  # a float stays one
        ("cuda-graph-max-bs", "512", "cuda-graph-max-bs: 512", int),
        ("enable-metrics", "false", "enable-metrics: false", bool),
        ("chunked-prefill-size", "4096", "chunked-prefill-size: '4096'", str),  # quoted stays
        ("served-model-name", "0.85", 'served-model-name: "0.85"', str),
        ("attention-backend", "3", 'attention-backend: "3"', str),  # a string stays a string
        ("attention-backend", "flashinfer", "attention-backend: flashinfer", str),
        ("enable-metrics", "no", 'enable-metrics: "no"', str),  # 1.1 and 1.2 disagree: quoted
        ("tp-size", "0777", 'tp-size: "0777"', str),
        ("tp-size", "auto", "tp-size: auto", str),
        ("model-path", "/m/x y", "model-path: /m/x y   # weights on the node", str),
    ],
)
def test_values_are_typed_as_the_file_has_them(knob, value, line, kind) -> None:
    out = SGLANG.set(CONFIG, knob, value)
    assert line in out.splitlines()
    for reader in ("pyyaml", "ruamel"):
        loaded = load(out, reader)[knob]
        assert isinstance(loaded, kind) and same_value(loaded, value), reader
    old, src = SGLANG.parse(CONFIG)[knob], SGLANG.source(CONFIG, knob)
    assert SGLANG.set(out, knob, old, source=src) == CONFIG


def test_new_keys_go_after_the_last_one_in_the_neighbours_style() -> None:
    out = SGLANG.set(CONFIG, "max-running-requests", "1024")
    assert out == CONFIG + "max-running-requests: 1024\n"
    assert SGLANG.unset(out, "max-running-requests") == CONFIG
    quoted = "A: '1'\nB: '2'\n"
    assert SGLANG.set(quoted, "C", "3") == quoted + "C: '3'\n"


def test_env_maps_at_a_key_path() -> None:
    decode = get_format("yaml-map", key_path="decode_environment")
    assert decode.parse(RECIPE) == {"SGLANG_SM120_MMA_TARGET_CTAS": "512", "NCCL_DEBUG": "WARN"}
    out = decode.set(RECIPE, "SGLANG_SM120_MMA_TARGET_CTAS", "256")
    assert 'decode_environment: {SGLANG_SM120_MMA_TARGET_CTAS: "256", NCCL_DEBUG: \'WARN\'}' in out
    out = decode.set(out, "SGLANG_X", "1")
    assert "NCCL_DEBUG: 'WARN', SGLANG_X: \"1\"}" in out
    assert load(out, "pyyaml")["decode_environment"]["SGLANG_X"] == "1"
    prefill = get_format("yaml-map", key_path="prefill_environment")
    out2 = prefill.set(RECIPE, "SGLANG_Y", "on")
    assert '  SGLANG_TIMEOUT_KEEP_ALIVE: "5"   # seconds\n  SGLANG_Y: "on"\ndecode_env' in out2
    assert prefill.unset(out2, "SGLANG_Y") == RECIPE
    empty = get_format("yaml-map", key_path="router.environment")
    assert empty.parse(RECIPE) == {}
    out3 = empty.set(RECIPE, "K", "v")
    assert "router:\n  environment:\n    K: v\n  args:" in out3
    assert empty.unset(out3, "K") == RECIPE


def test_key_path_errors_name_what_is_there() -> None:
    with pytest.raises(FormatError,
                       match=r"key path 'decode_env' not found \(keys there: name, model"):
        get_format("yaml-map", key_path="decode_env").parse(RECIPE)
    with pytest.raises(FormatError, match="line 2: key path 'model' holds the scalar"):
        get_format("yaml-map", key_path="model").parse(RECIPE)
    with pytest.raises(FormatError, match="2 YAML documents"):
        SGLANG.parse("a: 1\n---\nb: 2\n")
    with pytest.raises(FormatError, match="key a is written twice \\(lines 1 and 3\\)"):
        SGLANG.parse("a: 1\nb: 2\na: 3\n")
    with pytest.raises(FormatError, match="cuda-graph-bs holds a list"):
        SGLANG.set(CONFIG, "cuda-graph-bs", "1")


def test_an_empty_file_takes_its_first_key() -> None:
    assert SGLANG.set("", "tp-size", "2") == "tp-size: 2\n"
    assert SGLANG.set("# config\n", "tp-size", "2") == "# config\ntp-size: 2\n"
    assert SGLANG.unset("tp-size: 2\n", "tp-size") == ""


def test_keys_checked_against_a_catalog() -> None:
    known = {"cuda-graph-max-bs", "mem-fraction-static"}
    check = key_checker(lambda k: k.lstrip("-").replace("_", "-") in known, known)
    fmt = get_format("yaml-map", check_key=check)
    assert "cuda-graph-max-bs: 128" in fmt.set(CONFIG, "cuda-graph-max-bs", "128")
    with pytest.raises(KnobError, match=r"'cuda-graph-max-bz' is not a known server argument "
                       r"\(did you mean cuda-graph-max-bs\?\)"):
        fmt.set(CONFIG, "cuda-graph-max-bz", "128")
    with pytest.raises(KnobError):
        fmt.unset(CONFIG, "nope")


@pytest.mark.parametrize("bad", ["1x", "a b", "a:b", ""])
def test_bad_key_names_are_refused(bad: str) -> None:
    with pytest.raises(KnobError):
        SGLANG.set(CONFIG, bad, "1")


SOURCES = [
    " 0.85", " 256", " true", " fa3", ' "glm"', " '8192'", " ~", "", " ''",
    " /models/x   # weights", " >-\n  folded\n  text", " plain\n  continued", " 'it''s'",
]


@PROPERTY
@given(st.sampled_from(SOURCES), values)
def test_record_then_revert_is_byte_identical(src: str, new: str) -> None:
    text = f"before: 1\nknob:{src}\nafter: x  # end\n"
    old = SGLANG.parse(text)["knob"]
    assert SGLANG.set(text, "knob", old) == text
    kept = SGLANG.source(text, "knob")
    out = SGLANG.set(text, "knob", new)
    assert SGLANG.parse(out) == {"before": "1", "knob": new, "after": "x"}
    for reader in ("pyyaml", "ruamel"):
        doc_before, doc_after = load(text, reader), load(out, reader)
        written = doc_after.pop("knob")
        doc_before.pop("knob")
        assert doc_after == doc_before
        assert same_value(written, new) or (written is None and new == ""), (reader, written)
    assert load(out, "pyyaml")["knob"] == load(out, "ruamel")["knob"]
    assert SGLANG.set(out, "knob", old, source=kept) == text


def test_format_options_belong_to_their_format() -> None:
    with pytest.raises(FormatError, match="only meaningful for yaml-map"):
        get_format("k8s", container="c", key_path="x")
    with pytest.raises(FormatError, match="only meaningful for yaml-map"):
        get_format("dotenv", key_path="x")
    with pytest.raises(FormatError, match="only meaningful for k8s"):
        get_format("yaml-map", container="c")
    with pytest.raises(FormatError, match="invalid YAML path"):
        get_format("yaml-map", key_path="a..b")
    assert get_format("yaml-map", key_path='jobs[0]["env.vars"]').key_path == 'jobs[0]["env.vars"]'


def test_env_maps_write_new_values_as_strings() -> None:
    fmt = get_format("yaml-map", key_path="decode_environment", strings=True)
    recipe = 'decode_environment: {A: "1", B: WARN}\n'
    out = fmt.set(recipe, "C", "512")
    assert out == 'decode_environment: {A: "1", B: WARN, C: "512"}\n'
    assert load(out, "pyyaml")["decode_environment"]["C"] == "512"
    assert fmt.set(recipe, "D", "info") == 'decode_environment: {A: "1", B: WARN, D: info}\n'
