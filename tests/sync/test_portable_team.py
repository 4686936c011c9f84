"""Issue 15's "done when" on portable workspaces, through the real CLI and real git.

A bare repository and three clones on three "machines": each clone keeps its serve
script in its own directory outside the workspace (``m1-deploy/``, ``m2-deploy/``,
``m3-deploy/``), declared as root ``deploy`` in its own git-ignored ``ledger.local.yaml``.
ledger.yaml says ``deploy:serve.sh`` and nothing else about where the file is.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.store.kit import assert_refused
from tests.store.kit import run_cli
from tests.sync.kit import MANIFEST
from tests.sync.kit import SERVE
from tests.sync.kit import git

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"
RATIO = "SGLANG_INIT_NEW_TOKEN_RATIO"


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stdout


def _identity(root: Path, name: str) -> None:
    git(root, "config", "user.name", name)
    git(root, "config", "user.email", f"{name}@example.com")


def _deploy(tmp: Path, k: int) -> Path:
    d = tmp / f"m{k}-deploy"
    d.mkdir()
    (d / "serve.sh").write_text(SERVE)
    return d


@pytest.fixture
def machines(tmp_path):
    """[(workspace, serve script)] for three machines sharing one bare repo."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(bare)], check=True)
    first = tmp_path / "op1"
    ok(run_cli(tmp_path, "init", first))  # -C tmp_path is ignored by init's DIRECTORY
    _identity(first, "op1")
    d1 = _deploy(tmp_path, 1)
    ok(run_cli(first, "root", "add", "deploy", d1, "--local"))
    out = ok(run_cli(first, "target", "add", "serve", d1 / "serve.sh", "--format", "bash"))
    assert "deploy:serve.sh" in out
    git(first, "remote", "add", "origin", str(bare))
    git(first, "push", "--quiet", "-u", "origin", "main")
    out = [(first, d1 / "serve.sh")]
    for k in (2, 3):
        root = tmp_path / f"op{k}"
        subprocess.run(["git", "clone", "--quiet", str(bare), str(root)], check=True)
        _identity(root, f"op{k}")
        d = _deploy(tmp_path, k)
        r = run_cli(root, "target", "show", "serve")  # the root is not set here yet
        assert_refused(r, "ledger.yaml:", "root deploy", "has no directory on this machine",
                       "ledger root add deploy DIR --local", "LEDGER_ROOT_DEPLOY")
        ok(run_cli(root, "root", "add", "deploy", d, "--local"))
        assert git(root, "status", "--porcelain") == ""  # a machine's setting, not committed
        out.append((root, d / "serve.sh"))
    return out


def record(root: Path, assignment: str, title: str) -> str:
    out = ok(run_cli(root, "record", "knob", "serve", assignment, "--class", "perf",
                     "--title", title, "--no-validate", "--json"))
    return json.loads(out)["id"]


def entries(root: Path) -> list[tuple]:
    lines = (root / "entries.jsonl").read_text().splitlines()
    return [(e["id"], e["seq"], e["state"]) for e in map(json.loads, lines)]


def test_two_operators_push_a_third_pulls_each_machine_under_its_own_root(machines, tmp_path):
    (ws1, s1), (ws2, s2), (ws3, s3) = machines
    a = record(ws1, f"{CTAS}=512", "CTAS 512")
    b = record(ws2, f"{RATIO}=0.8", "token ratio 0.8")
    ok(run_cli(ws1, "push"))
    assert_refused(run_cli(ws2, "push"), "rejected", "ledger pull")
    ok(run_cli(ws2, "pull"))
    ok(run_cli(ws2, "push"))
    ok(run_cli(ws3, "pull"))
    ok(run_cli(ws1, "pull"))
    assert entries(ws1) == entries(ws2) == entries(ws3)
    assert [e[0] for e in entries(ws1)] == [a, b]
    want = SERVE.replace(f"{CTAS}=256", f"{CTAS}=512").replace(f"{RATIO}=0.7", f"{RATIO}=0.8")
    for script in (s1, s2, s3):  # each machine's own file, under its own root
        assert script.read_text() == want
    for ws in (ws1, ws2, ws3):
        r = run_cli(ws, "status", "--exit-code")
        assert r.returncode == 0, (r.stdout, r.stderr)
    # No absolute path of any machine in any committed file, at any commit.
    revs = git(ws1, "rev-list", "--all").split()
    for needle in (str(tmp_path), "m1-deploy", "m2-deploy", "m3-deploy"):
        hits = subprocess.run(["git", "-C", str(ws1), "grep", "-I", "-l", "-F", needle, *revs],
                              capture_output=True, text=True, check=False)
        assert hits.returncode == 1 and hits.stdout == "", (needle, hits.stdout)
    assert "ledger.local.yaml" not in git(ws1, "ls-tree", "-r", "--name-only", "HEAD")
    assert "deploy:serve.sh" in (ws3 / "ledger.yaml").read_text()


