"""`target set`, `status --live` and `--restart` refusals through the CLI (no server)."""

from __future__ import annotations

import subprocess


def head(story) -> str:
    return subprocess.run(["git", "-C", str(story.root), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout


def test_restart_without_hooks_is_refused_before_anything_changes(story, ledger):
    before = (story.script.read_bytes(), head(story))
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                           "--class", "perf", "--title", "ctas", "--restart"))
    assert r.exit_code == 1
    assert "target decode (no restart and no health)" in r.stderr
    assert "ledger.yaml" in r.stderr
    assert (story.script.read_bytes(), head(story)) == before


def test_target_set_writes_ledger_yaml_and_validates(story, ledger, tmp_path):
    r = ledger(*story.args("target", "set", "decode", "--live", "pid_file=run/d.pid",
                           "--restart", "systemctl restart 'sglang decode'",
                           "--health-url", "http://127.0.0.1:9/health"))
    assert r.exit_code == 0, r.stderr
    text = (story.root / "ledger.yaml").read_text()
    assert "pid_file: run/d.pid" in text and "sglang decode" in text
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                           "--class", "perf", "--title", "ctas", "--restart", "--dry-run"))
    assert r.exit_code == 0, r.stderr
    assert "would restart decode: systemctl restart 'sglang decode'" in r.stdout
    assert "then wait for health: GET http://127.0.0.1:9/health = 200 within 60s" in r.stdout
    r = ledger(*story.args("status", "--live"))
    assert r.exit_code == 0 and "not running" in r.stdout and "does not exist" in r.stdout
    for bad, message in ((["--live", "pidfile=x"], "unknown probe"),
                         (["--live", "url=ftp://x/"], "not an http"),
                         (["--health-url", "nope"], "not an http")):
        r = ledger(*story.args("target", "set", "decode", *bad))
        assert r.exit_code == 1 and message in r.stderr, r.stderr
    assert "pid_file: run/d.pid" in (story.root / "ledger.yaml").read_text()


def test_a_shell_restart_needs_shell_true_in_ledger_yaml(story, ledger):
    path = story.root / "ledger.yaml"
    path.write_text(path.read_text().replace(
        "    format: bash\n", "    format: bash\n    restart: systemctl restart x\n"))
    r = ledger(*story.args("status"))
    assert r.exit_code == 1 and "would need a shell" in r.stderr and "ledger.yaml" in r.stderr
    r = ledger(*story.args("target", "set", "decode", "--restart-shell", "a && b",
                           "--health-command", "true"))
    assert r.exit_code == 1  # the config must be fixed first: nothing is guessed
    path.write_text(path.read_text().replace("restart: systemctl restart x\n",
                                             "restart: systemctl restart x\n    shell: true\n"))
    r = ledger(*story.args("target", "set", "decode", "--health-command", "true"))
    assert r.exit_code == 0, r.stderr
    r = ledger(*story.args("revert", "--perf-only", "--restart", "--dry-run"))
    assert r.exit_code == 0 and "nothing to revert" in r.stdout


def test_status_live_shows_what_the_server_runs_with_and_each_unset_default(tmp_path, ledger):
    """A url probe on loopback answering the bundled engine's own ``/server_info``
    (engine.serving.info.startup_info of the environment it started with): the effective
    value of a knob the process has unset, and the engine default of an unset side."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler
    from http.server import ThreadingHTTPServer

    from engine.knobs import load_knobs
    from engine.serving.info import startup_info

    started_with = {"ENGINE_PAGE_SIZE": "16", "ENGINE_DTYPE": "auto"}
    body = json.dumps(startup_info("decode", None, load_knobs(started_with), started_with)).encode()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/server_info" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        script = tmp_path / "serve.sh"
        script.write_text("#!/bin/bash\nexport ENGINE_PAGE_SIZE=16\nexport ENGINE_DTYPE=auto\n"
                          "exec python -m engine serve --role decode\n")
        ws = tmp_path / "ws"
        assert ledger("init", ws, "--root", f"t={tmp_path}").exit_code == 0
        assert ledger("-C", ws, "target", "add", "decode", script, "--format", "bash").exit_code == 0
        url = f"http://127.0.0.1:{httpd.server_address[1]}/server_info"
        assert ledger("-C", ws, "target", "set", "decode", "--live", f"url={url}").exit_code == 0
        for change in (["ENGINE_NUM_PAGES=4096"], ["ENGINE_PAGE_SIZE", "--unset"]):
            r = ledger("-C", ws, "record", "knob", "decode", *change, "--class", "perf", "--title", "t")
            assert r.exit_code == 0, r.stderr
        r = ledger("-C", ws, "status", "--live", "--json")
        rows = {k["knob"]: k for k in r.json()[0]["knobs"]}
        pages = rows["ENGINE_NUM_PAGES"]
        assert (pages["state"], pages["process"], pages["effective"]) == ("pending restart", None, "2048")
        size = rows["ENGINE_PAGE_SIZE"]
        assert (size["state"], size["file"], size["process"], size["default"]) == \
            ("pending restart", None, "16", 16)
        assert rows["ENGINE_DTYPE"]["effective"] == "auto" and rows["ENGINE_DTYPE"]["state"] == "live"
        shown = {line.split()[0]: line for line in ledger("-C", ws, "status", "--live").stdout.splitlines()[1:]}
        assert "(unset, effective 2048)" in shown["ENGINE_NUM_PAGES"]
        assert shown["ENGINE_PAGE_SIZE"].count("(unset, default 16)") == 2  # ledger and file
    finally:
        httpd.shutdown()
