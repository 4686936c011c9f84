"""A target path in ledger.yaml that names a symlink (edited by hand, or pulled from a
colleague) is refused when a writer loads ledger.yaml, with the rule and message of
``target add`` (issue 30); readers still run and say so; nothing is changed."""

from __future__ import annotations

import subprocess

import pytest

from tests.store.kit import CTAS
from tests.store.kit import assert_refused
from tests.store.kit import git
from tests.store.kit import run_cli
from tests.store.kit import tree
from tests.store.kit import with_ctas_512

WRITERS = {
    "record knob": ("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
                    "--class", "perf", "--title", "queue 8"),
    "record flag": ("record", "flag", "decode", "--port=30002", "--class", "perf",
                    "--title", "port"),
    "record --adopt": ("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=4",
                       "--adopt", "--before", "2", "--class", "perf", "--title", "adopt"),
    "revert": ("revert", "ctas"),
    "revert --perf-only": ("revert", "--perf-only"),
    "restore": ("restore", "--perf-only"),
    "suspect": ("suspect", "ctas", "--why", "hang"),
    "clear": ("clear", "ctas", "--why", "proxy"),
    "amend": ("amend", "ctas", "--why", "typo"),
    "bisect": ("bisect", "--class", "perf", "--check", "true"),
    "target set": ("target", "set", "decode", "--health-url", "http://127.0.0.1:30001/health"),
    "dry run": ("revert", "--perf-only", "--dry-run"),
}


def symlink_in_config(story) -> str:
    """ledger.yaml edited by hand to name a link to the script; the message `target add`
    gives for that link."""
    link = story.script.with_name("serve_link.sh")
    link.symlink_to(story.script.name)
    refused = run_cli(story.root, "target", "add", "other", link, "--format", "bash")
    assert_refused(refused, "is a symlink")
    config = story.root / "ledger.yaml"
    config.write_text(config.read_text().replace("tmp:serve_decode.sh", "tmp:serve_link.sh"))
    git(story.root, "commit", "-qam", "a path edited by hand")
    return refused.stderr.strip().removeprefix("error: ")


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_refuses_a_symlinked_target_path(story, ledger, writer):
    ws = with_ctas_512(story, ledger)
    message = symlink_in_config(ws)
    picture = tree(ws.root, ws.script)
    head = git(ws.root, "rev-parse", "HEAD")
    r = run_cli(ws.root, *WRITERS[writer])
    assert_refused(r, message, "(target decode in ledger.yaml)")
    assert tree(ws.root, ws.script) == picture and git(ws.root, "rev-parse", "HEAD") == head


def test_readers_still_run_and_say_why(story, ledger):
    ws = with_ctas_512(story, ledger)
    symlink_in_config(ws)
    r = run_cli(ws.root, "status")
    assert r.returncode == 0 and "is a symlink" in r.stderr and "Traceback" not in r.stderr
    r = run_cli(ws.root, "doctor")
    assert r.returncode == 1 and "is a symlink" in r.stdout


def test_fixing_the_path_with_a_writer_of_ledger_yaml_is_allowed(story, ledger, tmp_path):
    """``root add`` checks the ledger.yaml it writes, not the one it replaces."""
    ws = with_ctas_512(story, ledger)
    symlink_in_config(ws)
    real = tmp_path / "real"
    real.mkdir()
    (real / "serve_link.sh").write_bytes(ws.script.read_bytes())
    r = run_cli(ws.root, "root", "add", "tmp", real, "--local")
    assert r.returncode == 0, r.stderr
    assert run_cli(ws.root, "revert", "ctas").returncode == 0
    assert f"{CTAS}=256" in (real / "serve_link.sh").read_text()


def test_a_pulled_path_naming_a_symlink_is_refused(tmp_path):
    from tests.sync.kit import make_team

    op1, op2 = make_team(tmp_path, n=2)
    for clone in (op1, op2):
        (clone.root / "deploy" / "link.sh").symlink_to("serve.sh")
    config = op2.root / "ledger.yaml"
    config.write_text(config.read_text().replace("deploy/serve.sh", "deploy/link.sh"))
    git(op2.root, "commit", "-qam", "serve through the link")
    git(op2.root, "push", "-q", "origin", "main")
    head = git(op1.root, "rev-parse", "HEAD")
    picture = tree(op1.root / "deploy")
    r = run_cli(op1.root, "pull")
    assert_refused(r, "link.sh: is a symlink; manage the file it points to instead",
                   "(target serve in ledger.yaml)")
    assert git(op1.root, "rev-parse", "HEAD") == head and tree(op1.root / "deploy") == picture
    assert "link.sh" not in (op1.root / "ledger.yaml").read_text()
    subprocess.run(["git", "-C", str(op1.root), "status"], check=True, capture_output=True)


def test_backups_restore_does_not_write_through_a_symlink(story, ledger):
    import json

    ws = with_ctas_512(story, ledger)
    backup = json.loads(run_cli(ws.root, "backups", "list", "--json").stdout)[-1]["id"]
    elsewhere = ws.script.with_name("elsewhere.sh")
    elsewhere.write_text("# not a target\n")
    ws.script.unlink()
    ws.script.symlink_to(elsewhere.name)
    r = run_cli(ws.root, "backups", "restore", backup)
    assert_refused(r, f"{ws.script}: is a symlink; manage the file it points to instead")
    assert ws.script.is_symlink() and elsewhere.read_text() == "# not a target\n"
