"""Issue 50 item 2: ``docker run`` / ``podman run`` give the container only their ``-e``
options, so an ``export K=V`` (or ``K=V docker run``) above the launch never reaches the
server.  A knob is written where it takes effect: one more ``-e K=V`` on the launch (or its
``-e K=V`` / ``--env K=V`` edited in place); an ``-e K`` pass-through does carry the
script's K, and then the export is the place.  A revert is byte-exact.

The fixtures follow the shape of public launchers: vLLM's "Deploying with Docker" command
(``docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:... --env
"HUGGING_FACE_HUB_TOKEN=..." -p 8000:8000 --ipc=host vllm/vllm-openai:TAG --model ...``)
and SGLang's README / hand launchers (``export tp=2`` above ``sudo docker run ... --env
"HF_TOKEN=${TOKEN}" lmsysorg/sglang:latest python3 -m sglang.launch_server ... --tp ${tp}``).
"""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

VLLM_DOCKER = """\
#!/bin/bash
# vLLM in docker; the host's exports below do not reach the container by themselves
export VLLM_USE_V1=1
export VLLM_ATTENTION_BACKEND=FLASHINFER
TP=2
docker run --runtime nvidia --gpus all \\
    -v ~/.cache/huggingface:/root/.cache/huggingface \\
    --env "HUGGING_FACE_HUB_TOKEN=$HF_TOKEN" \\
    -e VLLM_ATTENTION_BACKEND \\
    -e VLLM_LOGGING_LEVEL=INFO \\
    -p 8000:8000 \\
    --ipc=host \\
    vllm/vllm-openai:v0.8.5 \\
    --model Qwen/Qwen3-8B \\
    --tensor-parallel-size $TP \\
    --max-model-len 8000
"""

SGLANG_SUDO = """\
#!/bin/bash
export model=meta-llama/Llama-3.1-8B-Instruct
export tp=2
export SGLANG_ENABLE_TORCH_COMPILE=1
sudo docker run --gpus all \\
    --shm-size 32g \\
    -p 30000:30000 \\
    -e SGLANG_ENABLE_TORCH_COMPILE \\
    --env "HF_TOKEN=${TOKEN}" \\
    --ipc=host \\
    lmsysorg/sglang:v0.4.6 \\
    python3 -m sglang.launch_server --model-path ${model} --port 30000 --tp ${tp}
"""


