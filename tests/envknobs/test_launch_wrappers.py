"""Issue 25 item 4: launch wrappers (the table in envknobs.formats.common.wrappers).

Each line is a launch as real Slurm / MPI / uv / torchrun / numactl scripts write it: the
server's flags are read behind the wrapper's own options (whose values are never taken
for the program), an edit lands in the server's argv (real bash runs the line with the
wrapper as a shim that prints its argv), and a command that passes flags but is no
launch the reader recognises is named in ``target show``, never guessed at.
"""

from __future__ import annotations

import subprocess

import pytest

from envknobs.formats import get_format

BASH = get_format("bash")

LAUNCHES = [
    ("uv", "uv run --with flashinfer-python vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64"),
    ("uv", "uv run --no-sync python -m sglang.launch_server --model-path /m --tp 2"),
    ("uvx", "uvx --from vllm==0.8.5 vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64"),
    ("torchrun", "torchrun --nproc-per-node 2 --master-port 29500 -m sglang.launch_server "
                 "--model-path /m --tp 2"),
    ("srun", "srun --nodes 1 --ntasks-per-node=1 --container-image lmsysorg/sglang:latest "
             "python3 -m sglang.launch_server --model-path /m --tp 2"),
    ("mpirun", "mpirun -np 2 -x NCCL_DEBUG --bind-to none -mca btl tcp,self python3 -m "
               "sglang.launch_server --model-path /m --tp 2"),
    ("numactl", "numactl --cpunodebind 0 --membind=0 vllm serve Qwen/Qwen2.5-7B-Instruct "
                "--max-num-seqs 64"),
    ("taskset", "taskset 0xff vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64"),
    ("taskset", "taskset -c 0-7 vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64"),
    ("nohup", "nohup env HF_HUB_OFFLINE=1 python3 -m dynamo.vllm --model Qwen/Qwen2.5-7B "
              "--max-num-seqs 64"),
    ("python3", "python3 -m dynamo.sglang --model-path /m --tp 2"),
]


def shim_argv(script: str, wrapper: str) -> list[str]:
    shim = f'{wrapper}() {{ printf "%s\\n" "$@"; }}\n'
    out = subprocess.run(["bash", "-c", shim + script], capture_output=True, text=True,
                         check=True, timeout=30)
    return out.stdout.splitlines()


@pytest.mark.parametrize("wrapper,line", LAUNCHES)
def test_flags_behind_a_wrapper_are_read_and_edited(wrapper, line):
    script = f"#!/bin/bash\nexport NCCL_DEBUG=INFO\n{line}\n"
    (launch,) = BASH.summary(script).launches
    flag, spelled, value = ("--max-num-seqs", "--max-num-seqs", "64") \
        if launch.engine == "vllm" else ("--tp-size", "--tp", "2")
    assert BASH.parse(script)[flag] == value
    out = BASH.set(script, flag, "8")
    argv = shim_argv(out, wrapper)
    server = argv.index("serve") if "serve" in argv else next(
        i for i, a in enumerate(argv) if a.startswith(("sglang.", "dynamo.")))
    args = argv[server + 1 :]
    assert args.count(spelled) == 1 and args[args.index(spelled) + 1] == "8"
    assert argv[:server] == shim_argv(script, wrapper)[:server]  # the wrapper's own words
    assert BASH.set(out, flag, value) == script


def test_an_unrecognised_launch_is_named_not_guessed():
    script = "#!/bin/bash\nexport NCCL_DEBUG=INFO\n/opt/run-server.sh --model m --tp 2\n"
    summary = BASH.summary(script)
    assert not summary.launches and "--tp" not in BASH.parse(script)
    assert any("line 3: '/opt/run-server.sh' passes flags" in n for n in summary.notes)
