"""Hostile workspace files and arguments, through the real CLI: `error:` naming the file,
exit 1, no traceback, nothing changed (issue 12)."""

from __future__ import annotations

import json

import pytest

from tests.store.kit import CTAS
from tests.store.kit import assert_refused
from tests.store.kit import git
from tests.store.kit import run_cli
from tests.store.kit import tree
from tests.store.kit import with_ctas_512


@pytest.fixture
def ws(story, ledger):
    return with_ctas_512(story, ledger)


def picture(story):
    return tree(story.root, story.script), git(story.root, "rev-parse", "HEAD")


def refused_everywhere(story, *fragments, commands=(("status",), ("list",),
                                                    ("revert", "--perf-only"))):
    before = picture(story)
    for command in commands:
        assert_refused(run_cli(story.root, *command), *fragments)
    assert picture(story) == before


def test_non_utf8_byte_in_ledger_yaml(ws):
    cfg = ws.root / "ledger.yaml"
    cfg.write_bytes(cfg.read_bytes() + b"# caf\xe9\n")
    line = cfg.read_bytes().count(b"\n")
    refused_everywhere(ws, f"{cfg}:{line}:", "not valid UTF-8")


def test_non_utf8_byte_in_entries(ws):
    entries = ws.root / "entries.jsonl"
    entries.write_bytes(entries.read_bytes().replace(b'"ctas"', b'"ct\xffas"', 1))
    refused_everywhere(ws, f"{entries}:1:", "not valid UTF-8")


@pytest.mark.parametrize("field,value,says", [
    ("seq", "1e400", "'seq' must be a whole number"),
    ("seq", '"1"', "'seq' must be a whole number"),
    ("seq", "true", "'seq' must be a whole number"),
    ("title", '["x"]', "'title' must be a string"),
    ("anchor", '{"knob": ["x"]}', "anchor knob must be a string"),
    ("anchor", '{"lines": 5}', "anchor lines must be a list of strings"),
    ("anchor", '"below"', "'anchor' must be an object"),
    ("history", '[5]', "history item 1 must be an object"),
])
def test_wrong_typed_entry_fields(ws, field, value, says):
    entries = ws.root / "entries.jsonl"
    data = json.loads(entries.read_text())
    data[field] = "@@"
    entries.write_text(json.dumps(data).replace('"@@"', value) + "\n")
    refused_everywhere(ws, f"{entries}:1:", says)


def test_deeply_nested_yaml(ws):
    cfg = ws.root / "ledger.yaml"
    cfg.write_text("version: 1\nbench: " + "[" * 1500 + "]" * 1500 + "\n")
    refused_everywhere(ws, str(cfg))


@pytest.mark.parametrize("nested", ["[" * 1500 + "]" * 1500, '{"a":' * 1500 + "1" + "}" * 1500])
def test_deeply_nested_json(ws, nested):
    entries = ws.root / "entries.jsonl"
    entries.write_text(entries.read_text() + nested + "\n")
    refused_everywhere(ws, f"{entries}:2:")


def test_bash_nested_command_substitution(ws):
    ws.script.write_text(ws.script.read_text() + "X=" + "$(" * 1200 + ")" * 1200 + "\n")
    before = picture(ws)
    r = run_cli(ws.root, "revert", "--perf-only")
    assert_refused(r, str(ws.script), "nested more than")
    r = run_cli(ws.root, "status")
    assert "Traceback" not in r.stderr and "nested more than" in r.stderr
    assert picture(ws) == before


def test_target_file_with_invalid_utf8(ws):
    text = ws.script.read_bytes().replace(b"# Decode server", b"# D\xe9code server \xff")
    ws.script.write_bytes(text)
    r = run_cli(ws.root, "revert", "--perf-only")
    assert r.returncode == 0, r.stderr
    assert ws.script.read_bytes() == text.replace(f"{CTAS}=512".encode(), f"{CTAS}=256".encode())
    assert run_cli(ws.root, "restore", "--perf-only").returncode == 0
    assert ws.script.read_bytes() == text


def test_invalid_utf8_in_the_value_of_a_knob(ws):
    ws.script.write_bytes(ws.script.read_bytes().replace(b"QUEUE_SIZE=4", b"QUEUE_SIZE=4\xff"))
    before = picture(ws)
    r = run_cli(ws.root, "record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                "--class", "perf", "--title", "q", "--force")
    assert_refused(r, str(ws.script))
    r = run_cli(ws.root, "status")
    assert "Traceback" not in r.stderr
    assert picture(ws) == before


@pytest.mark.parametrize("record", ["[]", '"x"', '{"targets": 5}', "{}", '{"op": 5}',
                                    "not json", '[[[[' * 400])
def test_intent_record_of_the_wrong_shape(ws, record):
    intent = ws.root / ".ledger" / "intent.json"
    intent.write_text(record)
    before = picture(ws)
    r = run_cli(ws.root, "status")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and str(intent) in r.stderr and "ledger doctor" in r.stderr
    r = run_cli(ws.root, "revert", "--perf-only")
    assert_refused(r, str(intent), "ledger doctor")
    assert picture(ws) == before


@pytest.mark.parametrize("args", [
    [b"record", b"knob", b"decode", b"K\xff=1", b"--class", b"perf", b"--title", b"t"],
    [b"record", b"knob", b"decode", b"SGLANG_X=1", b"--class", b"perf", b"--title", b"t\xff"],
    [b"revert", b"--perf-only", b"--why", b"\xfe"],
    [b"target", b"add", b"x\xff", b"/nonexistent", b"--format", b"bash"],
])
def test_non_utf8_arguments(ws, args):
    before = picture(ws)
    assert_refused(run_cli(ws.root, *args), "not valid UTF-8")
    assert picture(ws) == before


def test_wrong_typed_config_values(ws):
    cfg = ws.root / "ledger.yaml"
    cfg.write_text(cfg.read_text().replace("format: bash", "format: [bash]"))
    refused_everywhere(ws, f"{cfg}:", "format must be a string")


def test_a_knob_beside_a_line_that_is_not_utf8_round_trips(ws):
    raw = ws.script.read_bytes().replace(b"export SGLANG_DISAGGREGATION_QUEUE_SIZE",
                                         b"# r\xe9glage\nexport SGLANG_DISAGGREGATION_QUEUE_SIZE")
    ws.script.write_bytes(raw)
    r = run_cli(ws.root, "record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE",
                "--unset", "--class", "perf", "--title", "default queue")
    assert r.returncode == 0, r.stderr
    assert b"QUEUE_SIZE" not in ws.script.read_bytes()
    assert run_cli(ws.root, "revert", "default-queue").returncode == 0
    assert ws.script.read_bytes() == raw
    assert run_cli(ws.root, "status").returncode == 0
