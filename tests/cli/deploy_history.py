"""A real-shaped deploy repository for `ledger adopt --git` (issue 51), built with real
git: an SGLang decode launcher hand-tuned over 16 commits and moved twice — a plain
``python3 -m sglang.launch_server`` era, a ``DP_ATTENTION`` switch with an args array,
flags fed by shell variables, then a ``docker run`` era whose readiness loop reads
``docker logs`` through process substitution; a commit that retires tuning knobs, and a
``git revert``.  Modeled on public SGLang launch scripts; our own text."""

from __future__ import annotations

from pathlib import Path

from tests.cli.after_the_incident import git

HEAD = """#!/bin/bash
# GLM-4.6 decode server (PD disaggregation), tuned by hand.
set -euo pipefail
"""

BASE = HEAD + """MODEL=/models/glm-4.6
TP=4
export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
python3 -m sglang.launch_server --model-path $MODEL --tp $TP \\
  --disaggregation-mode decode --chunked-prefill-size 8192 \\
  --mem-fraction-static 0.85 --max-running-request 256 --port 30000
"""


def _tuned(text: str) -> str:
    return text.replace("--chunked-prefill-size 8192", "--chunked-prefill-size 16384") \
        .replace("--mem-fraction-static 0.85", "--mem-fraction-static 0.88")


C2 = _tuned(BASE)
C3 = C2.replace("export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\n", """\
export SGLANG_DISAGGREGATION_QUEUE_SIZE=8
export SGLANG_INIT_NEW_TOKEN_RATIO=0.5
export SGLANG_DP_USE_GATHERV=1
""")
C4 = C3.replace("export SGLANG_DP_USE_GATHERV=1\n", """\
export SGLANG_DP_USE_GATHERV=1
export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600
""")
# c5: git mv launch_decode.sh scripts/glm/serve_decode.sh
C6 = C4.replace("TP=4\n", "TP=4\nDP_ATTENTION=${DP_ATTENTION:-false}\n").replace(
    "export SGLANG_DP_USE_GATHERV=1\n", "").replace(
    "python3 -m sglang", """\
if [[ $DP_ATTENTION == true ]]; then
  export SGLANG_DP_USE_GATHERV=1
  EXTRA_ARGS=(--enable-dp-attention --dp-size 4)
else
  EXTRA_ARGS=()
fi
python3 -m sglang""").replace("--port 30000", '--port 30000 "${EXTRA_ARGS[@]}"')
C7 = C6.replace("DP_ATTENTION=${DP_ATTENTION:-false}\n",
                "DP_ATTENTION=${DP_ATTENTION:-false}\nCONC=${CONC:-64}\n").replace(
    "--max-running-request 256", "--max-running-requests ${CONC} --cuda-graph-max-bs ${CONC}")
C8 = C7.replace("CONC=${CONC:-64}\n", "CONC=${CONC:-64}\nCHUNKED_PREFILL_SIZE=16384\n").replace(
    "--chunked-prefill-size 16384", "--chunked-prefill-size $CHUNKED_PREFILL_SIZE")
C9 = C8.replace("  EXTRA_ARGS=(--enable-dp-attention --dp-size 4)\n", """\
  export SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=8
  EXTRA_ARGS=(--enable-dp-attention --dp-size 4 --moe-dense-tp-size 1)
""")
# c10: git mv scripts/glm/serve_decode.sh deploy/decode/serve.sh
DOCKER_LAUNCH = """\
server_name=glm-decode
docker run -d --rm --name $server_name --gpus all --ipc=host --shm-size 32g \\
  -e SGLANG_DISAGGREGATION_QUEUE_SIZE -e SGLANG_INIT_NEW_TOKEN_RATIO \\
  -e SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT \\
  -v /models:/models lmsysorg/sglang:v0.5.23-cu129 \\
  python3 -m sglang.launch_server --model-path $MODEL --tp $TP \\
  --disaggregation-mode decode --chunked-prefill-size $CHUNKED_PREFILL_SIZE \\
  --mem-fraction-static 0.88 --max-running-requests ${CONC} --cuda-graph-max-bs ${CONC} \\
  --port 30000 "${EXTRA_ARGS[@]}"
while read -r line; do
  echo "$line"
  if [[ "$line" == *"The server is fired up"* ]]; then break; fi
done < <(docker logs -f --tail=0 $server_name 2>&1)
"""
C11 = C9[:C9.index("python3 -m sglang")] + DOCKER_LAUNCH
C12 = C11.replace("export SGLANG_INIT_NEW_TOKEN_RATIO=0.5\n", "").replace(
    " -e SGLANG_INIT_NEW_TOKEN_RATIO", "").replace("--mem-fraction-static 0.88 ", "")
