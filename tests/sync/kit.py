"""Three operators on three clones of one bare repository (real git, real bash scripts).

Each clone is a workspace whose serve script lives in its own git-ignored ``deploy/``
directory (the file is this machine's, the ledger is shared); the library commands are
called in-process (fast enough for property tests), the CLI in the CLI tests.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ledger.commands import restore as restore_ops
from ledger.commands import revert as revert_ops
from ledger.commands import sync as sync_ops
from ledger.commands.record import record_knob
from ledger.commands.session import open_session
from ledger.commands.setup import add_target
from ledger.commands.setup import init_workspace
from ledger.store.workspace import Workspace

SERVE = """\
#!/usr/bin/env bash
# Decode server of the PD pair; every knob below is in the ledger.
set -euo pipefail

export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
export SGLANG_SM120_MMA_TARGET_CTAS=256   # wave quantisation at c64
export SGLANG_INIT_NEW_TOKEN_RATIO=0.7
export SGLANG_RETRACT_DECODE_STEPS=20

MODEL="${MODEL:-/models/glm}"
exec python -m sglang.launch_server --model-path "$MODEL" --port 30001
"""

# A decode Deployment kept in the workspace repo (GitOps): its container's env list.
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang-decode
spec:
  template:
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.5
          env:
            - name: SGLANG_SM120_MMA_TARGET_CTAS
              value: "256"
            - name: SGLANG_DISAGGREGATION_QUEUE_SIZE
              value: "4"
            - name: SGLANG_INIT_NEW_TOKEN_RATIO
              value: "0.7"
"""


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


@dataclass
class Clone:
    name: str
    root: Path

    @property
    def serve(self) -> Path:
        return self.root / "deploy" / "serve.sh"

    def session(self, command: str = "test"):
        return open_session(str(self.root), command)

    def entries(self):
        return Workspace(self.root).entries()

    def record(self, knob: str, value: str | None, title: str, cls: str = "perf"):
        return record_knob(self.session(f"record knob serve {knob}"), target="serve", knob=knob,
                           value=value, cls=cls, title=title, no_validate=True).entry

    def revert(self, ref: str, why: str = "test"):
        return revert_ops.revert(self.session("revert"), refs=[ref], why=why)

    def restore(self, ref: str, include_suspects: bool = True, force: bool = True):
        return restore_ops.restore(self.session("restore"), refs=[ref],
                                  include_suspects=include_suspects, force=force)

    def suspect(self, ref: str, why: str = "hang"):
        return revert_ops.suspect(self.session("suspect"), ref, why)

    def clear(self, ref: str, why: str = "proxy"):
        return revert_ops.clear(self.session("clear"), ref, why)

    def record_patch(self, text: str, title: str, cls: str = "bugfix"):
        from ledger.commands.record_patch import record_patch

        path = self.root.parent / f"{self.name}-{len(self.entries())}.patch"
        path.write_text(text)
        return record_patch(self.session("record patch"), patch_file=str(path), rev=None,
                            cls=cls, title=title).entry

    @property
    def engine_tree(self) -> str:
        return git(self.root / "engine-src", "rev-parse", "HEAD^{tree}")

    def pull(self, **kw):
        return sync_ops.pull(self.session("pull"), **kw)

    def push(self):
        return sync_ops.push(self.session("push"))


ENGINE_FILES = {
    "engine/sched.py": "".join(f"line {i}\n" for i in range(1, 41)),
    "engine/attn.py": "".join(f"attn {i}\n" for i in range(1, 41)),
}


def make_engine(tmp: Path) -> Path:
    """The engine's upstream: a git repo every machine clones into its workspace."""
    src = tmp / "engine-upstream"
    for rel, text in ENGINE_FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(src)], check=True)
    _identity(src, "upstream")
    git(src, "add", "-A")
    git(src, "commit", "--quiet", "-m", "engine base")
    return src


def _clone_engine(upstream: Path, root: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", str(upstream), str(root / "engine-src")],
                   check=True)
    _identity(root / "engine-src", "engine")


def make_team(tmp: Path, n: int = 3, serve: str = SERVE, engine: bool = False) -> list[Clone]:
    """A bare repo and ``n`` clones; the first made the workspace and pushed it.  With
    ``engine``, each clone has its own checkout of one engine upstream in the git-ignored
    ``engine-src/`` (``engine_repo: engine-src``)."""
    bare = tmp / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(bare)], check=True)
    first = tmp / "op1"
    upstream = make_engine(tmp) if engine else None
    if upstream is not None:
        first.mkdir(parents=True)
        _clone_engine(upstream, first)
    init_workspace(first, engine_repo=str(first / "engine-src") if engine else None)
    (first / ".gitignore").write_text((first / ".gitignore").read_text() + "deploy/\n"
                                      + ("engine-src/\n" if engine else ""))
    _write_serve(first, serve)
    add_target(open_session(str(first), "target add"), "serve", "deploy/serve.sh", "bash",
               None, first, False)
    _identity(first, "op1")
    git(first, "commit", "--quiet", "-m", "ignore deploy/", "--", ".gitignore")
    git(first, "remote", "add", "origin", str(bare))
    git(first, "push", "--quiet", "-u", "origin", "main")
    clones = [Clone("op1", first)]
    for k in range(2, n + 1):
        root = tmp / f"op{k}"
        subprocess.run(["git", "clone", "--quiet", str(bare), str(root)], check=True)
        _identity(root, f"op{k}")
        _write_serve(root, serve)
        if upstream is not None:
            _clone_engine(upstream, root)
        clones.append(Clone(f"op{k}", root))
    return clones


def _identity(root: Path, name: str) -> None:
    git(root, "config", "user.name", name)
    git(root, "config", "user.email", f"{name}@example.com")


def _write_serve(root: Path, text: str) -> None:
    (root / "deploy").mkdir(exist_ok=True)
    (root / "deploy" / "serve.sh").write_text(text)
    (root / "deploy" / "serve.sh").chmod(0o755)


def ledger_view(entries) -> list[tuple]:
    """What two clones must agree on, entry by entry, in order."""
    return [(e.id, e.seq, e.slug, e.state, e.suspicion, e.after, e.before,
             tuple(a.to_dict().items() for a in e.history)) for e in entries]
