"""Issue 50 item 2: a write of an env knob the launch wrapper never passes on is refused,
naming the line, why, and how that wrapper passes one variable (``env -i``, ``sudo``), or
written where it reaches the server (an ``--env K=V`` of ``apptainer exec --cleanenv``); wrappers that pass the
env on (``apptainer exec`` without ``--cleanenv``, ``sudo -E``) are stepped over to the
server, whose flags are read.  Fixtures shaped like public Slurm + Apptainer job scripts
(``apptainer exec --nv --cleanenv --env HF_HOME=... -B ... $SIF vllm serve ...``)."""

from __future__ import annotations

import pytest

from envknobs.formats.bash import BashFormat
from envknobs.formats.common.wrappers import env_dropped
from envknobs.formats.common import FormatError

BASH = BashFormat()

SLURM_CLEANENV = """\
#!/bin/bash
#SBATCH --job-name=vllm-gpu
#SBATCH -G A100:4
set -euo pipefail
export HF_HOME=/scratch/hf
export VLLM_ATTENTION_BACKEND=FLASH_ATTN

module load gcc cuda apptainer
mkdir -p $HF_HOME logs
apptainer exec \\
  --nv \\
  --cleanenv \\
  --env HF_HOME="$HF_HOME" \\
  --env CUDA_VISIBLE_DEVICES=0,1,2,3 \\
  -B "$HF_HOME:$HF_HOME" \\
  /scratch/vllm.sif \\
  bash -lc "vllm serve openai/gpt-oss-120b --tensor-parallel-size 4 --port 8080"
"""


@pytest.mark.parametrize("launch,dropped", [
    ("env -i PATH=/usr/bin vllm serve Q --max-num-seqs 64", "env -i"),
    ("sudo -u svc vllm serve Q --max-num-seqs 64", "sudo"),
])
def test_a_wrapper_that_drops_the_env_refuses_an_env_write(launch, dropped):
    text = f"#!/bin/bash\nexport VLLM_LOGGING_LEVEL=INFO\n{launch}\n"
    assert BASH.parse(text)["--max-num-seqs"] == "64"  # the server is found behind it
    for edit in (lambda: BASH.set(text, "VLLM_LOGGING_LEVEL", "DEBUG"),
                 lambda: BASH.unset(text, "VLLM_LOGGING_LEVEL"),
                 lambda: BASH.set(text, "VLLM_USE_V2", "1")):
        with pytest.raises(FormatError, match=f"line 3: `{dropped}` gives the command it "
                                              "runs none of the script's environment"):
            edit()
    assert any(dropped in n for n in BASH.summary(text).notes)
    # a flag of that server still takes effect: written as ever
    assert "--max-num-seqs 128" in BASH.set(text, "--max-num-seqs", "128")


@pytest.mark.parametrize("launch,option", [
    ("apptainer exec --nv --cleanenv img.sif vllm serve Q --max-num-seqs 64",
     "apptainer exec --env VLLM_LOGGING_LEVEL=DEBUG --nv"),
    ("singularity exec -e --bind /a:/a img.sif vllm serve Q --max-num-seqs 64",
     "singularity exec --env VLLM_LOGGING_LEVEL=DEBUG -e"),
    ("srun -N 1 apptainer run --containall img.sif vllm serve Q --max-num-seqs 64",
     "apptainer run --env VLLM_LOGGING_LEVEL=DEBUG --containall"),
])
def test_a_clearing_container_wrapper_takes_the_write_as_an_env_option(launch, option):
    text = f"#!/bin/bash\nexport VLLM_LOGGING_LEVEL=INFO\n{launch}\n"
    assert BASH.parse(text)["--max-num-seqs"] == "64"
    assert "VLLM_LOGGING_LEVEL" not in BASH.parse(text)  # the export never reaches it
    out = BASH.set(text, "VLLM_LOGGING_LEVEL", "DEBUG")
    assert option in out and "export VLLM_LOGGING_LEVEL=INFO\n" in out
    assert BASH.parse(out)["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert BASH.unset(out, "VLLM_LOGGING_LEVEL") == text
    assert BASH.unset(text, "VLLM_LOGGING_LEVEL") == text  # nothing of it reaches the server
    assert any("only this launch's --env options" in n for n in BASH.summary(text).notes)


@pytest.mark.parametrize("launch", [
    "apptainer exec --nv --bind /a:/a img.sif vllm serve Q --max-num-seqs 64",
    "singularity run --nv img.sif vllm serve Q --max-num-seqs 64",
    "sudo -E -u svc vllm serve Q --max-num-seqs 64",
    "env VLLM_X=1 vllm serve Q --max-num-seqs 64",
])
def test_a_wrapper_that_passes_the_env_on_takes_the_write(launch):
    text = f"#!/bin/bash\nexport VLLM_LOGGING_LEVEL=INFO\n{launch}\n"
    assert BASH.parse(text)["--max-num-seqs"] == "64"
    assert "export VLLM_LOGGING_LEVEL=DEBUG" in BASH.set(text, "VLLM_LOGGING_LEVEL", "DEBUG")
    assert not BASH.summary(text).notes


def test_a_job_whose_server_runs_in_a_script_string_gets_an_env_option(tmp_path, ledger):
    script = tmp_path / "job.sbatch"
    script.write_text(SLURM_CLEANENV)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "job", script, "--format", "bash").exit_code == 0
    shown = ledger("-C", root, "target", "show", "job").stdout
    assert "line 10: the server gets only this launch's --env options" in shown
    assert "launch 1: line 10-17 (apptainer exec --cleanenv)" in shown
    r = ledger("-C", root, "record", "knob", "job", "VLLM_ATTENTION_BACKEND=FLASHINFER",
               "--class", "perf", "--title", "fi", "--no-validate")
    assert r.exit_code == 0, r.stderr
    assert "(unset) -> FLASHINFER" in r.stdout  # the export above never reached vLLM
    assert "  --env VLLM_ATTENTION_BACKEND=FLASHINFER \\\n" in script.read_text()
    assert ledger("-C", root, "revert", "--perf-only", "--why", "w").exit_code == 0
    assert script.read_text() == SLURM_CLEANENV


def test_env_dropped_reads_options_as_the_wrapper_does():
    words = "apptainer exec --bind -e img.sif vllm serve".split()
    assert env_dropped(words, 0, lambda t: t.startswith("-")) is None  # -e is --bind's value
    words = "sudo --preserve-env=HF_TOKEN vllm serve".split()
    assert env_dropped(words, 0, lambda t: t.startswith("-")) is None
