"""Byte-exact edits and reverts of k8s env values in every scalar style, checked by two YAML readers.

For each style a real manifest may hold (plain, single, double, ``$VAR``, numbers,
booleans, empty, multi-line, with a trailing comment): a no-op set is byte-identical;
set → set-with-the-old-source gives the original bytes back; PyYAML (1.1) and ruamel (1.2)
read the written value as exactly the string the container gets; and nothing outside the
selected container's env list changes.
"""

from __future__ import annotations

import io

import pytest
import yaml
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.formats.common.text import holds_flags
from envknobs.formats.yaml.scalar import double_quoted
from envknobs.formats.yaml.scalar import plain_is_string
from envknobs.formats.yaml.scalar import single_quoted

from tests.envknobs.knob_oracles import plain_values

PROPERTY = settings(max_examples=40, derandomize=True, deadline=None)

TEMPLATE = """\
# PD roles; the prefill engine's TARGET is the knob under test
apiVersion: workloads.x-k8s.io/v1alpha2
kind: RoleBasedGroup
metadata:
  name: pd
spec:
  roles:
    - name: prefill
      template:
        spec:
          containers:
            - name: sglang
              env:
                - name: BEFORE
                  value: "1"
                - name: TARGET
                  value:{SRC}
                - name: AFTER
                  value: x   # after
              args: [--port, "8000"]
            - name: patio-runtime
              env:
                - name: TARGET
                  value: same
    - name: decode
      template:
        spec:
          containers:
            - name: sglang
              env:
                - name: TARGET
                  value: other
"""
FMT = get_format("k8s", container="prefill/sglang")
CONT = " " * 20  # continuation lines of a multi-line value

# (source after `value:`, the string the container gets)
CRAFTED = [
    (" $HF_TOKEN", "$HF_TOKEN"),
    (" ${HOME}/x", "${HOME}/x"),
    (" $(POD_IP):6379", "$(POD_IP):6379"),
    (" plain", "plain"),
    (" two words", "two words"),
    (" '512'", "512"),
    (' "512"', "512"),
    (" 512", "512"),
    (" 0.85", "0.85"),
    (" true", "true"),
    (' "no"', "no"),
    (" 'it''s'", "it's"),
    (' "tab\\there"', "tab\there"),
    ("", ""),
    (" ", ""),
    (' ""', ""),
    (" ''", ""),
    (" ~", ""),
    (f" >-\n{CONT}decode\n{CONT}server", "decode server"),
    (f" |-\n{CONT}one line", "one line"),
    (f" first\n{CONT}second", "first second"),
    (f' "quoted\n{CONT}folded"', "quoted folded"),
    ("   spaced", "spaced"),
]
COMMENTS = ["", "   # bugfix: inflight watchdog", " #x"]


def _with_comment(src: str, comment: str) -> str:
    if not comment or src.lstrip().startswith(("|", ">")):
        return src
    if src.strip() == "":
        return " " + comment.lstrip() if comment else src
    return src + comment


# The byte-exact properties below are about the values TARGET holds as itself (strings of
# launch flags: tests/envknobs/test_k8s_env_args.py, and the refusal below).
generated = st.one_of(
    st.text(max_size=12).filter(lambda v: plain_is_string(v) and not holds_flags(v))
    .map(lambda v: (" " + v, v)),
    plain_values.filter(lambda v: single_quoted(v) is not None).map(lambda v: (" " + single_quoted(v), v)),
    plain_values.map(lambda v: (" " + double_quoted(v), v)),
)
sources = st.one_of(st.sampled_from(CRAFTED), generated)


def load_all(text: str, reader: str) -> list:
    if reader == "pyyaml":
        return list(yaml.safe_load_all(text))
    return list(YAML(typ="safe", pure=True).load_all(io.StringIO(text)))


def split_env(text: str, reader: str) -> tuple[list, dict]:
    """(the documents without the selected container's env, that env as name -> value)."""
    docs = load_all(text, reader)
    container = docs[0]["spec"]["roles"][0]["template"]["spec"]["containers"][0]
    env = container.pop("env", None) or []
    return docs, {item["name"]: item["value"] for item in env}


def check_readers(before: str, after: str, expected: dict[str, str]) -> None:
    for reader in ("pyyaml", "ruamel"):
        rest_before, _ = split_env(before, reader)
        rest_after, env = split_env(after, reader)
        assert rest_after == rest_before, reader
        assert env == expected, reader  # each value is exactly that string, typed str


def test_a_value_that_makes_a_string_of_flags_is_refused_naming_the_knob() -> None:
    text = TEMPLATE.replace("{SRC}", " plain")
    with pytest.raises(FormatError, match="^TARGET: the new value is a string of launch flags"):
        FMT.set(text, "TARGET", "--max-num-seqs 256")


def test_crafted_sources_parse_as_intended() -> None:
    for src, value in CRAFTED:
        text = TEMPLATE.replace("{SRC}", src)
        assert FMT.parse(text)["TARGET"] == value, src
        assert FMT.source(text, "TARGET") == src


