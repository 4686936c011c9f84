"""The OpenAI-compatible ``POST /v1/completions`` and ``POST /v1/chat/completions`` (and
``GET /v1/models``).

What is supported: ``prompt`` as text or token ids (or a batch of exactly one of either),
``max_tokens`` (default 16, as OpenAI's), ``temperature``, ``stream`` (server-sent events
ending in ``data: [DONE]``), ``stream_options.include_usage`` (a last chunk with ``usage``
and no choices; the other chunks carry ``"usage": null``, as OpenAI's), ``usage`` on every
non-streamed answer, and two extensions vLLM also takes: ``ignore_eos`` and
``return_token_ids`` (the generated ids in each choice, what the bench digests).

Chat takes ``messages`` instead of ``prompt`` (rendered through the checkpoint's chat
template, else a plain one: engine.chat_template; the content rules are in
engine.serving.requests.check_messages), and ``max_completion_tokens`` or its older name
``max_tokens`` (both only if equal).  Without either, a chat answer runs until EOS or the
end of the model's context (what vLLM and SGLang do; OpenAI has no small default for chat).
Answers are ``chat.completion`` objects with ``message``, streamed as
``chat.completion.chunk`` objects with ``delta`` (the first one with the role).

What is refused with 400 rather than ignored (the engine does not implement it, and
ignoring it would silently answer a different question): ``n``/``best_of`` other than 1,
``echo``, ``logprobs``, ``stop``, ``suffix``, ``seed``, ``logit_bias``, ``top_p`` other
than 1 and non-zero penalties; for chat also ``top_logprobs``, ``tools`` and functions
(``tool_choice`` other than none/auto), a ``response_format`` other than text, non-text
``modalities``, ``audio``, ``prediction``, ``web_search_options``, ``reasoning_effort`` and
``chat_template_kwargs`` (the template is rendered with the messages only).  Batches of
several prompts are refused too: send one request per prompt (the engine batches them
anyway).  ``model`` is accepted whatever it names, as SGLang does; answers carry the served
model's name.  Other keys (``user``, ``metadata``...) change nothing and are ignored.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from engine.serving.http import BadRequest
from engine.serving.requests import GenerateRequest
from engine.serving.requests import check_flag
from engine.serving.requests import check_messages
from engine.serving.requests import check_prompt
from engine.serving.requests import check_room
from engine.serving.requests import is_token_list
from engine.serving.requests import sampling

# key -> the values that mean "not used"
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "best_of": (None, 1), "echo": (None, False), "logprobs": (None,),
    "stop": (None, [], ""), "suffix": (None, ""), "seed": (None,), "logit_bias": (None, {}),
    "top_p": (None, 1, 1.0), "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
}
_CHAT_NEUTRAL: dict[str, tuple[Any, ...]] = {
    **_NEUTRAL, "logprobs": (None, False), "top_logprobs": (None, 0), "tools": (None, []),
    "tool_choice": (None, "none", "auto"), "functions": (None, []),
    "function_call": (None, "none", "auto"), "response_format": (None, {"type": "text"}),
    "modalities": (None, ["text"]), "audio": (None,), "prediction": (None,),
    "web_search_options": (None,), "reasoning_effort": (None,),
    "chat_template_kwargs": (None, {}),
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


def refuse_unsupported(body: dict[str, Any], neutral: dict[str, tuple[Any, ...]]) -> None:
    for key, values in neutral.items():
        if key in body and body[key] not in values:
            raise BadRequest(f"'{key}'={body[key]!r} is not supported by this engine")


def parse_completion(body: dict[str, Any]) -> CompletionRequest:
    """Validate a ``/v1/completions`` body; every problem is a :class:`BadRequest`."""
    refuse_unsupported(body, _NEUTRAL)
    if "prompt" not in body:
        raise BadRequest("'prompt' is required (text or a list of token ids)")
    text, ids = _one_prompt(body["prompt"])
    check_prompt(text, ids)
    max_tokens = body.get("max_tokens")
    return _request(body, GenerateRequest(ids, text, _params(body, max_tokens, "max_tokens")))


def parse_chat(body: dict[str, Any]) -> CompletionRequest:
    """Validate a ``/v1/chat/completions`` body; every problem is a :class:`BadRequest`."""
    refuse_unsupported(body, _CHAT_NEUTRAL)
    if "messages" not in body:
        raise BadRequest("'messages' is required (a list of {role, content} objects)")
    messages = check_messages(body["messages"])
    new, old = body.get("max_completion_tokens"), body.get("max_tokens")
    if new is not None and old is not None and new != old:
        raise BadRequest(f"'max_completion_tokens'={new!r} and 'max_tokens'={old!r} differ: "
                         "give one")
    key = "max_tokens" if new is None and old is not None else "max_completion_tokens"
    max_tokens = old if new is None else new
    params = _params(body, 1 if max_tokens is None else max_tokens, key)
    return _request(body, GenerateRequest(None, None, params, messages=messages,
                                          to_context_end=max_tokens is None))


def _params(body: dict[str, Any], max_tokens: Any, key: str) -> Any:
    return sampling(16 if max_tokens is None else max_tokens,
                    1.0 if body.get("temperature") is None else body["temperature"],
                    check_flag(body, "ignore_eos"), key)


def _request(body: dict[str, Any], gen: GenerateRequest) -> CompletionRequest:
    """The settings both routes share, set on ``gen``: stream, usage, the router's room."""
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object")
    gen.bootstrap_room = check_room(body)
    gen.stream = check_flag(body, "stream")
    return CompletionRequest(gen, bool(options.get("include_usage")),
                             check_flag(body, "return_token_ids"))


