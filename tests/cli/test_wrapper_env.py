"""Issue 50 item 2: a knob is written where the launch wrapper lets it reach the server.

``apptainer exec --cleanenv`` (Slurm jobs on HPC clusters) gives the command only its
``--env K=V`` options: a knob recorded there becomes one more ``--env K=V`` of that
wrapper (or its existing ``--env`` is edited), an ``export`` above it is not what the
server reads, and a revert takes the option out byte for byte.  The fixture follows the
shape of public Slurm launchers of vLLM (``apptainer exec`` over several continuation
lines, ``--env K="$HF_HOME"``, ``bash -lc "vllm serve ..."``).
"""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

SLURM_APPTAINER = """\
#!/bin/bash
#SBATCH --job-name=vllm-gpu
#SBATCH --gres=gpu:4
set -euo pipefail
export HF_HOME=/scratch/$USER/hf
export MODEL=${MODEL:-meta-llama/Llama-3.3-70B-Instruct}
# not seen by the server: --cleanenv below
export VLLM_ATTENTION_BACKEND=FLASH_ATTN

module load apptainer
apptainer exec \\
  --nv \\
  --cleanenv \\
  --env HF_HOME="$HF_HOME" \\
  --env HF_HUB_OFFLINE=1 \\
  -B "$HF_HOME:$HF_HOME" \\
  /scratch/sif/vllm.sif \\
  bash -lc "vllm serve $MODEL --tensor-parallel-size 4 --port 8000"
"""

ONE_LINE = """\
#!/bin/bash
singularity exec --nv -e vllm.sif python3 -m vllm.entrypoints.openai.api_server --model m
"""


