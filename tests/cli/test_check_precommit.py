"""The real `pre-commit` tool runs this repository's `ledger-check` hook on pre-push.

The hook repository is a git repository made here holding this checkout's
``.pre-commit-hooks.yaml`` (pre-commit installs a hook repository from a git URL or a local
path at a commit; a copy committed here works whether or not the checkout's own changes are
committed).  The hook is ``language: system``: it runs the ``ledger`` on PATH — here a
wrapper around this interpreter — so nothing is fetched and it works offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_check import GIT_ENV
from tests.cli.test_check import commit_all
from tests.cli.test_check import git
from tests.conftest import REPO_ROOT

pytest.importorskip("pre_commit")


def _env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "ledger"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ledger.cli "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(GIT_ENV)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    return env


def _hook_repo(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    repo = tmp_path / "hooks"
    repo.mkdir()
    shutil.copy(REPO_ROOT / ".pre-commit-hooks.yaml", repo / ".pre-commit-hooks.yaml")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "hooks"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, env=env,
                         capture_output=True, text=True).stdout.strip()
    return repo, rev


def test_the_hook_blocks_a_push_of_an_unledgered_change(tmp_path, ledger):
    env = _env(tmp_path)
    hooks, rev = _hook_repo(tmp_path, env)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=env)

    work = tmp_path / "deploy"
    assert ledger("init", work).exit_code == 0
    (work / "serve.sh").write_text("#!/usr/bin/env bash\n"
                                   "export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\n"
                                   "exec python -m sglang.launch_server --port 30001\n")
    assert ledger("-C", work, "target", "add", "decode", work / "serve.sh", "--format",
                  "bash").exit_code == 0
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks}\n    rev: {rev}\n    hooks:\n      - id: ledger-check\n")
    commit_all(work, "pre-commit config")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")

    def run(*args: str, cwd: Path = work) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300)

    r = run(sys.executable, "-m", "pre_commit", "install", "--hook-type", "pre-push")
    assert r.returncode == 0, r.stderr

    # a hand edit: the push is refused, naming the line and the command
    script = work / "serve.sh"
    script.write_text(script.read_text().replace("QUEUE_SIZE=4", "QUEUE_SIZE=16"))
    commit_all(work, "bigger queue, by hand")
    pushed = run("git", "push", "-q", "origin", "main")
    out = pushed.stdout + pushed.stderr
    assert pushed.returncode != 0, out
    assert "ledger check" in out and "Failed" in out
    assert "serve.sh:2: SGLANG_DISAGGREGATION_QUEUE_SIZE: 4 -> 16" in out
    assert "ledger record knob decode SGLANG_DISAGGREGATION_QUEUE_SIZE=16 --adopt --before 4" in out
    remote_head = run("git", "--git-dir", str(remote), "rev-parse", "main").stdout.strip()
    assert remote_head != run("git", "rev-parse", "HEAD").stdout.strip()  # nothing pushed

    # recorded in the ledger (a liveness-ish bugfix: no evidence needed): the push goes
    r = ledger("-C", work, "record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=16",
               "--adopt", "--before", "4", "--class", "bugfix", "--title", "queue 16")
    assert r.exit_code == 0, r.stderr
    pushed = run("git", "push", "-q", "origin", "main")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "Passed" in pushed.stdout + pushed.stderr


def test_the_readme_set_ups_name_the_hook_and_the_action_inputs_that_exist():
    import re

    import yaml

    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("### The ledger in the pull request", 1)[1].split("\n### ", 1)[0]
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)]
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
    checks, precommit, workflow = blocks
    assert set(checks["checks"]) <= {"unledgered", "evidence", "stale-evidence", "release",
                                     "state", "history", "outside-repo"}
    assert precommit["repos"][0]["hooks"][0]["id"] == hooks[0]["id"] == "ledger-check"
    assert hooks[0]["stages"] == ["pre-push"] and hooks[0]["language"] == "system"
    step = workflow["jobs"]["ledger"]["steps"][1]
    assert set(step["with"]) <= set(action["inputs"])
    assert {"base-ref", "fail-on", "comment"} <= set(action["inputs"])
    assert action["runs"]["using"] == "composite"


def test_the_actions_check_step_runs_in_real_bash(tmp_path, ledger):
    """The composite action's `ledger check` step, run by bash as a runner would (its
    inputs in the environment): annotations on stdout, the markdown comment and the ab
    matrix written where the later steps read them, the verdict kept for the last step."""
    import yaml

    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "check")
    env = _env(tmp_path)
    work = tmp_path / "deploy"
    assert ledger("init", work).exit_code == 0
    (work / "serve.sh").write_text("#!/usr/bin/env bash\nexport SGLANG_SM120_MMA_TARGET_CTAS=256\n"
                                   "exec python -m sglang.launch_server --port 30001\n")
    assert ledger("-C", work, "target", "add", "decode", work / "serve.sh", "--format",
                  "bash").exit_code == 0
    git(work, "checkout", "-q", "-b", "feature")
    r = ledger("-C", work, "record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
               "--class", "perf", "--title", "CTAS 512", "--json")
    entry = r.json()["id"]
    output, temp = tmp_path / "github_output", tmp_path / "runner_temp"
    temp.mkdir()
    env.update(BASE_REF="main", FAIL_ON="error", WORKSPACE=str(work),
               GITHUB_OUTPUT=str(output), RUNNER_TEMP=str(temp))
    r = subprocess.run(["bash", "-c", step["run"]], cwd=work, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr  # the step itself never fails: the last step does
    assert r.stdout.startswith("::error file=serve.sh,line=2,title=ledger check%3A evidence::")
    comment = (temp / "ledger-check.md").read_text()
    assert comment.startswith("<!-- knob-ledger-check -->") and entry in comment
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["status"] == "1"
    assert json.loads(outputs["matrix"])["include"][0]["entry"] == entry