@PROPERTY
@given(sources, st.sampled_from(COMMENTS), plain_values)
def test_record_then_revert_is_byte_identical(source, comment, new: str) -> None:
    src, old = source
    src = _with_comment(src, comment)
    text = TEMPLATE.replace("{SRC}", src)
    assert FMT.parse(text)["TARGET"] == old
    assert FMT.set(text, "TARGET", old) == text  # no-op save
    kept = FMT.source(text, "TARGET")
    out = FMT.set(text, "TARGET", new)
    expected = {"BEFORE": "1", "TARGET": new, "AFTER": "x"}
    assert FMT.parse(out) == {**expected, "--port": "8000"}  # env, then the argv's flags
    if new != old:
        check_readers(text, out, expected)
        assert out.count("\n") <= text.count("\n")
    assert FMT.set(out, "TARGET", old, source=kept) == text
    if comment and src.strip() and not src.lstrip().startswith(("|", ">")):
        assert comment.strip() in out  # the comment on the line survives the edit


@PROPERTY
@given(sources, plain_values)
def test_restore_after_revert_is_byte_identical(source, new: str) -> None:
    """record → revert → restore → revert: each state's bytes come back exactly."""
    src, old = source
    text = TEMPLATE.replace("{SRC}", src)
    before_src = FMT.source(text, "TARGET")
    applied = FMT.set(text, "TARGET", new)
    after_src = FMT.source(applied, "TARGET")
    reverted = FMT.set(applied, "TARGET", old, source=before_src)
    assert reverted == text
    restored = FMT.set(reverted, "TARGET", new, source=after_src)
    assert restored == applied
    assert FMT.set(restored, "TARGET", old, source=before_src) == text


@PROPERTY
@given(plain_values)
def test_new_knob_then_removal_is_byte_identical_and_read_by_both(value: str) -> None:
    text = TEMPLATE.replace("{SRC}", " $HF_TOKEN")
    out = FMT.set(text, "NEW_KNOB", value)
    check_readers(
        text, out, {"BEFORE": "1", "TARGET": "$HF_TOKEN", "AFTER": "x", "NEW_KNOB": value}
    )
    assert FMT.unset(out, "NEW_KNOB") == text
    # Re-added from its source (a revert of an --unset), it is the same line again.
    source = FMT.source(out, "NEW_KNOB")
    assert FMT.set(text, "NEW_KNOB", value, source=source) == out


def test_a_changed_value_keeps_its_style_where_it_can() -> None:
    text = TEMPLATE.replace("{SRC}", " $HF_TOKEN   # from the vault")
    assert "value: $OTHER_TOKEN   # from the vault" in FMT.set(text, "TARGET", "$OTHER_TOKEN")
    assert 'value: "512"   # from the vault' in FMT.set(text, "TARGET", "512")
    single = TEMPLATE.replace("{SRC}", " 'a'")
    assert "value: 'b c'" in FMT.set(single, "TARGET", "b c")
    assert 'value: "tab\tx"' in FMT.set(single, "TARGET", "tab\tx")  # no single-quoted tabs


@pytest.mark.parametrize(
    "items, expected, number",
    [
        ('- name: A\n  value: "1"\n- name: B\n  value: "2"\n', '  value: "x"\n', '"1"'),
        ("- name: A\n  value: '1'\n- name: B\n  value: '2'\n", "  value: 'x'\n", "'1'"),
        ("- name: A\n  value: a\n- name: B\n  value: b\n", "  value: x\n", '"1"'),
        # Mostly plain: plain where safe, else the quotes the quoted neighbours use.
        ("- name: A\n  value: a\n- name: B\n  value: '2'\n", "  value: x\n", "'1'"),
    ],
)
def test_new_values_take_the_neighbours_style(items: str, expected: str, number: str) -> None:
    indented = "".join("    " + line + "\n" for line in items.splitlines())
    text = f"kind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    env:\n{indented}"
    fmt = get_format("k8s", container="c")
    out = fmt.set(text, "NEW", "x")
    assert out.endswith("    - name: NEW\n    " + expected)
    assert fmt.set(text, "NEW", "1").endswith(f"value: {number}\n")


def test_flow_items_get_a_flow_item() -> None:
    from tests.envknobs.k8s_shapes import LWS_PD

    fmt = get_format("k8s", container="decode/leader/sglang")
    out = fmt.set(LWS_PD, "SGLANG_Y", "on")
    assert '          - {name: SGLANG_SM120_MMA_TARGET_CTAS, value: "512"}\n' \
        '          - {name: SGLANG_Y, value: "on"}\n' in out
    assert fmt.unset(out, "SGLANG_Y") == LWS_PD
    src = fmt.source(LWS_PD, "SGLANG_SM120_MMA_TARGET_CTAS")
    changed = fmt.set(LWS_PD, "SGLANG_SM120_MMA_TARGET_CTAS", "256")
    assert '{name: SGLANG_SM120_MMA_TARGET_CTAS, value: "256"}' in changed
    assert fmt.set(changed, "SGLANG_SM120_MMA_TARGET_CTAS", "512", source=src) == LWS_PD


def test_a_source_that_no_longer_fits_falls_back_to_rendering() -> None:
    text = TEMPLATE.replace("{SRC}", " a")
    # The source of another value (or a mangled one) is not written: the value is rendered.
    assert FMT.set(text, "TARGET", "b", source=" c") == TEMPLATE.replace("{SRC}", " b")
    assert FMT.set(text, "TARGET", "b", source=" 'b") == TEMPLATE.replace("{SRC}", " b")
