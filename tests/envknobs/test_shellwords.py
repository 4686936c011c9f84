"""One unquoting loop, two readers of a shell word: bash (a value is computed where bash
expands it) and compose's splitting (quotes and backslashes off, ``$`` is text)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from envknobs.formats.common.shellwords import decode_value
from envknobs.formats.common.shellwords import literal_word

WORDS = ["plain", "'single $x'", '"dq \\$ \\" \\\\ \\a"', "a\\ b", "x'y'\"z\"", "a\\\nb"]


@pytest.mark.parametrize("raw", WORDS)
def test_bash_reads_a_value_as_decode_value_says(raw):
    got = subprocess.run(["bash", "-c", f"v={raw}; printf %s \"$v\""], capture_output=True,
                         text=True, check=True).stdout
    assert decode_value(raw) == got


@pytest.mark.parametrize("raw", ["$HOME", "\"$HOME\"", "`id`", "~/x", "a:~/y"])
def test_what_bash_expands_is_computed(raw):
    assert decode_value(raw) is None


def test_a_glob_is_computed_only_as_a_command_word():
    assert decode_value("a*") == "a*" and decode_value("a*", word=True) is None


@pytest.mark.parametrize("raw", ["plain", "'single $x'", "\"dq \\\" x\"", "a\\ b", "x'y'\"z\""])
def test_compose_splits_a_word_as_shlex_does(raw):
    assert literal_word(raw) == shlex.split(raw)[0]


def test_compose_keeps_dollar_and_takes_every_backslash_off_in_double_quotes():
    # go-shellwords (compose) drops a backslash shlex and bash keep before a plain letter
    assert literal_word('"$HOME \\a"') == "$HOME a"
    assert decode_value('"$HOME \\a"') is None
