"""The OpenAI-compatible ``POST /v1/completions`` (and ``GET /v1/models``).

What is supported: ``prompt`` as text or token ids (or a batch of exactly one of either),
``max_tokens`` (default 16, as OpenAI's), ``temperature``, ``stream`` (server-sent events
ending in ``data: [DONE]``), ``stream_options.include_usage``, ``usage`` on every
non-streamed answer, and two extensions vLLM also takes: ``ignore_eos`` and
``return_token_ids`` (the generated ids in each choice, what the bench digests).

What is refused with 400 rather than ignored (the engine does not implement it, and
ignoring it would silently answer a different question): ``n``/``best_of`` other than 1,
``echo``, ``logprobs``, ``stop``, ``suffix``, ``seed``, ``logit_bias``, ``top_p`` other
than 1 and non-zero penalties.  Batches of several prompts are refused too: send one
request per prompt (the engine batches them anyway).  ``model`` is accepted whatever it
names, as SGLang does; answers carry the served model's name.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from engine.serving.http import BadRequest
from engine.serving.requests import GenerateRequest
from engine.serving.requests import check_flag
from engine.serving.requests import check_prompt
from engine.serving.requests import is_token_list
from engine.serving.requests import sampling

# key -> the values that mean "not used"
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "best_of": (None, 1), "echo": (None, False), "logprobs": (None,),
    "stop": (None, [], ""), "suffix": (None, ""), "seed": (None,), "logit_bias": (None, {}),
    "top_p": (None, 1, 1.0), "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
}


@dataclass
class CompletionRequest:
    gen: GenerateRequest
    include_usage: bool = False
    return_token_ids: bool = False


def _one_prompt(prompt: Any) -> tuple[str | None, list[int] | None]:
    if isinstance(prompt, list) and prompt and not is_token_list(prompt):
        if len(prompt) != 1:
            raise BadRequest(f"'prompt' holds a batch of {len(prompt)} prompts: this engine "
                             "takes one prompt per request")
        prompt = prompt[0]
    if isinstance(prompt, list):
        return None, prompt
    return prompt, None


def parse_completion(body: dict[str, Any]) -> CompletionRequest:
    """Validate a ``/v1/completions`` body; every problem is a :class:`BadRequest`."""
    for key, neutral in _NEUTRAL.items():
        if key in body and body[key] not in neutral:
            raise BadRequest(f"'{key}'={body[key]!r} is not supported by this engine")
    if "prompt" not in body:
        raise BadRequest("'prompt' is required (text or a list of token ids)")
    text, ids = _one_prompt(body["prompt"])
    check_prompt(text, ids)
    max_tokens = body.get("max_tokens")
    params = sampling(16 if max_tokens is None else max_tokens,
                      1.0 if body.get("temperature") is None else body["temperature"],
                      check_flag(body, "ignore_eos"), "max_tokens")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object")
    room = body.get("bootstrap_room")  # set by the router, never by a client
    if room is not None and (not isinstance(room, int) or isinstance(room, bool) or room < 0):
        raise BadRequest("'bootstrap_room' must be a non-negative integer")
    gen = GenerateRequest(ids, text, params, room, None, check_flag(body, "stream"))
    return CompletionRequest(gen, bool(options.get("include_usage")),
                             check_flag(body, "return_token_ids"))


def finish_reason(seq: Any) -> str | None:
    return seq.finish_reason if seq.finish_reason in ("length", "stop") else None


def usage(seq: Any) -> dict[str, int]:
    prompt, out = len(seq.prompt_ids), len(seq.output_ids)
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


class Completion:
    """The answer to one request: its id and time, and the body or stream chunks."""

    def __init__(self, model: str, return_token_ids: bool) -> None:
        self.id = f"cmpl-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model
        self.return_token_ids = return_token_ids

    def _frame(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.id, "object": "text_completion", "created": self.created,
                "model": self.model, "choices": choices}

    def _choice(self, text: str, ids: list[int], reason: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None,
                                  "finish_reason": reason}
        if self.return_token_ids:
            choice["token_ids"] = ids
        return choice

    def body(self, seq: Any, tokenizer: Any) -> dict[str, Any]:
        ids = list(seq.output_ids)
        out = self._frame([self._choice(tokenizer.decode(ids), ids, finish_reason(seq))])
        out["usage"] = usage(seq)
        return out

    def chunk(self, text: str, ids: list[int], reason: str | None) -> dict[str, Any]:
        return self._frame([self._choice(text, ids, reason)])

    def usage_chunk(self, seq: Any) -> dict[str, Any]:
        return {**self._frame([]), "usage": usage(seq)}


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error shape (the ``openai`` client raises with this message)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class TextDeltas:
    """Incremental detokenisation: the new text since the last call, holding back a
    trailing partial UTF-8 character (decoded as U+FFFD) until it completes."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.sent = ""
        self.ids_sent = 0

    def delta(self, ids: list[int], final: bool) -> str:
        text = self.tokenizer.decode(ids)
        if not final:
            text = text.rstrip("\ufffd")
        if not text.startswith(self.sent):
            return ""  # a tokenizer that rewrote the past: send the rest at the end
        out, self.sent = text[len(self.sent):], max(text, self.sent, key=len)
        return out


def models_body(model: str, created: float) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model",
                                        "created": int(created), "owned_by": "engine"}]}
