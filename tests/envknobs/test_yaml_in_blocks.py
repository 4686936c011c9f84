"""Issue 50 item 4: YAML embedded in a block scalar, edited in place with the outer
block's indentation kept: KubeRay's RayService ``serveConfigV2: |`` (Ray Serve LLM's
``llm_configs[0].engine_kwargs`` for vLLM, and a ``runtime_env.env_vars`` env map), and a
ConfigMap carrying the engine's config file under ``data:`` (KAITO's
``inference_config.yaml`` with a ``vllm:`` section).  Fixtures follow those public shapes.
"""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

RAYSERVICE = """\
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: llama-3-8b
spec:
  serveConfigV2: |
    applications:
    - name: llms
      import_path: ray.serve.llm:build_openai_app
      route_prefix: "/"
      args:
        llm_configs:
        - model_loading_config:
            model_id: meta-llama/Meta-Llama-3-8B-Instruct
          engine_kwargs:
            tensor_parallel_size: 2
            max_model_len: 8192   # fits the KV cache on L4s
            enable_chunked_prefill: true
      runtime_env:
        env_vars:
          VLLM_USE_V1: "1"
  rayClusterConfig:
    rayVersion: "2.46.0"
"""

KAITO = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ds-inference-params
data:
  inference_config.yaml: |
    # Maximum number of steps to find the max available seq len fitting in the GPU memory.
    max_probe_steps: 6

    vllm:
      cpu-offload-gb: 0
      gpu-memory-utilization: 0.95
      swap-space: 4
"""

ENGINE = "spec.serveConfigV2|applications[0].args.llm_configs[0].engine_kwargs"


def test_engine_kwargs_in_serve_config_are_edited_in_their_block():
    kw = get_format("yaml-map", key_path=ENGINE, engine="vllm")
    assert kw.parse(RAYSERVICE) == {"tensor_parallel_size": "2", "max_model_len": "8192",
                                    "enable_chunked_prefill": "true"}
    out = kw.set(RAYSERVICE, "max_model_len", "16384")
    assert "            max_model_len: 16384   # fits the KV cache on L4s\n" in out
    assert out.replace("16384", "8192") == RAYSERVICE
    added = kw.set(RAYSERVICE, "gpu_memory_utilization", "0.9")
    assert "            enable_chunked_prefill: true\n            gpu_memory_utilization: 0.9\n" \
        in added
    assert kw.unset(added, "gpu_memory_utilization") == RAYSERVICE
    lines = {k.knob: k.places[0].line for k in kw.summary(RAYSERVICE).knobs}
    assert lines["max_model_len"] == 17  # the file's line


def test_an_env_map_in_the_serve_config():
    env = get_format("yaml-map", key_path="spec.serveConfigV2|applications[0].runtime_env.env_vars",
                     strings=True)
    out = env.set(RAYSERVICE, "VLLM_ATTENTION_BACKEND", "FLASHINFER")
    assert '          VLLM_USE_V1: "1"\n          VLLM_ATTENTION_BACKEND: \"FLASHINFER\"\n' in out
    assert env.unset(out, "VLLM_ATTENTION_BACKEND") == RAYSERVICE


def test_a_configmap_file_section():
    vllm = get_format("yaml-map", key_path='data["inference_config.yaml"]|vllm', engine="vllm")
    assert vllm.parse(KAITO)["gpu-memory-utilization"] == "0.95"
    out = vllm.set(KAITO, "gpu-memory-utilization", "0.9")
    assert "      gpu-memory-utilization: 0.9\n" in out
    assert vllm.set(out, "gpu-memory-utilization", "0.95") == KAITO


def test_errors_name_file_lines():
    with pytest.raises(FormatError, match=r"line 6: the string at 'spec.serveConfigV2' is not"):
        get_format("yaml-map", key_path=ENGINE).parse(
            RAYSERVICE.replace("serveConfigV2: |", "serveConfigV2: >"))
    with pytest.raises(FormatError, match="not found"):
        get_format("yaml-map", key_path="spec.serveConfigV2|applications[0].nope").parse(
            RAYSERVICE)


def test_record_and_revert_through_the_cli(ws):  # noqa: F811
    path = ws.add("rayservice.yaml", RAYSERVICE, "--format", "yaml-map", "--key-path", ENGINE,
                  "--flags", "vllm")
    ws.record("max_model_len=16384")
    ws.record("enable_chunked_prefill", "--unset")
    ws.record("gpu_memory_utilization=0.9")
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == RAYSERVICE
