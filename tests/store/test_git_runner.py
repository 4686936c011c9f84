"""The one git runner (ledger.git_runner) on real repositories: the workspace and the engine
repo get the same hardening — no inherited GIT_* redirecting them, no hooks, no
fsmonitor, LC_ALL=C, user values never taken as options — and one identity."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ledger.errors import GitError
from ledger.git_runner import IDENTITY
from ledger.git_runner import GitRunner
from ledger.git_runner import check_rev
from ledger.patches.engine_git import Git
from ledger.store import wsgit


def plain_git(repo: Path, *args: str) -> str:
    """git as a person runs it, outside the code under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(repo.parent / "home"), XDG_CONFIG_HOME=str(repo.parent / "home"))
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


@pytest.fixture
def bare_home(tmp_path, monkeypatch):
    """No global git config and no identity variables: a fresh machine."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for k in list(os.environ):
        if k.startswith("GIT_"):
            monkeypatch.delenv(k)
    return home


@pytest.fixture
def ws_repo(tmp_path, bare_home) -> Path:
    root = tmp_path / "ws"
    wsgit.init(root)
    (root / "a.txt").write_text("one\n")
    wsgit.commit(root, ["a.txt"], "first\n")
    return root


def test_an_inherited_git_dir_does_not_redirect_the_workspace(ws_repo, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    wsgit.init(elsewhere)
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "stray-index"))
    (ws_repo / "a.txt").write_text("two\n")
    sha = wsgit.commit(ws_repo, ["a.txt"], "second\n")
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert plain_git(ws_repo, "log", "--format=%H %s") .splitlines()[0] == f"{sha} second"
    assert not (tmp_path / "stray-index").exists()
    assert wsgit.head(elsewhere) is None


def test_workspace_hooks_and_fsmonitor_never_run(ws_repo, tmp_path):
    marker = tmp_path / "ran"
    hook = ws_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    hook.chmod(0o755)
    plain_git(ws_repo, "config", "core.fsmonitor", f"touch {marker}; false")
    (ws_repo / "a.txt").write_text("three\n")
    wsgit.commit(ws_repo, ["a.txt"], "third\n")
    assert wsgit.dirty(ws_repo) == []
    assert not marker.exists()


def test_one_identity_where_the_machine_has_none(ws_repo):
    assert plain_git(ws_repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == (
        f"{IDENTITY['GIT_AUTHOR_NAME']} <{IDENTITY['GIT_AUTHOR_EMAIL']}>|"
        f"{IDENTITY['GIT_COMMITTER_NAME']} <{IDENTITY['GIT_COMMITTER_EMAIL']}>")


def test_the_operators_identity_wins_in_the_workspace_not_in_the_engine_repo(
        ws_repo, tmp_path, monkeypatch):
    plain_git(ws_repo, "config", "user.name", "Ada")
    plain_git(ws_repo, "config", "user.email", "ada@example.com")
    (ws_repo / "a.txt").write_text("four\n")
    wsgit.commit(ws_repo, ["a.txt"], "by ada\n")
    assert plain_git(ws_repo, "log", "-1", "--format=%an <%ae>").strip() == "Ada <ada@example.com>"
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Grace")
    engine = Git(ws_repo)
    tree = engine.tree_of(engine.head())
    commit = engine.commit_tree(tree, [engine.head()], "engine step\n")
    assert plain_git(ws_repo, "log", "-1", "--format=%an|%cn", commit).strip() == \
        "knob ledger|knob ledger"


@pytest.mark.parametrize("rev", ["--output=/tmp/x", "-p", "", "HEAD\nx", "a\x00b"])
def test_a_typed_revision_is_never_an_option(ws_repo, rev):
    with pytest.raises(GitError, match="not a revision"):
        wsgit.verify_rev(ws_repo, rev)
    with pytest.raises(GitError):
        check_rev(rev)


def test_show_file_and_log_take_revisions_as_data(ws_repo):
    assert wsgit.show_file(ws_repo, "HEAD", "a.txt") == "one"
    assert wsgit.show_file(ws_repo, "HEAD", "missing.txt") is None
    with pytest.raises(GitError):
        wsgit.show_file(ws_repo, "--output=/tmp/owned", "a.txt")
    assert [c["subject"] for c in wsgit.log(ws_repo)] == ["first"]


def test_messages_are_data_and_output_is_byte_exact(ws_repo):
    msg = "--amend\n\n$(touch /tmp/never) `x` ; rm -rf /\n"
    sha = wsgit.commit(ws_repo, [], msg)
    assert wsgit.message_of(ws_repo, sha) == msg
    runner = GitRunner(ws_repo)
    assert runner.run("cat-file", "blob", "HEAD:a.txt").stdout == b"one\n"


def test_failures_are_git_errors_naming_the_command(ws_repo, tmp_path):
    with pytest.raises(GitError, match="git cat-file"):
        GitRunner(ws_repo).run("cat-file", "blob", "HEAD:nope")
    with pytest.raises(GitError, match="not a git repository"):
        wsgit.head(tmp_path / "nowhere")


def test_messages_are_in_the_c_locale(ws_repo, monkeypatch):
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    proc = GitRunner(ws_repo).run("rev-parse", "--verify", "nope", check=False)
    assert proc.returncode != 0
    assert b"fatal:" in proc.stderr
