"""Issue 50 item 5: places the ledger cannot edit yet are refused with the right reason,
the line and a way forward (a KServe ``VLLM_ADDITIONAL_ARGS`` env value it cannot read, a
compose service with no ``environment:``); one it reads is edited in place (item 4)."""

from __future__ import annotations

import pytest

from envknobs.formats.common import FormatError
from envknobs.formats.yaml.k8s import K8sFormat
from envknobs.formats.yaml.map import YamlMapFormat

KSERVE = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    containers:
      - name: kserve-container
        image: vllm/vllm-openai:latest
        env:
          - name: VLLM_ADDITIONAL_ARGS
            value: >-
              --max-model-len 8192
              --gpu-memory-utilization 0.9
"""


def test_a_flag_held_in_an_env_value_is_edited_there():
    fmt = K8sFormat(container="kserve-container")
    out = fmt.set(KSERVE, "--max-model-len", "4096")
    assert "              --max-model-len 4096\n" in out
    # a new flag goes into the string: the container has no argv of its own
    assert "--gpu-memory-utilization 0.9 --max-num-seqs 32\n" in \
        fmt.set(KSERVE, "--max-num-seqs", "32")


def test_a_flag_in_an_env_value_it_cannot_read_is_refused_naming_that_item():
    odd = KSERVE.replace("--gpu-memory-utilization 0.9", "--override-generation-config {}")
    fmt = K8sFormat(container="kserve-container")
    with pytest.raises(FormatError, match=r"line 11: --max-model-len is in the value of env "
                                          r"VLLM_ADDITIONAL_ARGS .* record the whole string"):
        fmt.set(odd, "--max-model-len", "4096")
    # a flag no env value holds is still refused as before (no argv to put it in)
    with pytest.raises(FormatError, match="no command or argument list"):
        fmt.set(odd, "--max-num-seqs", "32")


def test_a_compose_service_without_environment_says_how_to_add_one():
    text = "services:\n  vllm:\n    image: vllm/vllm-openai:latest\n    command: --port 8000\n"
    with pytest.raises(FormatError, match=r"compose service vllm \(line 3\) has no "
                                          r"environment: yet: add `environment:`"):
        YamlMapFormat("services.vllm.environment").parse(text)
