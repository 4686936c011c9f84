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