def finish_reason(seq: Any) -> str | None:
    return seq.finish_reason if seq.finish_reason in ("length", "stop") else None


def usage(seq: Any) -> dict[str, int]:
    prompt, out = len(seq.prompt_ids), len(seq.output_ids)
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


class Completion:
    """The answer to one ``/v1/completions`` request: its id and time, and the body or
    stream chunks."""

    object = "text_completion"
    chunk_object = "text_completion"
    id_prefix = "cmpl"

    def __init__(self, model: str, return_token_ids: bool, include_usage: bool = False
                 ) -> None:
        self.id = f"{self.id_prefix}-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model
        self.return_token_ids = return_token_ids
        self.include_usage = include_usage

    def _frame(self, choices: list[dict[str, Any]], chunk: bool) -> dict[str, Any]:
        return {"id": self.id, "object": self.chunk_object if chunk else self.object,
                "created": self.created, "model": self.model, "choices": choices}

    def _content(self, text: str, chunk: bool) -> dict[str, Any]:
        return {"text": text}

    def _choice(self, text: str, ids: list[int], reason: str | None, chunk: bool
                ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, **self._content(text, chunk), "logprobs": None,
                                  "finish_reason": reason}
        if self.return_token_ids:
            choice["token_ids"] = ids
        return choice

    def body(self, seq: Any, tokenizer: Any) -> dict[str, Any]:
        ids = list(seq.output_ids)
        out = self._frame([self._choice(tokenizer.decode(ids), ids, finish_reason(seq),
                                        False)], False)
        out["usage"] = usage(seq)
        return out

    def chunk(self, text: str, ids: list[int], reason: str | None) -> dict[str, Any]:
        out = self._frame([self._choice(text, ids, reason, True)], True)
        if self.include_usage:
            out["usage"] = None
        return out

    def usage_chunk(self, seq: Any) -> dict[str, Any]:
        return {**self._frame([], True), "usage": usage(seq)}


class ChatCompletion(Completion):
    """The answer to one ``/v1/chat/completions`` request (``message``; ``delta`` chunks,
    the first of them with ``role``)."""

    object = "chat.completion"
    chunk_object = "chat.completion.chunk"
    id_prefix = "chatcmpl"

    def __init__(self, model: str, return_token_ids: bool, include_usage: bool = False
                 ) -> None:
        super().__init__(model, return_token_ids, include_usage)
        self.role_sent = False

    def _content(self, text: str, chunk: bool) -> dict[str, Any]:
        if not chunk:
            return {"message": {"role": "assistant", "content": text}}
        delta: dict[str, Any] = {"content": text}
        if not self.role_sent:
            delta, self.role_sent = {"role": "assistant", **delta}, True
        return {"delta": delta}


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
