"""`ledger` on a real terminal (issue 53): commands run as the console script under a
pseudo-terminal (python's ``pty``), as a person sees them.

What a person must never see: a colour's escape code printed as text (``\\x1b[32m``), a
CHANGE value cut where the answer is (the default, the new value), lines wider than the
terminal.  Colour only where allowed: a terminal, unless ``NO_COLOR`` or ``--color never``;
``--color always`` even into a pipe.  Piped output and ``--json``: no colour, nothing cut.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

LEDGER = str(Path(sys.executable).parent / "ledger")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"
# A value long enough that any fixed cell width would cut it.
LONG = "decode-kernel-" + "x" * 90


def run_tty(args, env: dict | None = None, columns: int = 200, rows: int = 50) -> str:
    """``ledger ARGS`` with stdin/stdout/stderr on a pseudo-terminal of that size; all it
    wrote, with the terminal's CRLF made LF."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS",
                                                                 "LEDGER_WORKSPACE")}
    full_env.update(env or {})
    proc = subprocess.Popen([LEDGER, *map(str, args)], stdin=slave, stdout=slave, stderr=slave,
                            env=full_env, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 120
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
        if time.monotonic() > deadline:
            proc.kill()
            break
    os.close(master)
    assert proc.wait(timeout=60) == 0, b"".join(chunks).decode("utf-8", "replace")
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def run_piped(args, env: dict | None = None) -> str:
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "LEDGER_WORKSPACE")}
    full_env.update(env or {})
    done = subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True,
                          env=full_env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def ws(story, ledger):
    """Reverted, applied and cleared entries, one with a value no cell width holds."""
    a = story.args
    for args in (
        ("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
         "CTAS 512 for decode", "--already-reverted", "--reverted-when", "2026-12-02T14:14"),
        ("record", "knob", "decode", f"SGLANG_DECODE_KERNEL={LONG}", "--class", "bugfix",
         "--title", "pin the decode kernel", "--no-validate"),
        ("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8", "--class", "perf",
         "--title", "queue depth 8"),
    ):
        r = ledger(*a(*args))
        assert r.exit_code == 0, r.stderr
    return story


def visible(text: str) -> str:
    return ANSI.sub("", text)


@pytest.mark.parametrize("command", ["status", "list"])
def test_on_a_terminal_colour_is_colour_never_escape_codes_as_text(ws, command):
    out = run_tty(ws.args(command))
    assert "\\x1b" not in out and "\\033" not in out, out
    assert "\x1b[" in out  # a terminal, no NO_COLOR: the states are coloured
    shown = visible(out)
    assert "\x1b" not in shown
    # the STATE column lines up: the padding is measured on the text, not the codes
    header = shown.splitlines()[0]
    state_col = header.index("STATE")
    for line in shown.splitlines()[1:]:
        if line[:8].strip() and re.match(r"[0-9a-f]{8}  ", line):
            assert line[state_col:].split()[0] in ("applied", "reverted", "suspected",
                                                   "cleared"), line


@pytest.mark.parametrize("command", ["status", "list"])
def test_a_wide_terminal_shows_every_change_whole(ws, command):
    shown = visible(run_tty(ws.args(command), env={"COLUMNS": "200"}, columns=200))
    assert f"{CTAS}: 256 -> 512" in shown
    assert f"SGLANG_DECODE_KERNEL: unset -> {LONG}" in shown  # 125 characters, whole
    assert "…" not in shown


@pytest.mark.parametrize("command", ["status", "list"])
def test_a_narrow_terminal_wraps_the_change_and_never_overflows(ws, command):
    shown = visible(run_tty(ws.args(command), columns=100))
    lines = shown.splitlines()
    assert all(len(line) <= 100 for line in lines), "\n".join(lines)
    assert CTAS + ":" in shown  # the knob's name whole, never cut
    # the long value is wrapped onto more lines of its column, all of it there
    header = lines[0]
    start = header.index("CHANGE")
    end = header.index("LIVE" if command == "status" else "EVIDENCE")
    rows, current = [], None
    for line in lines[1:]:
        if re.match(r"[0-9a-f]{8}  ", line):
            current = []
            rows.append(current)
        if current is not None:
            current.append(line[start:end].strip())
    changes = [" ".join(r).replace(" ", "") for r in rows]
    assert f"SGLANG_DECODE_KERNEL:unset->{LONG}" in changes, changes
    assert f"{CTAS}:256->512" in changes, changes


def test_no_color_and_the_color_option(ws):
    assert "\x1b" not in run_tty(ws.args("status"), env={"NO_COLOR": "1"})
    assert "\x1b" not in run_tty(["--color", "never", *ws.args("status")])
    assert "\x1b[" in run_tty(["--color", "auto", *ws.args("status")])
    # piped: no colour unless asked for, and nothing cut
    piped = run_piped(ws.args("list"))
    assert "\x1b" not in piped and "…" not in piped and LONG in piped
    assert "\x1b[33mreverted\x1b[0m" in run_piped(["--color", "always", *ws.args("list")])
    assert "\x1b" not in run_piped(["--color", "always", "--json", *ws.args("list")])


def test_json_is_the_same_on_a_terminal_and_in_a_pipe(ws):
    import json

    on_tty = json.loads(run_tty(ws.args("list", "--json")))
    piped = json.loads(run_piped(ws.args("list", "--json")))
    assert on_tty == piped
    assert any(r["change"].endswith(LONG) for r in piped)


def test_status_live_on_a_terminal(ws, ledger, tmp_path):
    """The live table: the same cells, coloured on a terminal, never as text."""
    run = tmp_path / "run"
    run.mkdir()
    env = {**os.environ, CTAS: "512", "SGLANG_DISAGGREGATION_QUEUE_SIZE": "8"}
    server = subprocess.Popen(["sleep", "120"], env=env)
    try:
        (run / "decode.pid").write_text(f"{server.pid}\n")
        r = ledger(*ws.args("target", "set", "decode", "--live",
                            f"pid_file={run / 'decode.pid'}"))
        assert r.exit_code == 0, r.stderr
        out = run_tty(ws.args("status", "--live"))
        assert "\\x1b" not in out, out
        shown = visible(out)
        assert "SGLANG_DISAGGREGATION_QUEUE_SIZE" in shown and "KNOB" in shown
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def test_table_cuts_other_columns_first_and_wraps_the_kept_one():
    from ledger.cli.output import table

    change = f"{CTAS}: unset (default 256) -> 512"
    rows = [["cea06552", "a title far too long for a narrow terminal", change]]
    whole = table(rows, ["ID", "TITLE", "CHANGE"], keep=(2,), width=None)
    assert change in whole and "…" not in whole  # a pipe: nothing cut
    fitted = table(rows, ["ID", "TITLE", "CHANGE"], keep=(2,), width=60)
    lines = fitted.splitlines()
    assert all(len(line) <= 60 for line in lines), fitted
    assert "…" in lines[1]  # the title gave way...
    start = lines[0].index("CHANGE")
    assert " ".join(line[start:].strip() for line in lines[1:]) == change  # ...not the change
