"""The command line as a whole: documented, fast to start, exit codes, formats."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from ledger.cli import cli


def walk(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from walk(cmd, (*prefix, name))


@pytest.mark.parametrize("path,cmd", list(walk(cli)), ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_every_command_is_documented(ledger, path, cmd):
    assert cmd.help and cmd.help.strip(), f"ledger {' '.join(path)} has no help text"
    r = ledger(*path, "--help")
    assert r.exit_code == 0 and "Usage:" in r.stdout


def test_read_commands_take_json_and_mutating_ones_dry_run():
    read = {"list", "show", "status", "diff", "log", "ab"}
    mutating = {"revert", "restore", "suspect", "clear", "ab"}
    commands = dict(walk(cli))
    for name in read:
        assert any(p.name == "json_out" for p in commands[(name,)].params), name
    for name in mutating:
        assert any(p.name == "dry_run" for p in commands[(name,)].params), name
    for path in [("record", "knob"), ("record", "patch"), ("target", "add"), ("backups", "restore"),
                 ("init",), ("evidence", "add")]:
        assert any(p.name == "dry_run" for p in commands[path].params), path


def test_help_imports_no_heavy_modules():
    code = ("import sys\nfrom ledger.cli import main\nsys.argv = ['ledger', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'pandas', 'matplotlib', 'scipy', 'numpy', 'git')"
            " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_usage_errors_exit_2_and_no_workspace_exits_1(ledger, tmp_path):
    assert ledger("revert").exit_code == 2 or ledger("-C", tmp_path, "revert").exit_code in (1, 2)
    r = ledger("-C", tmp_path, "list")
    assert r.exit_code == 1 and r.stderr.startswith("error: no ledger workspace")
    assert ledger("no-such-command").exit_code == 2


def test_workspace_found_upward_and_from_env(story, ledger, monkeypatch):
    sub = story.root / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert ledger("list").exit_code == 0
    monkeypatch.chdir(story.root.parent)
    assert ledger("list", env={"LEDGER_WORKSPACE": str(story.root)}).exit_code == 0


def test_revert_needs_exactly_one_selector(story, ledger):
    r = ledger(*story.args("revert", "--perf-only", "--class", "bugfix"))
    assert r.exit_code == 2 and "exactly one" in r.stderr


def test_k8s_target_and_missing_container(tmp_path, ledger):
    manifest = tmp_path / "decode.yaml"
    manifest.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: decode\nspec:\n"
        "  template:\n    spec:\n      containers:\n        - name: sglang\n"
        "          image: sglang:latest\n          env:\n            - name: SGLANG_X\n"
        "              value: \"1\"\n")
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    r = ledger("-C", root, "target", "add", "k", manifest, "--format", "k8s", "--container", "nope")
    assert r.exit_code == 1 and "nope" in r.stderr and "sglang" in r.stderr
    r = ledger("-C", root, "target", "add", "k", manifest, "--format", "k8s",
               "--container", "sglang")
    assert r.exit_code == 0, r.stderr
    start = manifest.read_bytes()
    r = ledger("-C", root, "record", "knob", "k", "SGLANG_ENABLE_DETERMINISTIC_INFERENCE=no",
               "--class", "bugfix", "--title", "off", "--no-validate")
    assert r.exit_code == 0, r.stderr
    import yaml

    env = yaml.safe_load(manifest.read_text())["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "SGLANG_ENABLE_DETERMINISTIC_INFERENCE", "value": "no"} in env
    assert ledger("-C", root, "revert", "--class", "bugfix").exit_code == 0
    assert manifest.read_bytes() == start


def test_catalog_validation(story, ledger):
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=lots",
                           "--class", "perf", "--title", "t"))
    assert r.exit_code == 1 and "SGLANG_DISAGGREGATION_QUEUE_SIZE" in r.stderr and "lots" in r.stderr
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTA=512",
                           "--class", "perf", "--title", "typo"))
    assert r.exit_code == 0
    assert "warning:" in r.stderr and "SGLANG_SM120_MMA_TARGET_CTAS" in r.stderr


def test_backups_list_show_diff_restore(story, ledger):
    start = story.script.read_bytes()
    assert ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                              "--class", "perf", "--title", "ctas")).exit_code == 0
    backups = ledger(*story.args("backups", "list", "--json")).json()
    assert len(backups) == 1 and backups[0]["files"][0]["path"] == str(story.script)
    bid = backups[0]["id"]
    assert "record knob decode" in backups[0]["command"]
    r = ledger(*story.args("backups", "diff", bid))
    assert "-export SGLANG_SM120_MMA_TARGET_CTAS=256" in r.stdout
    assert "+export SGLANG_SM120_MMA_TARGET_CTAS=512" in r.stdout
    assert ledger(*story.args("backups", "restore", bid)).exit_code == 0
    assert story.script.read_bytes() == start
    assert ledger(*story.args("status", "--json")).json()["drift"]  # the ledger says so


def test_history_diff_between_revisions(story, ledger):
    assert ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                              "--class", "perf", "--title", "ctas")).exit_code == 0
    assert ledger(*story.args("suspect", "ctas", "--why", "hang")).exit_code == 0
    r = ledger(*story.args("diff", "HEAD~1", "HEAD"))
    assert "applied -> suspected" in r.stdout and "hang" in r.stdout
    assert ledger(*story.args("diff", "HEAD~1", "--exit-code")).exit_code == 3
    r = ledger(*story.args("diff", "--upload-pack=touch"))
    assert r.exit_code in (1, 2)
