"""Issue 50 item 4: keys a map gets through ``<<: *anchor`` are read as the program reads
them, shown with where they come from, and an edit of one is refused naming both places.
The fixture follows compose files that share an engine env through ``x-`` extension
fields (``x-vllm-env: &vllm-env`` merged into each service's ``environment:``)."""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError

COMPOSE = """\
x-vllm-env: &vllm-env
  VLLM_LOGGING_LEVEL: INFO
  VLLM_ATTENTION_BACKEND: FLASHINFER

services:
  prefill:
    image: vllm/vllm-openai:v0.9.2
    environment:
      <<: *vllm-env
      VLLM_LOGGING_LEVEL: DEBUG
      VLLM_USE_V1: "1"
"""


def test_merged_keys_are_read_and_shown_with_their_source():
    env = get_format("yaml-map", key_path="services.prefill.environment", strings=True)
    assert env.parse(COMPOSE) == {"VLLM_LOGGING_LEVEL": "DEBUG",  # the explicit key wins
                                  "VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_V1": "1"}
    found = env.summary(COMPOSE)
    assert {k.knob: k.places[0].line for k in found.knobs}["VLLM_ATTENTION_BACKEND"] == 3
    assert "VLLM_ATTENTION_BACKEND comes from line 3 (in &vllm-env merged with `<<:` at " \
           "line 9)" in found.notes


def test_an_edit_of_a_merged_key_is_refused_naming_both_places():
    env = get_format("yaml-map", key_path="services.prefill.environment", strings=True)
    for edit in (lambda: env.set(COMPOSE, "VLLM_ATTENTION_BACKEND", "FLASH_ATTN"),
                 lambda: env.unset(COMPOSE, "VLLM_ATTENTION_BACKEND")):
        with pytest.raises(FormatError, match=r"VLLM_ATTENTION_BACKEND comes from line 3 .*"
                                              r"line 9.*by hand, then record it with --adopt"):
            edit()
    # an explicit key over a merged one is the map's own: edited as ever
    out = env.set(COMPOSE, "VLLM_LOGGING_LEVEL", "WARNING")
    assert "      VLLM_LOGGING_LEVEL: WARNING\n" in out
    assert "  VLLM_LOGGING_LEVEL: INFO\n" in out
