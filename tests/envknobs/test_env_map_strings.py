"""Issue 50 item 4: a string of flags in a compose service's ``environment:`` map (an
image whose entrypoint runs ``vllm serve $VLLM_ARGS``): its flags are knobs, edited in the
value, reverted byte for byte; the variable is not edited whole."""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

COMPOSE_ENV = """\
services:
  vllm:
    image: ghcr.io/example/vllm-runner:0.9.2   # entrypoint: vllm serve $MODEL $VLLM_ARGS
    environment:
      MODEL: Qwen/Qwen2.5-7B-Instruct
      VLLM_ARGS: "--max-model-len 8192 --enable-prefix-caching"
      VLLM_LOGGING_LEVEL: INFO
"""


def test_flags_in_an_env_map_value():
    env = get_format("yaml-map", key_path="services.vllm.environment", strings=True)
    found = env.parse(COMPOSE_ENV)
    assert found["--max-model-len"] == "8192" and "VLLM_ARGS" not in found
    out = env.set(COMPOSE_ENV, "--max-model-len", "4096")
    assert '      VLLM_ARGS: "--max-model-len 4096 --enable-prefix-caching"\n' in out
    added = env.set(COMPOSE_ENV, "--max-num-seqs", "64")
    assert "--enable-prefix-caching --max-num-seqs 64\"" in added
    assert env.unset(added, "--max-num-seqs") == COMPOSE_ENV
    assert env.set(COMPOSE_ENV, "VLLM_LOGGING_LEVEL", "DEBUG").count("DEBUG") == 1
    with pytest.raises(FormatError, match="line 6: VLLM_ARGS is a string of flags"):
        env.set(COMPOSE_ENV, "VLLM_ARGS", "--x 1")


def test_record_and_revert(ws):  # noqa: F811
    path = ws.add("compose.yaml", COMPOSE_ENV, "--format", "yaml-map", "--key-path",
                  "services.vllm.environment")
    ws.record("--enable-prefix-caching", "--unset")
    ws.record("--max-model-len=4096")
    assert "--max-model-len" in ws.run("target", "show", "t").stdout
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == COMPOSE_ENV
