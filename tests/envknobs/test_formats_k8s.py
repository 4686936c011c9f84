"""The k8s target format: surgical edits, checked with YAML 1.1 (PyYAML) and 1.2 (ruamel)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.registry import KnobError
from tests.envknobs.knob_oracles import knob_names
from tests.envknobs.knob_oracles import plain_values
from tests.envknobs.knob_oracles import yaml11_env

PROPERTY = settings(max_examples=30, derandomize=True, deadline=None)

MANIFESTS = """\
# PD pair for GLM: decode + prefill.   A comment line that is deliberately longer than eighty columns.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: decode
  labels: &labels {app: glm, role: decode}
spec:
  template:
    metadata:
      labels: *labels
    spec:
      initContainers:
        - name: warmup
          image: busybox
          command: ["sh", "-c", "echo warming the page cache for /models/glm-4.6 && cat /models/glm-4.6/*.safetensors >/dev/null"]
      containers:
        - name: sglang          # the engine
          image: lmsysorg/sglang:v0.5.5
          env:
            # liveness
            - name: SGLANG_DISAGGREGATION_WAITING_TIMEOUT
              value: "30"   # bugfix: inflight watchdog
            - name: SGLANG_SM120_MMA_TARGET_CTAS
              value: '512'
            - name: HF_TOKEN
              valueFrom:
                secretKeyRef: {name: hf, key: token}
            - name: BANNER
              value: >-
                decode
                server
            - {name: FLOW_ITEM, value: plain}
          args:
            - |
              python -m sglang.launch_server --model-path /models/glm-4.6 --disaggregation-mode decode
          resources: &res
            limits: {nvidia.com/gpu: 4}
        - name: exporter
          image: prom/exporter
          env: []
          resources: *res
---
# second document
apiVersion: batch/v1
kind: CronJob
metadata:
  name: bench
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: bench
            image: bench:1
          - name: sglang
            image: lmsysorg/sglang:v0.5.5
            env:
            - name: ONLY
              value: x
"""

DECODE = get_format("k8s", container="decode/sglang")


def ruamel_safe_env(text: str, workload: str, container: str) -> dict[str, str]:
    """The env as ruamel's safe (YAML 1.2) loader reads it."""
    for doc in YAML(typ="safe", pure=True).load_all(io.StringIO(text)):
        if doc and doc["metadata"]["name"] == workload:
            spec = doc["spec"]
            pod = (
                spec["template"]["spec"]
                if "template" in spec
                else spec["jobTemplate"]["spec"]["template"]["spec"]
            )
            for c in pod["containers"]:
                if c["name"] == container:
                    return {e["name"]: e["value"] for e in c.get("env") or [] if "value" in e}
    raise AssertionError("container not found")


def test_parse_reads_values_and_skips_value_from() -> None:
    assert DECODE.parse(MANIFESTS) == {
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "30",
        "SGLANG_SM120_MMA_TARGET_CTAS": "512",
        "BANNER": "decode server",
        "FLOW_ITEM": "plain",
    }
    assert get_format("k8s", container="bench/sglang").parse(MANIFESTS) == {"ONLY": "x"}
    assert get_format("k8s", container="warmup").parse(MANIFESTS) == {}


def test_no_op_round_trip_is_byte_identical() -> None:
    for selector in ("decode/sglang", "bench/sglang", "exporter", "warmup"):
        fmt = get_format("k8s", container=selector)
        for knob, value in fmt.parse(MANIFESTS).items():
            assert fmt.set(MANIFESTS, knob, value) == MANIFESTS
        assert fmt.unset(MANIFESTS, "ABSENT") == MANIFESTS