def test_an_export_without_an_e_option_is_not_the_servers():
    bash = get_format("bash")
    values = bash.parse(VLLM_DOCKER)
    assert "VLLM_USE_V1" not in values  # exported, never passed to the container
    assert values["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"  # `-e K` passes the export on
    assert values["VLLM_LOGGING_LEVEL"] == "INFO"
    assert values["TP"] == "2"  # `--tensor-parallel-size $TP` is expanded by the script
    out = bash.set(VLLM_DOCKER, "VLLM_USE_V1", "0")
    assert "docker run -e VLLM_USE_V1=0 --runtime nvidia" in out or \
        "    -e VLLM_USE_V1=0 \\\n" in out
    assert "export VLLM_USE_V1=1\n" in out  # left alone: it reaches nothing
    assert bash.parse(out)["VLLM_USE_V1"] == "0"
    assert bash.unset(out, "VLLM_USE_V1") == VLLM_DOCKER


def test_a_pass_through_edits_the_export_and_an_e_value_is_edited_in_place():
    bash = get_format("bash")
    out = bash.set(VLLM_DOCKER, "VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    assert out == VLLM_DOCKER.replace("=FLASHINFER", "=FLASH_ATTN")
    out = bash.set(VLLM_DOCKER, "VLLM_LOGGING_LEVEL", "DEBUG")
    assert out == VLLM_DOCKER.replace("VLLM_LOGGING_LEVEL=INFO", "VLLM_LOGGING_LEVEL=DEBUG")
    out = bash.set(VLLM_DOCKER, "TP", "4")
    assert out == VLLM_DOCKER.replace("TP=2", "TP=4")


def test_a_new_pass_through_knob_becomes_an_export():
    script = "#!/bin/bash\ndocker run --gpus all -e HF_TOKEN vllm/vllm-openai:v0.8.5 --model m\n"
    bash = get_format("bash")
    out = bash.set(script, "HF_TOKEN", "x")
    assert out == "#!/bin/bash\nexport HF_TOKEN=x\n" + script.split("\n", 1)[1]
    assert bash.unset(out, "HF_TOKEN") == script


def test_a_prefix_on_docker_run_is_the_docker_clients_not_the_servers():
    script = ("#!/bin/bash\nVLLM_USE_V1=0 docker run --gpus all vllm/vllm-openai:v0.8.5 "
              "--model m\n")
    bash = get_format("bash")
    assert "VLLM_USE_V1" not in bash.parse(script)
    out = bash.set(script, "VLLM_USE_V1", "1")
    assert out == script.replace("docker run --gpus", "docker run -e VLLM_USE_V1=1 --gpus")
    assert bash.parse(out)["VLLM_USE_V1"] == "1"


def test_podman_env_host_passes_the_script_env_on():
    script = ("#!/bin/bash\nexport VLLM_USE_V1=0\npodman run --env-host --device nvidia.com/gpu=all "
              "vllm/vllm-openai:v0.8.5 --model m\n")
    bash = get_format("bash")
    assert bash.parse(script)["VLLM_USE_V1"] == "0"
    assert bash.set(script, "VLLM_USE_V1", "1") == script.replace("V1=0", "V1=1")


def test_sudo_in_front_drops_what_e_k_would_pass():
    bash = get_format("bash")
    values = bash.parse(SGLANG_SUDO)
    assert "SGLANG_ENABLE_TORCH_COMPILE" not in values  # sudo hands docker none of it
    assert values["tp"] == "2" and values["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(FormatError, match=r"line 8: `-e SGLANG_ENABLE_TORCH_COMPILE` passes "
                                          r"the SGLANG_ENABLE_TORCH_COMPILE of the environment "
                                          r"docker runs in.*sudo.*-e SGLANG_ENABLE_TORCH_COMPILE"
                                          r"=VALUE there by hand"):
        bash.set(SGLANG_SUDO, "SGLANG_ENABLE_TORCH_COMPILE", "0")
    # a knob with no -e at all gets one; the flag expanded from $tp is the script's tp
    out = bash.set(SGLANG_SUDO, "SGLANG_TORCH_PROFILER_DIR", "/tmp/prof")
    assert bash.parse(out)["SGLANG_TORCH_PROFILER_DIR"] == "/tmp/prof"
    assert bash.unset(out, "SGLANG_TORCH_PROFILER_DIR") == SGLANG_SUDO
    assert bash.set(SGLANG_SUDO, "tp", "4") == SGLANG_SUDO.replace("tp=2", "tp=4")


def test_record_and_revert_through_the_cli_are_exact(ws):  # noqa: F811
    path = ws.add("serve.sh", VLLM_DOCKER, "--format", "bash")
    r = ws.record("VLLM_USE_V1=0")
    assert "(unset) -> 0" in r.stdout  # what the server had: nothing
    assert "-e VLLM_USE_V1=0" in path.read_text()
    ws.record("VLLM_ATTENTION_BACKEND=FLASH_ATTN")
    ws.record("VLLM_LOGGING_LEVEL", "--unset")
    text = path.read_text()
    assert "export VLLM_ATTENTION_BACKEND=FLASH_ATTN\n" in text
    assert "VLLM_LOGGING_LEVEL" not in text
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == VLLM_DOCKER


def test_target_show_names_the_exports_the_container_does_not_get(ws):  # noqa: F811
    ws.add("serve.sh", VLLM_DOCKER, "--format", "bash")
    shown = ws.run("target", "show", "t").stdout
    assert ("line 6: the server gets only this launch's -e options; not the script's "
            "exports VLLM_USE_V1 (line 3) (recording one of them writes an -e option)") in shown


def test_target_show_names_the_pass_throughs_sudo_drops(ws):  # noqa: F811
    ws.add("sudo.sh", SGLANG_SUDO, "--format", "bash")
    shown = ws.run("target", "show", "t").stdout
    assert "pass on nothing of the script's" in shown and "SGLANG_ENABLE_TORCH_COMPILE (line 4)" in shown
