"""The on-disk state of issue 27's story, as an operator has it after the incident.

A decode serve script reverted by hand with ``sed`` (CTAS=512 tuned on 12-01, taken out
on 12-02 at 14:14), the ``.bak`` files those edits left, an engine repo with two
inflight-pin bugfix commits, the markdown A/B note of the tuning session and its two
sglang ``bench_serving`` result files, every one with the date it really has.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"

# As before the tuning session (12-01 14:02): the knob at its default.
BEFORE_TUNING = """\
#!/usr/bin/env bash
# Decode server of the PD pair (GLM on 4x RTX PRO 6000 Blackwell).
set -euo pipefail

export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300

MODEL="${MODEL:-/models/glm}"
exec python -m sglang.launch_server --model-path "$MODEL" \\
    --disaggregation-mode decode --port 30001 --tp-size 4
"""

# As tuned (12-01 14:48): the line the hand revert removed, with its comment.
TUNED_LINE = f"export {CTAS}=512  # +12.8% @c64 see DSV4_DECODE_PERF_PLAN.md\n"
TUNED = BEFORE_TUNING.replace("export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n",
                              "export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n" + TUNED_LINE)

# Now: the sed of 12-02 14:14 took the knob out; the watchdog timeout went in at 15:05.
NOW = BEFORE_TUNING.replace("export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n",
                            "export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n"
                            "export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30\n")

NOTE = """\
# DSV4 decode perf plan

## SGLANG_SM120_MMA_TARGET_CTAS (2026-12-01, 14:14-14:48)

| concurrency | 256 (default) | 512 | delta |
|---|---|---|---|
| 64 | 1000 tok/s | 1128 tok/s | +12.8% |
| 96 | 1100 tok/s | 1163 tok/s | +5.7% |

The split-K LSE combine is exact: outputs identical.  Deployed to decode at 14:48.
"""

ENGINE_BASE = "def release(pins):\n    return None\n\n\ndef watchdog():\n    return None\n"
ENGINE_COMMITS = (
    ("2026-12-02T10:12:00+00:00", "pd: release inflight pins when a KV transfer fails",
     ENGINE_BASE.replace("def release(pins):\n    return None",
                         "def release(pins):\n    for p in pins:\n        p.drop()")),
    ("2026-12-02T11:40:00+00:00", "pd: inflight watchdog gives up after the timeout",
     None),
)


def bench_line(conc: int, tput: float) -> dict:
    """One sglang ``bench_serving --output-file`` line."""
    r = {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
         "max_concurrency": conc, "duration": 60.0, "completed": 512,
         "total_input_tokens": 524288, "total_output_tokens": 131072,
         "request_throughput": tput / 256, "input_throughput": 8000.0,
         "output_throughput": tput, "total_throughput": 9000.0}
    for m in ("ttft", "tpot", "itl", "e2e_latency"):
        r[f"mean_{m}_ms"] = r[f"median_{m}_ms"] = r[f"p99_{m}_ms"] = 20.0
    return r


@dataclass
class Story:
    root: Path  # the operator's directory
    script: Path
    engine: Path
    note: Path
    bench_a: Path
    bench_b: Path
    backups: tuple[Path, ...]
    commits: tuple[str, ...]


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "op", "GIT_AUTHOR_EMAIL": "op@example.com",
           "GIT_COMMITTER_NAME": "op", "GIT_COMMITTER_EMAIL": "op@example.com"}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def mtime(path: Path, iso: str) -> None:
    from datetime import datetime

    t = datetime.fromisoformat(iso).timestamp()
    os.utime(path, (t, t))


def make_story(top: Path) -> Story:
    deploy = top / "deploy"
    deploy.mkdir(parents=True)
    script = deploy / "serve_decode.sh"
    backups = (deploy / "serve_decode.sh.bak.20261201-1402",
               deploy / "serve_decode.sh.bak.20261202-1414")
    backups[0].write_text(BEFORE_TUNING)  # copied before the tuning
    backups[1].write_text(TUNED)  # copied before the sed
    script.write_text(NOW)
    script.chmod(0o755)
    engine = top / "engine"
    engine.mkdir()
    git(engine, "init", "-q", "-b", "main")
    (engine / "pd.py").write_text(ENGINE_BASE)
    git(engine, "add", "pd.py")
    git(engine, "commit", "-q", "-m", "engine base", date="2026-11-20T09:00:00+00:00")
    commits = []
    text = ENGINE_BASE
    for date, subject, new in ENGINE_COMMITS:
        text = new if new is not None else text.replace(
            "def watchdog():\n    return None", "def watchdog(timeout=30):\n    return timeout")
        (engine / "pd.py").write_text(text)
        git(engine, "commit", "-q", "-am", subject, date=date)
        commits.append(git(engine, "rev-parse", "HEAD"))
    note = top / "DSV4_DECODE_PERF_PLAN.md"
    note.write_text(NOTE)
    bench_a, bench_b = top / "bench_ctas256.jsonl", top / "bench_ctas512.jsonl"
    for path, scale in ((bench_a, 1.0), (bench_b, 1.128)):
        lines = [bench_line(64, round(1000 * scale + d, 1)) for d in (-3, -1, 0, 1, 3)]
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return Story(top, script, engine, note, bench_a, bench_b, backups, tuple(commits))