def test_set_existing_changes_only_the_value_and_keeps_quote_style() -> None:
    out = DECODE.set(MANIFESTS, "SGLANG_SM120_MMA_TARGET_CTAS", "256")
    assert out == MANIFESTS.replace("value: '512'", "value: '256'")
    out = DECODE.set(MANIFESTS, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "no")
    assert out == MANIFESTS.replace('value: "30"   #', 'value: "no"   #')
    assert yaml11_env(out, "sglang")["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] == "no"


def test_set_block_scalar_and_flow_item() -> None:
    out = DECODE.set(MANIFESTS, "BANNER", "x")
    assert "              value: x\n            - {name: FLOW_ITEM" in out
    out = DECODE.set(out, "FLOW_ITEM", "on")
    assert '- {name: FLOW_ITEM, value: "on"}' in out
    assert ruamel_safe_env(out, "decode", "sglang")["FLOW_ITEM"] == "on"


def test_add_appends_item_with_the_list_indentation() -> None:
    out = DECODE.set(MANIFESTS, "NEW_KNOB", "0777")
    assert (
        "            - {name: FLOW_ITEM, value: plain}\n"
        "            - name: NEW_KNOB\n"
        '              value: "0777"\n'
        "          args:\n"
    ) in out
    assert DECODE.unset(out, "NEW_KNOB") == MANIFESTS


def test_add_creates_env_where_absent_and_fills_flow_lists() -> None:
    bench = get_format("k8s", container="bench/bench")
    out = bench.set(MANIFESTS, "K", "1e3")
    assert "          - name: bench\n            image: bench:1\n            env:\n" in out
    assert '            - name: K\n              value: "1e3"\n' in out
    assert yaml11_env(out, "bench") == {"K": "1e3"}
    assert bench.unset(out, "K") == MANIFESTS
    exporter = get_format("k8s", container="exporter")
    out = exporter.set(MANIFESTS, "A", "~")
    assert 'env: [{name: A, value: "~"}]' in out
    out2 = exporter.set(out, "B", "true")
    assert 'env: [{name: A, value: "~"}, {name: B, value: "true"}]' in out2
    assert exporter.unset(exporter.unset(out2, "B"), "A") == MANIFESTS


def test_crlf_manifest_keeps_its_line_endings() -> None:
    crlf = MANIFESTS.replace("\n", "\r\n")
    out = DECODE.set(crlf, "NEW_KNOB", "v")
    assert "\r\n            - name: NEW_KNOB\r\n              value: v\r\n" in out
    assert "\n" not in out.replace("\r\n", "")
    assert DECODE.unset(out, "NEW_KNOB") == crlf


def test_no_final_newline_is_kept() -> None:
    text = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i"
    fmt = get_format("k8s", container="c")
    out = fmt.set(text, "K", "1")
    assert out == text + '\n    env:\n    - name: K\n      value: "1"'
    assert fmt.unset(out, "K") == text


def test_ambiguous_and_missing_containers_are_named() -> None:
    with pytest.raises(FormatError) as ei:
        get_format("k8s", container="sglang").parse(MANIFESTS)
    msg = str(ei.value)
    assert "'sglang' is ambiguous" in msg
    assert "decode/sglang  (line 17: Deployment/decode)" in msg
    assert "bench/sglang   (line 56: CronJob/bench)" in msg
    with pytest.raises(FormatError) as ei:
        get_format("k8s", container="nope").parse(MANIFESTS)
    msg = str(ei.value)
    assert "container 'nope' not found; the containers in the file are:" in msg
    for address in ("warmup", "decode/sglang", "exporter", "bench", "bench/sglang"):
        assert f"\n  {address} " in msg


def test_value_from_and_anchored_items_are_refused() -> None:
    with pytest.raises(
        FormatError, match="HF_TOKEN in container decode/sglang comes from valueFrom"
    ):
        DECODE.set(MANIFESTS, "HF_TOKEN", "x")
    with pytest.raises(FormatError, match="valueFrom"):
        DECODE.unset(MANIFESTS, "HF_TOKEN")
    shared = (
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: a\n    env: &e\n    - name: K\n      value: '1'\n"
        "  - name: b\n    env: *e\n"
    )
    with pytest.raises(FormatError, match="shared through a YAML anchor"):
        get_format("k8s", container="b").set(shared, "K", "2")
    with pytest.raises(FormatError, match="shared through a YAML anchor"):
        get_format("k8s", container="b").set(shared, "NEW", "2")


def test_invalid_yaml_names_the_line() -> None:
    with pytest.raises(FormatError, match=r"line 4: invalid YAML"):
        DECODE.parse("kind: Pod\nspec:\n  - a\n  b: [\n")


@pytest.mark.parametrize("name", ["A;rm", "1X", "A B"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(KnobError):
        DECODE.set(MANIFESTS, name, "1")


def test_surrogates_and_newlines_are_refused() -> None:
    with pytest.raises(FormatError, match="not valid UTF-8"):
        DECODE.set(MANIFESTS, "K", "a\udcff")
    with pytest.raises(KnobError):
        DECODE.set(MANIFESTS, "K", "a\nb")


@PROPERTY
@given(st.dictionaries(knob_names, plain_values, min_size=1, max_size=4))
def test_written_values_read_back_as_strings_in_yaml_11_and_12(assignments: dict[str, str]) -> None:
    text = MANIFESTS
    for knob, value in assignments.items():
        text = DECODE.set(text, knob, value)
    expected = {**DECODE.parse(MANIFESTS), **assignments}
    assert DECODE.parse(text) == expected
    assert yaml11_env(text, "sglang") == {**expected, "ONLY": "x"}
    assert ruamel_safe_env(text, "decode", "sglang") == expected
    assert text.split("---")[1] == MANIFESTS.split("---")[1]  # other documents untouched


@PROPERTY
@given(knob_names, plain_values, st.sampled_from(["decode/sglang", "exporter", "bench/bench", "warmup"]))
def test_set_then_unset_of_an_absent_knob_restores_the_file(
    knob: str, value: str, selector: str
) -> None:
    fmt = get_format("k8s", container=selector)
    if knob in fmt.parse(MANIFESTS):
        return
    out = fmt.set(MANIFESTS, knob, value)
    assert fmt.parse(out)[knob] == value
    assert fmt.unset(out, knob) == MANIFESTS


@PROPERTY
@given(
    st.sampled_from(
        ["SGLANG_SM120_MMA_TARGET_CTAS", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "FLOW_ITEM"]
    ),
    plain_values,
)
def test_set_existing_touches_only_its_line(knob: str, value: str) -> None:
    out = DECODE.set(MANIFESTS, knob, value)
    before, after = MANIFESTS.split("\n"), out.split("\n")
    assert len(before) == len(after)
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(changed) <= 1
    assert DECODE.parse(out)[knob] == value == yaml11_env(out, "sglang")[knob]


def test_anchored_value_allows_a_no_op_but_not_an_edit() -> None:
    text = (
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: a\n    env:\n    - name: K\n      value: &v '1'\n"
        "  - name: b\n    env:\n    - name: K\n      value: *v\n"
    )
    fmt = get_format("k8s", container="a")
    assert fmt.parse(text) == {"K": "1"}
    assert fmt.set(text, "K", "1") == text
    with pytest.raises(FormatError, match="shared through a YAML anchor"):
        fmt.set(text, "K", "2")
