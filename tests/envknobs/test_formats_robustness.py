"""Every format, fed odd files: it either does exactly what it says or refuses with FormatError.

``parse`` never fails with anything but FormatError; when it succeeds, ``set`` makes the
knob read back as the value and leaves every other knob as it was, and ``unset`` removes
it (or both refuse with FormatError).  PyYAML checks the k8s results independently.
"""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats import FormatError
from envknobs.formats import get_format

FUZZ = settings(
    max_examples=150, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)

SHELLISH = st.lists(
    st.sampled_from(
        list("AK=1 \t\n\r'\"\\$(){}`#;&|<>-~:x")
        + [
            "export ",
            "exec ",
            "unset ",
            "env ",
            "<<EOF\n",
            "EOF\n",
            "\\\n",
            "K=",
            "${",
            "$(",
            "then ",
        ]
    ),
    max_size=40,
).map("".join)


def check_contract(fmt, text: str, knob: str, value: str) -> None:
    try:
        before = fmt.parse(text)
    except FormatError:
        return
    try:
        after = fmt.parse(fmt.set(text, knob, value))
        assert after == {**before, knob: value}
    except FormatError:
        pass
    try:
        after = fmt.parse(fmt.unset(text, knob))
        assert after == {k: v for k, v in before.items() if k != knob}
    except FormatError:
        pass


@FUZZ
@given(
    st.sampled_from(["bash", "dotenv"]),
    SHELLISH,
    st.sampled_from(["K", "A"]),
    st.sampled_from(["1", "a b", "'"]),
)
def test_shell_like_files(name: str, text: str, knob: str, value: str) -> None:
    check_contract(get_format(name), text, knob, value)


def _env_item(name: str, value: str, style: int) -> list[str]:
    return [
        [f"- name: {name}", f"  value: {value}"],
        [f"- {{name: {name}, value: {value}}}"],
        [f"-   name: {name}", f"    value: {value}  # note"],
        [f"- name: {name}", "  value: |", f"    {value}", ""],
    ][style]


@st.composite
def pod_manifests(draw: st.DrawFn) -> tuple[str, str]:
    seq = draw(st.sampled_from(["", "  "]))
    body = f"  {seq}  "
    lines = [
        "kind: Pod",
        "metadata:",
        "  name: p",
        "spec:",
        "  containers:",
        f"  {seq}- name: x",
        body + "image: i",
    ]
    env_kind = draw(st.sampled_from(["none", "empty", "flow", "block", "null"]))
    lines += {
        "empty": [body + "env: []"],
        "null": [body + "env:"],
        "flow": [body + "env: [{name: A, value: '1'}]"],
    }.get(env_kind, [])
    if env_kind == "block":
        lines.append(body + "env:")
        indent = draw(st.sampled_from(["", "  "]))
        for name in draw(st.lists(st.sampled_from(["A", "K", "B"]), min_size=1, max_size=3)):
            value = draw(st.sampled_from(["1", "'q'", '"x y"', "no", "~", ""]))
            lines += [
                body + indent + line if line else ""
                for line in _env_item(name, value, draw(st.integers(0, 3)))
            ]
    if draw(st.booleans()):
        lines += [f"  {seq}- name: y", f"  {seq}  image: j"]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return eol.join(lines) + (eol if draw(st.booleans()) else ""), env_kind


@FUZZ
@given(
    pod_manifests(), st.sampled_from(["K", "A", "Z"]), st.sampled_from(["1", "a b", "'", "no", ""])
)
def test_k8s_env_lists_in_every_style(manifest: tuple[str, str], knob: str, value: str) -> None:
    text, env_kind = manifest
    fmt = get_format("k8s", container="x")
    before = fmt.parse(text)
    out = fmt.set(text, knob, value)
    if before.get(knob) != value:  # a no-op set keeps the file, even `value: 1` unquoted
        env = yaml.safe_load(out)["spec"]["containers"][0]["env"]
        assert {e["name"]: e.get("value") for e in env}[knob] == value
    if knob not in before and env_kind != "null":  # `env:` (null) comes back as no env key
        assert fmt.unset(out, knob) == text
    assert knob not in fmt.parse(fmt.unset(text, knob))
