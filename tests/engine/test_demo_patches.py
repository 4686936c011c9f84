"""The demo patches (ledger/demo_patches/) apply to the engine, commute, and each changes
behaviour a test can observe: perf = fewer split-K partitions for short contexts with the
same greedy output; bugfix = ``"ignore_eos": "false"`` is refused instead of read as true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "ledger" / "demo_patches"

PROBE = r"""
import json
from engine.model.attention_ops import num_kv_splits
from engine.serving.http import BadRequest
from engine.knobs import EngineKnobs
from engine.core.llm import LLMEngine
from engine.serving.requests import parse_generate
from engine.core.sequence import SamplingParams

eng = LLMEngine(EngineKnobs(num_pages=64, num_threads=1, decode_target_ctas=16), preset="tiny")
seq = eng.generate([list(range(3, 43))], SamplingParams(8, ignore_eos=True))[0]
try:
    parsed = parse_generate({"prompt": "x", "ignore_eos": "false"}).params.ignore_eos
except BadRequest as e:
    parsed = "refused: " + str(e)
print(json.dumps({"splits": num_kv_splits(1, 2, 48, 16), "last_splits": eng.runner.last_num_splits,
                  "output": seq.output_ids, "ignore_eos": parsed}))
"""


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True)


def probe(repo: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                       env=env, cwd=str(repo), check=True)
    return json.loads(r.stdout)


@pytest.fixture
def engine_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "engine-repo"
    shutil.copytree(REPO / "engine", repo / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo


def test_patches_apply_commute_and_change_observable_behaviour(engine_repo: Path):
    perf, bugfix = PATCHES / "perf.patch", PATCHES / "bugfix.patch"
    for patch in (perf, bugfix):
        git(engine_repo, "apply", "--check", str(patch))
    base = probe(engine_repo)

    git(engine_repo, "apply", str(bugfix))
    git(engine_repo, "apply", "--check", str(perf))  # applies on top of the other: commute
    git(engine_repo, "apply", str(perf))
    patched = probe(engine_repo)
    # Either one can be reverted alone from the fully patched tree.
    git(engine_repo, "apply", "-R", "--check", str(perf))
    git(engine_repo, "apply", "-R", "--check", str(bugfix))

    # perf: short contexts are no longer split, and the tokens are the same.
    assert base["splits"] > 1 and patched["splits"] == 1
    assert base["last_splits"] > patched["last_splits"]
    assert base["output"] == patched["output"]
    # bugfix: the string "false" was read as True; now it is refused.
    assert base["ignore_eos"] is True
    assert str(patched["ignore_eos"]).startswith("refused: ")
    # The patches touch different files.
    touched = [{line.split()[-1] for line in p.read_text().splitlines()
                if line.startswith("+++ ")} for p in (perf, bugfix)]
    assert not touched[0] & touched[1]