# The export reaches the container only with an -e of its own (docker run passes no other
# env): a CTAS export without one would have been a change the server never saw.
C13 = C12.replace("export SGLANG_DISAGGREGATION_QUEUE_SIZE=8\n",
                  "export SGLANG_DISAGGREGATION_QUEUE_SIZE=8\n"
                  "export SGLANG_SM120_MMA_TARGET_CTAS=512  # +12.8% @c64\n").replace(
    "  -e SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT \\\n",
    "  -e SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT -e SGLANG_SM120_MMA_TARGET_CTAS \\\n")
# c14: git revert c13
C15 = C12.replace("CONC=${CONC:-64}", "CONC=${CONC:-128}").replace(
    "--port 30000 \"${EXTRA_ARGS", "--port 30000 --watchdog-timeout 600 \"${EXTRA_ARGS")
C16 = C15.replace("TP=4\n", "TP=8\n")

# (date, subject, path, text): text None is a `git mv` to path, "revert" a `git revert`
COMMITS = [
    ("2026-10-01T09:00:00+00:00", "glm decode: launch script", "launch_decode.sh", BASE),
    ("2026-10-03T10:00:00+00:00", "tune chunked prefill and mem fraction", "launch_decode.sh", C2),
    ("2026-10-06T11:00:00+00:00", "PD queue 8, new-token ratio, gatherv", "launch_decode.sh", C3),
    ("2026-10-08T12:00:00+00:00", "fix: bootstrap timeout for slow prefill", "launch_decode.sh", C4),
    ("2026-10-10T09:00:00+00:00", "move launchers under scripts/", "scripts/glm/serve_decode.sh", None),
    ("2026-10-14T15:30:00+00:00", "DP attention switch", "scripts/glm/serve_decode.sh", C6),
    ("2026-10-20T10:00:00+00:00", "cuda graphs follow concurrency", "scripts/glm/serve_decode.sh", C7),
    ("2026-10-22T10:00:00+00:00", "chunked prefill from the environment", "scripts/glm/serve_decode.sh", C8),
    ("2026-10-25T16:00:00+00:00", "DP: thread pool 8, dense tp 1", "scripts/glm/serve_decode.sh", C9),
    ("2026-11-02T09:00:00+00:00", "move to deploy/decode", "deploy/decode/serve.sh", None),
    ("2026-11-03T13:00:00+00:00", "run in docker, wait for the server", "deploy/decode/serve.sh", C11),
    ("2026-11-10T09:00:00+00:00", "retire old tuning knobs", "deploy/decode/serve.sh", C12),
    ("2026-12-01T14:48:00+00:00", "perf: CTAS 512 (+12.8% @c64)", "deploy/decode/serve.sh", C13),
    ("2026-12-02T14:14:00+00:00", "revert", "deploy/decode/serve.sh", "revert"),
    ("2026-12-02T15:05:00+00:00", "concurrency 128, watchdog", "deploy/decode/serve.sh", C15),
    ("2026-12-03T10:00:00+00:00", "decode on tp 8", "deploy/decode/serve.sh", C16),
]


def commit_steps(repo: Path, steps) -> list[str]:
    """Commit ``(date, subject, path, text)`` steps in a new repository at ``repo`` (text
    None: a ``git mv`` of the file to path; "revert": a ``git revert`` of HEAD); the
    commit ids, oldest first."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    at = None
    for date, subject, path, text in steps:
        if text == "revert":
            git(repo, "revert", "--no-edit", "HEAD", date=date)
            continue
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            git(repo, "mv", at, path)
        else:
            (repo / path).write_text(text)
            git(repo, "add", path)
        at = path
        git(repo, "commit", "-q", "-m", subject, date=date)
    return git(repo, "log", "--reverse", "--format=%H").split()


def adopt_git(ledger, top: Path, repo: Path, path: str, *options: str):
    """A workspace managing ``repo/path`` as target ``decode``, and the result of
    ``adopt decode --git repo --path path --out PLAN``: (workspace, plan path, result)."""
    ws = top / "ws"
    assert ledger("init", ws, "--root", f"ops={top}").exit_code == 0
    r = ledger("-C", ws, "target", "add", "decode", repo / path, "--format", "bash")
    assert r.exit_code == 0, r.stderr
    plan_path = top / "plan.yaml"
    return ws, plan_path, ledger("-C", ws, "adopt", "decode", "--git", repo, "--path", path,
                                 "--out", plan_path, *options)


def make_deploy_repo(top: Path) -> tuple[Path, list[str]]:
    """The repository and its commit ids, oldest first."""
    repo = top / "deploy-repo"
    commit_steps(repo, COMMITS)
    (repo / "README.md").write_text("deploy scripts\n")  # a commit that does not touch it
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "readme", date="2026-12-04T10:00:00+00:00")
    return repo, git(repo, "log", "--reverse", "--format=%H").split()