def test_the_wrapper_env_is_what_the_server_reads():
    bash = get_format("bash")
    values = bash.parse(SLURM_APPTAINER)
    assert values["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_ATTENTION_BACKEND" not in values  # exported, but dropped by --cleanenv
    out = bash.set(SLURM_APPTAINER, "HF_HUB_OFFLINE", "0")
    assert "  --env HF_HUB_OFFLINE=0 \\\n" in out
    assert bash.set(out, "HF_HUB_OFFLINE", "1") == SLURM_APPTAINER


def test_a_new_knob_becomes_an_env_option_and_its_revert_takes_it_out(ws):  # noqa: F811
    path = ws.add("serve.sbatch", SLURM_APPTAINER, "--format", "bash")
    r = ws.record("VLLM_ATTENTION_BACKEND=FLASHINFER")
    assert "(unset) -> FLASHINFER" in r.stdout
    text = path.read_text()
    # next to the wrapper's other --env options, on a continuation line of its own
    assert "  --env VLLM_ATTENTION_BACKEND=FLASHINFER \\\n  --env HF_HUB_OFFLINE=1" in text
    assert "export VLLM_ATTENTION_BACKEND=FLASH_ATTN\n" in text  # left as it was
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == SLURM_APPTAINER
    ws.record("HF_HOME", "--unset")
    assert "--env HF_HOME" not in path.read_text()
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == SLURM_APPTAINER


def test_a_one_line_wrapper_gets_the_option_after_its_name():
    bash = get_format("bash")
    out = bash.set(ONE_LINE, "VLLM_USE_V1", "1")
    assert out.splitlines()[1].startswith("singularity exec --env VLLM_USE_V1=1 --nv -e ")
    assert bash.unset(out, "VLLM_USE_V1") == ONE_LINE


def test_the_flags_inside_the_bash_lc_string_are_edited_there():
    bash = get_format("bash")
    assert bash.parse(SLURM_APPTAINER)["--tensor-parallel-size"] == "4"
    lines = {k.knob: k.places[0].line for k in bash.summary(SLURM_APPTAINER).knobs}
    assert lines["--tensor-parallel-size"] == 18 and lines["--port"] == 18
    out = bash.set(SLURM_APPTAINER, "--max-num-seqs", "8")
    assert '  bash -lc "vllm serve $MODEL --tensor-parallel-size 4 --port 8000 ' \
           '--max-num-seqs 8"\n' in out
    assert bash.unset(out, "--max-num-seqs") == SLURM_APPTAINER
    # a value needing quotes: fine inside "...", where single quotes are the inner shell's
    assert "--served-model-name 'llama 70b'\"" in \
        bash.set(SLURM_APPTAINER, "--served-model-name", "llama 70b")


def test_a_value_the_outer_quoting_cannot_hold_is_refused_naming_the_line():
    script = "#!/bin/bash\nsrun bash -c 'vllm serve m --port 8000'\n"
    bash = get_format("bash")
    assert bash.set(script, "--port", "8001") == script.replace("8000", "8001")
    with pytest.raises(FormatError, match=r"line 2: the value needs \"'\", which the '...' "
                                          r"string around the server's command cannot hold"):
        bash.set(script, "--served-model-name", "a b")


def test_a_script_string_the_reader_cannot_map_is_refused_naming_its_line():
    text = SLURM_APPTAINER.replace("--port 8000", "--port 8000 \\\"x\\\"")
    with pytest.raises(FormatError, match=r"line 18: the server's flags are inside the script "
                                          r"that `bash` runs.*record it with --adopt"):
        get_format("bash").set(text, "--max-num-seqs", "8")


def test_record_a_flag_in_the_string_and_revert(ws):  # noqa: F811
    path = ws.add("serve.sbatch", SLURM_APPTAINER, "--format", "bash")
    r = ws.record("--tensor-parallel-size=8")
    assert "4 -> 8" in r.stdout
    ws.record("--port", "--unset")
    ws.record("--max-num-seqs=64")
    assert 'bash -lc "vllm serve $MODEL --tensor-parallel-size 8 --max-num-seqs 64"' in \
        path.read_text()
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == SLURM_APPTAINER


def test_target_show_names_the_wrapper_env(ws):  # noqa: F811
    ws.add("serve.sbatch", SLURM_APPTAINER, "--format", "bash")
    shown = ws.run("target", "show", "t").stdout
    assert "HF_HUB_OFFLINE" in shown
    # MODEL is expanded on the wrapper's own line ("vllm serve $MODEL"): the script's value
    # is the server's model, so it is a knob of this launch; the backend export is not
    assert "not the script's exports VLLM_ATTENTION_BACKEND (line 8) (recording" in shown
    assert "MODEL" in shown.split("not the script's exports")[0]


def test_an_env_option_holding_several_variables_is_not_edited_inside():
    script = "#!/bin/bash\napptainer exec --cleanenv --env A=1,B=2 img.sif vllm serve m --port 8000\n"
    bash = get_format("bash")
    for knob in ("A", "VLLM_USE_V1"):  # A's value is not "1,B=2"; nothing is guessed
        with pytest.raises(FormatError, match=r"line 2: --env A=1,B=2 sets several variables "
                                              r"in one option.*one --env K=V each by hand"):
            bash.set(script, knob, "3")
    assert bash.set(script, "--port", "8001") == script.replace("8000", "8001")


# Issue 50: apptainer passes the script's APPTAINERENV_K / SINGULARITYENV_K in as K even
# with --cleanenv.  The shape of public Slurm vLLM jobs (#SBATCH header, module load, an
# `apptainer exec --nv --cleanenv` over continuation lines) with the prefix exports that
# apptainer's docs show for passing one variable into a clean container.
PREFIXED = """\
#!/bin/bash
#SBATCH --job-name=vllm
#SBATCH --gres=gpu:4
set -euo pipefail
export HF_HOME=/scratch/$USER/hf
export APPTAINERENV_VLLM_ATTENTION_BACKEND=FLASHINFER
export SINGULARITYENV_HF_HUB_OFFLINE=1
export VLLM_USE_V1=1  # not the server's: no prefix, no --env

module load apptainer
apptainer exec --nv --cleanenv \\
  --env HF_HOME="$HF_HOME" \\
  /scratch/sif/vllm.sif \\
  vllm serve /models/llama --tensor-parallel-size 4 --port 8000
"""


def test_a_prefixed_export_is_the_knob_it_sets_inside():
    bash = get_format("bash")
    values = bash.parse(PREFIXED)
    assert values["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert values["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_USE_V1" not in values and "APPTAINERENV_VLLM_ATTENTION_BACKEND" not in values
    places = {k.knob: k.places[0] for k in bash.summary(PREFIXED).knobs}
    assert places["VLLM_ATTENTION_BACKEND"].line == 6  # shown where it is set
    assert places["HF_HUB_OFFLINE"].raw.startswith("export SINGULARITYENV_HF_HUB_OFFLINE=1")
    out = bash.set(PREFIXED, "VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    assert out == PREFIXED.replace("=FLASHINFER", "=FLASH_ATTN")  # edited in place
    assert bash.set(PREFIXED, "HF_HUB_OFFLINE", "0") == PREFIXED.replace("OFFLINE=1", "OFFLINE=0")


def test_a_new_knob_takes_the_prefix_the_script_uses():
    bash = get_format("bash")
    out = bash.set(PREFIXED, "VLLM_USE_V1", "0")
    assert "export APPTAINERENV_VLLM_USE_V1=0\n" in out
    assert "export VLLM_USE_V1=1  #" in out  # still reaches nothing: left alone
    assert bash.parse(out)["VLLM_USE_V1"] == "0"
    assert bash.unset(out, "VLLM_USE_V1") == PREFIXED
    # an --env option wins over the prefix (apptainer's order)
    both = PREFIXED.replace('--env HF_HOME="$HF_HOME"', "--env HF_HUB_OFFLINE=0")
    assert bash.parse(both)["HF_HUB_OFFLINE"] == "0"
    # without prefixed exports a new knob stays an --env option
    assert "--env VLLM_USE_V1=0" in bash.set(SLURM_APPTAINER, "VLLM_USE_V1", "0")


def test_unset_removes_the_prefixed_export_and_revert_puts_it_back(ws):  # noqa: F811
    path = ws.add("serve.sbatch", PREFIXED, "--format", "bash")
    ws.record("VLLM_USE_V1=0")
    assert "export APPTAINERENV_VLLM_USE_V1=0\n" in path.read_text()
    ws.record("VLLM_ATTENTION_BACKEND", "--unset")
    assert "ATTENTION_BACKEND" not in path.read_text()
    ws.record("HF_HUB_OFFLINE=0")
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == PREFIXED
    shown = ws.run("target", "show", "t").stdout
    assert "not the script's exports VLLM_USE_V1 (line 8) (recording one of them writes an " \
           "export APPTAINERENV_K line)" in shown


# Without --cleanenv apptainer passes the script's env on, and APPTAINERENV_K still wins
# over the script's own K (the shape of Slurm jobs that `srun apptainer exec --nv`).
NOT_CLEAN = """\
#!/bin/bash
#SBATCH --gres=gpu:1
export VLLM_ATTENTION_BACKEND=FLASH_ATTN
export APPTAINERENV_VLLM_ATTENTION_BACKEND=FLASHINFER
export VLLM_USE_V1=1
srun apptainer exec --nv /scratch/sif/vllm.sif vllm serve /models/m --port 8000
"""


def test_without_cleanenv_the_prefixed_export_wins_and_is_the_place():
    bash = get_format("bash")
    values = bash.parse(NOT_CLEAN)
    assert values["VLLM_ATTENTION_BACKEND"] == "FLASHINFER" and values["VLLM_USE_V1"] == "1"
    assert "APPTAINERENV_VLLM_ATTENTION_BACKEND" not in values
    out = bash.set(NOT_CLEAN, "VLLM_ATTENTION_BACKEND", "XFORMERS")
    assert out == NOT_CLEAN.replace("=FLASHINFER", "=XFORMERS")  # not the export it shadows
    out = bash.unset(NOT_CLEAN, "VLLM_ATTENTION_BACKEND")  # both, or FLASH_ATTN would show
    assert "VLLM_ATTENTION_BACKEND" not in out and "VLLM_USE_V1=1" in out