def test_the_same_knob_on_both_sides_is_refused_naming_both(machines):
    (ws1, _), (ws2, s2), _ = machines
    a = record(ws1, f"{CTAS}=512", "CTAS 512")
    b = record(ws2, f"{CTAS}=384", "CTAS 384")
    ok(run_cli(ws1, "push"))
    before, head = s2.read_bytes(), git(ws2, "rev-parse", "HEAD")
    r = run_cli(ws2, "pull")
    assert_refused(r, a, b, f"knob {CTAS} in target serve", f"--drop {b}")
    assert s2.read_bytes() == before and git(ws2, "rev-parse", "HEAD") == head


def test_gitops_two_operators_change_one_committed_manifest(tmp_path):
    """The manifest lives in the workspace repo: each record is a commit holding it, a
    pull writes it from the merged ledger, and every clone ends with the same bytes."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(bare)], check=True)
    ws1 = tmp_path / "op1"
    ok(run_cli(tmp_path, "init", ws1))
    _identity(ws1, "op1")
    (ws1 / "k8s").mkdir()
    (ws1 / "k8s" / "decode.yaml").write_text(MANIFEST)
    ok(run_cli(ws1, "target", "add", "decode", ws1 / "k8s" / "decode.yaml", "--format", "k8s",
               "--container", "sglang"))
    git(ws1, "remote", "add", "origin", str(bare))
    git(ws1, "push", "--quiet", "-u", "origin", "main")
    ws2 = tmp_path / "op2"
    subprocess.run(["git", "clone", "--quiet", str(bare), str(ws2)], check=True)
    _identity(ws2, "op2")
    for ws, assignment in ((ws1, f"{CTAS}=512"), (ws2, f"{RATIO}=0.8")):
        ok(run_cli(ws, "record", "knob", "decode", assignment, "--class", "perf",
                   "--title", assignment, "--no-validate"))
    ok(run_cli(ws1, "push"))
    ok(run_cli(ws2, "pull"))
    ok(run_cli(ws2, "push"))
    ok(run_cli(ws1, "pull"))
    want = MANIFEST.replace('"256"', '"512"').replace('"0.7"', '"0.8"')
    for ws in (ws1, ws2):
        assert (ws / "k8s" / "decode.yaml").read_text() == want
        assert git(ws, "show", "HEAD:k8s/decode.yaml") + "\n" == want  # what Argo CD sees
        assert git(ws, "status", "--porcelain") == ""
        assert run_cli(ws, "status", "--exit-code").returncode == 0
    assert entries(ws1) == entries(ws2)


def test_a_pull_puts_ledger_local_yaml_in_an_older_gitignore(tmp_path):
    from tests.sync.kit import make_team

    op1, op2 = make_team(tmp_path, n=2)
    ignore = op1.root / ".gitignore"
    ignore.write_text(ignore.read_text().replace("ledger.local.yaml\n", ""))  # an older one
    git(op1.root, "commit", "--quiet", "-m", "older .gitignore", "--", ".gitignore")
    git(op1.root, "push", "--quiet")
    git(op2.root, "pull", "--quiet")
    assert "ledger.local.yaml" not in (op2.root / ".gitignore").read_text()
    op1.record(CTAS, "512", "CTAS 512")
    op1.push()
    op2.pull()
    assert "ledger.local.yaml" in (op2.root / ".gitignore").read_text().splitlines()
    assert "ledger.local.yaml" in git(op2.root, "show", "HEAD:.gitignore").splitlines()
    assert git(op2.root, "status", "--porcelain") == ""
