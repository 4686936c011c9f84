"""Parsing and checking a ``/generate`` request body (shared by every role)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.serving.http import BadRequest
from engine.core.sequence import SamplingParams

MAX_NEW_TOKENS_LIMIT = 1 << 16


@dataclass
class GenerateRequest:
    input_ids: list[int] | None
    prompt: str | None
    params: SamplingParams
    bootstrap_room: int | None = None
    decode_url: str | None = None


def parse_generate(body: dict[str, Any]) -> GenerateRequest:
    """Validate a request; every problem is a :class:`BadRequest` (HTTP 400)."""
    prompt = body.get("prompt")
    ids = body.get("input_ids")
    if (prompt is None) == (ids is None):
        raise BadRequest("give exactly one of 'prompt' (string) or 'input_ids' (list of int)")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise BadRequest("'prompt' must be a non-empty string")
    if ids is not None and (not isinstance(ids, list) or not ids or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ids)):
        raise BadRequest("'input_ids' must be a non-empty list of integers")
    max_new = body.get("max_new_tokens", 16)
    if not isinstance(max_new, int) or isinstance(max_new, bool) \
            or not 1 <= max_new <= MAX_NEW_TOKENS_LIMIT:
        raise BadRequest(f"'max_new_tokens' must be an integer in [1, {MAX_NEW_TOKENS_LIMIT}]")
    try:
        params = SamplingParams(max_new_tokens=max_new,
                                temperature=body.get("temperature", 0.0),
                                ignore_eos=bool(body.get("ignore_eos", False)))
    except ValueError as e:
        raise BadRequest(str(e)) from None
    room = body.get("bootstrap_room")
    if room is not None and (not isinstance(room, int) or isinstance(room, bool) or room < 0):
        raise BadRequest("'bootstrap_room' must be a non-negative integer")
    decode_url = body.get("decode_url")
    if decode_url is not None and (not isinstance(decode_url, str)
                                   or not decode_url.startswith("http://")):
        raise BadRequest("'decode_url' must be an http:// URL")
    return GenerateRequest(ids, prompt, params, room, decode_url)


def response_body(seq: Any, tokenizer: Any, arrival: float, done: float) -> dict[str, Any]:
    """The ``/generate`` answer for a finished sequence."""
    ttft = (seq.token_times[0] - arrival) * 1e3 if seq.token_times else None
    return {
        "output_ids": list(seq.output_ids),
        "text": tokenizer.decode(seq.output_ids),
        "meta": {"ttft_ms": ttft, "e2e_ms": (done - arrival) * 1e3,
                 "finish_reason": seq.finish_reason,
                 "prompt_tokens": len(seq.prompt_ids),
                 "preemptions": seq.num_preemptions},
    }
