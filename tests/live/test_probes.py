"""Live probes against real processes: pid files, /proc/*/cmdline regexes (and their
ambiguity), systemd, a process whose environment cannot be read, server_info URLs; and the
knob states of ``status --live`` computed from them."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from ledger.core.service import LiveProbe
from ledger.core.service import parse_service
from ledger.errors import InvalidValue
from ledger.live import probe as p
from ledger.live.status import knob_state


@pytest.fixture
def sleeper(tmp_path):
    procs = []

    def start(tag: str, env: dict | None = None) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag],
                                env={"PATH": "/usr/bin:/bin", **(env or {})})
        procs.append(proc)
        # Until the child has exec'd, /proc shows the forking parent's command line: a
        # probe must see the sleeper, so wait for its own argv (a loaded machine is slow).
        deadline = time.monotonic() + 10
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        while tag.encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_pid_file_probe_reads_environ_and_cmdline(tmp_path, sleeper):
    proc = sleeper("probe-a", {"ENGINE_DECODE_TARGET_CTAS": "64", "EMPTY": ""})
    (tmp_path / "x.pid").write_text(f"{proc.pid}\n")
    obs = p.observe(LiveProbe("pid_file", "x.pid"), tmp_path)
    assert obs.state == p.RUNNING and obs.pid == proc.pid
    assert obs.env["ENGINE_DECODE_TARGET_CTAS"] == "64" and obs.env["EMPTY"] == ""
    assert obs.argv[-1] == "probe-a" and obs.started and obs.source == f"/proc/{proc.pid}"
    proc.kill()
    proc.wait()
    gone = p.observe(LiveProbe("pid_file", "x.pid"), tmp_path)
    assert gone.state == p.NOT_RUNNING and str(proc.pid) in gone.detail
    assert p.observe(LiveProbe("pid_file", "nope.pid"), tmp_path).state == p.NOT_RUNNING


def test_process_regex_finds_one_and_refuses_several_naming_each_pid(tmp_path, sleeper):
    a = sleeper("probe-unique-7f3a")
    obs = p.observe(LiveProbe("process", r"probe-unique-7f3a$"), tmp_path)
    assert obs.state == p.RUNNING and obs.pid == a.pid
    b = sleeper("probe-unique-7f3a")
    deadline = time.monotonic() + 10  # a loaded machine may show the new one late
    while (obs := p.observe(LiveProbe("process", r"probe-unique-7f3a$"), tmp_path)).state \
            != p.AMBIGUOUS and time.monotonic() < deadline:
        time.sleep(0.1)
    assert obs.state == p.AMBIGUOUS and obs.pid is None
    assert f"pid {a.pid}" in obs.detail and f"pid {b.pid}" in obs.detail
    assert p.observe(LiveProbe("process", "no-such-process-x1"), tmp_path).state == p.NOT_RUNNING


def test_an_unreadable_environment_is_reported_with_the_reason(tmp_path):
    try:
        open("/proc/1/environ", "rb").read()
        pytest.skip("this user can read every process's environment")
    except PermissionError:
        pass
    (tmp_path / "init.pid").write_text("1\n")
    obs = p.observe(LiveProbe("pid_file", "init.pid"), tmp_path)
    assert obs.state == p.UNREADABLE and "permission denied" in obs.detail
    assert obs.argv is not None  # the command line still is readable
    row = knob_state(obs, "ENGINE_X", "1", "1")
    assert row.state == "unreadable" and "permission" in row.detail


def test_systemd_probe_runs_systemctl_and_reports_what_it_says(tmp_path):
    obs = p.observe(LiveProbe("systemd", "no-such-unit-for-ledger-tests.service"), tmp_path)
    # Without systemd (a container) systemctl says so; with it the unit has no MainPID.
    assert obs.state in (p.UNREADABLE, p.NOT_RUNNING) and obs.detail


@pytest.fixture
def info_server():
    answers = {}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            status, body = answers.get(self.path, (404, {"error": "no"}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", answers
    httpd.shutdown()


def test_url_probe_reads_server_info_and_knows_what_it_does_not_report(tmp_path, info_server):
    url, answers = info_server
    answers["/server_info"] = (200, {"pid": 42, "start_time": "2026-01-01T00:00:00Z",
                                     "env": {"ENGINE_A": "1", "ENGINE_B": None},
                                     "argv": ["x", "--port", "5"]})
    obs = p.observe(LiveProbe("url", f"{url}/server_info"), tmp_path)
    assert obs.state == p.RUNNING and obs.pid == 42 and obs.env["ENGINE_A"] == "1"
    assert knob_state(obs, "ENGINE_A", "1", "1").state == "live"
    assert knob_state(obs, "ENGINE_B", None, None).state == "live"
    pending = knob_state(obs, "ENGINE_A", "2", "2")
    assert (pending.state, pending.file, pending.process) == ("pending restart", "2", "1")
    assert knob_state(obs, "ENGINE_A", "3", "2").state == "drift"
    unknown = knob_state(obs, "SGLANG_Y", "1", "1")
    assert unknown.state == "unreadable" and "does not report" in unknown.detail
    assert knob_state(obs, "--port", "5", "5").state == "live"  # a launch flag
    assert knob_state(obs, "--port", "6", "6").state == "pending restart"
    assert knob_state(obs, "--verbose", "true", "true").state == "pending restart"
    answers["/bad"] = (200, {"no": "env"})
    assert p.observe(LiveProbe("url", f"{url}/bad"), tmp_path).state == p.UNREADABLE
    dead = p.observe(LiveProbe("url", "http://127.0.0.1:9/server_info"), tmp_path)
    assert dead.state == p.NOT_RUNNING
    assert knob_state(dead, "ENGINE_A", "1", "1").state == "not running"


def test_launch_flags_spelled_as_the_bash_format_reports_them():
    argv = ["python", "-m", "x", "--port", "30", "--mem=0.8", "--flag", "--last"]
    assert p.launch_flags(argv) == {"--port": "30", "--mem": "0.8", "--flag": "true",
                                    "--last": "true"}
    sglang = ["python", "-m", "sglang.launch_server", "--cuda_graph_max_bs", "256",
              "--disable-radix-cache", "extra", "--", "--not-a-flag", "1"]
    flags = p.launch_flags(sglang)
    assert flags["--cuda-graph-max-bs"] == "256" and flags["--disable-radix-cache"] == "true"
    assert "--not-a-flag" not in flags


@pytest.mark.parametrize("spec,message", [
    ({"restart": "systemctl restart x"}, "would need a shell"),
    ({"restart": []}, "non-empty list"),
    ({"live": {"pid_file": "a", "url": "http://x/"}}, "exactly one"),
    ({"live": {"url": "file:///etc/passwd"}}, "not an http"),
    ({"live": {"process": "("}}, "regular expression"),
    ({"health": {"url": "http://h/health", "command": ["true"]}}, "one of them"),
    ({"health": {"url": "http://h/health", "expect": "200"}}, "status code"),
    ({"health": {"command": ["true"], "timeout_s": -1}}, "seconds"),
    ({"shell": True}, "needs a restart command"),
])
def test_service_settings_are_validated(spec, message):
    with pytest.raises(InvalidValue, match=message):
        parse_service(spec, "decode")


def test_service_settings_round_trip():
    spec = {"live": {"pid_file": "run/d.pid"}, "restart": ["a", "b c"],
            "health": {"url": "http://127.0.0.1:1/health", "expect": 204, "timeout_s": 5.0}}
    service = parse_service(spec, "decode")
    assert service.to_dict() == spec and service.restart_argv() == ["a", "b c"]
    shell = parse_service({"restart": "a && b", "shell": True}, "decode")
    assert shell.restart_argv() == ["/bin/sh", "-c", "a && b"]
