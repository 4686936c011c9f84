"""Property: every edit inside a string of flags is what python-dotenv and bash then see.

Random strings of plain flags (``--flag-N VALUE`` pairs), written bare, single- or
double-quoted in a dotenv file and in a script that expands them: setting, adding and
removing a flag gives exactly the argv expected (the string split at blanks, argparse's
last-one-wins), every other byte stays, and a removed flag comes back at its anchor.
"""

from __future__ import annotations

import subprocess

from dotenv import dotenv_values
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats import get_format
from envknobs.formats.common.places import PlaceEdit
from envknobs.registry import TRUE_WORDS

DOTENV = get_format("dotenv")
BASH = get_format("bash")

# (a new unknown flag given "1"/"true" is written as a switch, which reads "true": the
# edit is refused as not verifying -- the bash format's rule, not a string's)
_VALUE = st.from_regex(r"[A-Za-z0-9_.:/-]{1,8}", fullmatch=True).filter(
    lambda v: not v.startswith("-") and v.lower() not in TRUE_WORDS)
_PAIRS = st.lists(st.tuples(st.integers(0, 5), _VALUE), min_size=1, max_size=5)


def _string(pairs) -> str:
    return " ".join(f"--flag-{n} {v}" for n, v in pairs)


def _expected(pairs) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, v in pairs:
        out[f"--flag-{n}"] = v
    return out


def _read_argv(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for flag, value in zip(argv[::2], argv[1::2]):
        out[flag] = value
    return out


def _dotenv_argv(text: str, tmp) -> list[str]:
    path = tmp / "x.env"
    path.write_text(text)
    return dotenv_values(path)["XARGS"].split()


@settings(max_examples=60, deadline=None)
@given(pairs=_PAIRS, quote=st.sampled_from(["", "'", '"']), n=st.integers(0, 6),
       value=_VALUE)
def test_dotenv_string_edits_read_back(tmp_path_factory, pairs, quote, n, value):
    tmp = tmp_path_factory.mktemp("p")
    text = f"HF_HOME=/hf\nXARGS={quote}{_string(pairs)}{quote}\nB=2\n"
    flag = f"--flag-{n}"
    want = _expected(pairs)
    out = DOTENV.set(text, flag, value)
    assert _read_argv(_dotenv_argv(out, tmp)) == {**want, flag: value}
    assert out.splitlines()[0] == "HF_HOME=/hf" and out.splitlines()[2] == "B=2"
    if flag in want and [k for k, _ in pairs].count(n) == 1 and len(want) > 1:
        place = DOTENV.knob(text, flag).places[0]
        gone = DOTENV.unset(text, flag)
        assert _read_argv(_dotenv_argv(gone, tmp)) == {k: v for k, v in want.items() if k != flag}
        back = DOTENV.edit_places(gone, flag, [PlaceEdit(place.key, want[flag], place.raw,
                                                         place.anchor)])
        assert back == text


@settings(max_examples=25, deadline=None)
@given(pairs=_PAIRS, n=st.integers(0, 6), value=_VALUE)
def test_script_string_edits_are_what_bash_passes(tmp_path_factory, pairs, n, value):
    shim = tmp_path_factory.mktemp("bin") / "vllm"
    shim.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    shim.chmod(0o755)
    script = f'#!/bin/bash\nXARGS="{_string(pairs)}"\n{shim} serve m $XARGS\n'
    flag = f"--flag-{n}"
    if flag not in _expected(pairs):
        return  # a new flag goes on the launch line (test_arg_strings)
    out = BASH.set(script, flag, value)
    argv = subprocess.run(["bash", "-c", out], capture_output=True, text=True, check=True,
                          timeout=30).stdout.splitlines()
    assert _read_argv(argv[2:]) == {**_expected(pairs), flag: value}
    assert out.splitlines()[2:] == script.splitlines()[2:]
