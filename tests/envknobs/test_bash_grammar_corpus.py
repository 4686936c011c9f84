"""The bash grammar real launch scripts use (issue 51 item 2): every shape here is what
public SGLang / vLLM deploy scripts write (process substitution feeding a log-watching
loop, ``exec > >(tee …)``, ``mapfile < <(…)``, arithmetic, ``[[ =~ ]]``, args arrays …).
Each is checked by real ``bash -n`` first — the oracle — and must then parse; composed
at random (hypothesis), every script ``bash -n`` accepts must parse too."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.formats.bash import BashFormat

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# One command or compound each, as real launch scripts write them (our own text).
SHAPES = [
    'while read -r line; do\n  echo "$line"\n  if [[ "$line" == *"fired up"* ]]; then break; fi\n'
    'done < <(docker logs -f --tail=0 $server_name 2>&1)',
    "diff <(sort a.txt) <(sort b.txt) > /dev/null",
    'exec > >(tee -a "$LOG_DIR/serve.log") 2>&1',
    "tee >(gzip > bench.log.gz) < input.log",
    'mapfile -t GPUS < <(nvidia-smi --query-gpu=index --format=csv,noheader)',
    'readarray -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
    'while IFS=, read -r conc isl osl; do echo "$conc"; done < <(tail -n +2 sweep.csv)',
    'source <(grep -v "^#" .env)',
    "paste <(cut -f1 a) <(cut -f2 b) | column -t",
    'NUM_GPUS=$(nvidia-smi -L | wc -l)',
    'TP=${TP:-8}; DP=${DP:-1}; WORLD=$((TP * DP))',
    'CHUNK=$((8192 * TP))',
    'for ((i = 0; i < NUM_GPUS; i++)); do echo "$i"; done',
    '(( WORLD > 8 )) && echo big',
    'if [[ $MODEL =~ ^deepseek ]]; then export SGLANG_ENABLE_JIT_DEEPGEMM=1; fi',
    'case "$MODE" in\n  prefill) ROLE=prefill ;;\n  decode|both) ROLE=decode ;;\n  *) exit 1 ;;\nesac',
    'ARGS=(--tp "$TP" --dp "$DP")\nARGS+=(--enable-dp-attention)\npython3 -m sglang.launch_server "${ARGS[@]}"',
    "declare -A PORTS=([prefill]=30000 [decode]=30001)",
    'trap \'kill $SERVER_PID 2>/dev/null\' EXIT INT TERM',
    'python3 -m sglang.launch_server --model-path "$MODEL" --port 30000 &\nSERVER_PID=$!\nwait $SERVER_PID',
    "until curl -sf localhost:30000/health > /dev/null; do sleep 5; done",
    'cat <<EOF > config.yaml\nmodel: $MODEL\nEOF',
    'read -r -a ARR <<< "$CONC_LIST"',
    "{ echo start; date; } 2>&1 | tee -a run.log",
    "vllm serve $MODEL --port 8000 |& tee vllm.log",
    'set -euo pipefail; shopt -s nullglob',
    'wait_for() { local url=$1; until curl -sf "$url"; do sleep 1; done; }',
    "function cleanup {\n  pkill -P $$ || true\n}",
    'LOG=$(date +%Y%m%d-%H%M)_${MODE}.log',
    'echo "${MODEL##*/}" "${MODEL%/*}" "${MODEL//\\//_}" "${#ARR[@]}"',
    'printf -v PAD "%05d" "$i"',
    'if ! command -v nvidia-smi > /dev/null; then echo "no gpu" >&2; fi',
    'x=`hostname -s`',
    "echo out >| forced.log; echo both &>> all.log",
    'select m in a b; do break; done',
    'python3 - <<\'PY\'\nimport os\nprint(os.environ["TP"])\nPY',
    'coproc tail -f server.log',
    'VAL=$(cat <(echo 1) | head -1)',
    'if (( $(echo "$FRAC > 0.8" | bc -l) )); then echo high; fi',
]


def bash_accepts(text: str, tmp_path) -> bool:
    path = tmp_path / "shape.sh"
    path.write_text(text)
    return subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("shape", SHAPES, ids=range(len(SHAPES)))
def test_every_shape_bash_accepts_parses(shape, tmp_path):
    text = f"#!/bin/bash\nexport SGLANG_X=1\n{shape}\npython3 -m sglang.launch_server --tp 4\n"
    assert bash_accepts(text, tmp_path), shape  # the corpus itself is valid bash
    summary = BashFormat().summary(text)
    knobs = {k.knob: k for k in summary.knobs}
    assert knobs["SGLANG_X"].value == "1"  # what comes before and after is still read
    assert "--tp-size" in knobs


def _wrap(inner: str, how: int) -> str:
    return [inner,
            f"if [[ -n $X ]]; then\n{inner}\nfi",
            f"while true; do\n{inner}\nbreak\ndone",
            f"run() {{\n{inner}\n}}",
            f"( {inner}\n)",
            f"case $M in\n a) {inner}\n ;;\nesac"][how]


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.tuples(st.sampled_from(SHAPES), st.integers(0, 5)), min_size=1,
                      max_size=4))
def test_composed_scripts_bash_accepts_parse(parts, tmp_path_factory):
    text = "#!/bin/bash\n" + "\n".join(_wrap(s, how) for s, how in parts) + "\n"
    if not bash_accepts(text, tmp_path_factory.mktemp("s")):
        return  # the oracle refuses it (a here-doc wrapped on one line): not our claim
    BashFormat().summary(text)


def test_a_refused_script_names_the_construct_and_line():
    from envknobs.formats import FormatError

    with pytest.raises(FormatError, match=r"line 3: unterminated <\( \(process substitution\)"):
        BashFormat().summary("#!/bin/bash\nexport A=1\ndone < <(docker logs -f x\n")
