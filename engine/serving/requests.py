"""Parsing and checking a ``/generate`` request body (shared by every role).

Two shapes are accepted, and one request may not mix them for the same setting:

* SGLang's native one: ``text`` (or ``input_ids``), ``sampling_params`` (``max_new_tokens``,
  ``temperature``, ``ignore_eos``), ``stream``;
* the engine's flat one: ``prompt`` (or ``input_ids``, or chat ``messages``, rendered
  through the checkpoint's chat template as ``/v1/chat/completions`` renders them) and the
  sampling settings at the top level (what the router sends to the workers).

An unknown sampling parameter is refused (400) rather than ignored: a ``top_p`` or ``stop``
the engine does not implement would silently change what the client asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.sequence import SamplingParams
from engine.serving.http import BadRequest

MAX_NEW_TOKENS_LIMIT = 1 << 16
SAMPLING_KEYS = ("max_new_tokens", "temperature", "ignore_eos")


@dataclass
class GenerateRequest:
    input_ids: list[int] | None
    prompt: str | None
    params: SamplingParams
    bootstrap_room: int | None = None
    decode_url: str | None = None
    stream: bool = False
    messages: list[dict[str, Any]] | None = None  # a chat, checked by check_messages
    # No limit asked for (a chat request without max_tokens): generate until EOS or the
    # end of the model's context, the worker sets max_new_tokens once the prompt is known.
    to_context_end: bool = False

    def worker_body(self) -> dict[str, Any]:
        """The flat body a router sends a worker for this request (without routing fields)."""
        body: dict[str, Any] = {"max_new_tokens": self.params.max_new_tokens,
                                "temperature": self.params.temperature,
                                "ignore_eos": self.params.ignore_eos}
        if self.input_ids is not None:
            body["input_ids"] = self.input_ids
        elif self.messages is not None:
            body["messages"] = self.messages
        else:
            body["prompt"] = self.prompt
        return body


def check_prompt(prompt: Any, ids: Any, text_key: str = "prompt") -> None:
    if (prompt is None) == (ids is None):
        raise BadRequest(f"give exactly one of '{text_key}' (string) or 'input_ids' "
                         "(list of int)")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise BadRequest(f"'{text_key}' must be a non-empty string")
    if ids is not None and not is_token_list(ids):
        raise BadRequest("'input_ids' must be a non-empty list of integers")


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """A chat's messages, checked, as the chat template sees them.

    Each message is an object with a string ``role`` and a ``content`` that is a string or
    a list of ``{"type": "text", "text": ...}`` parts, joined with newlines (what vLLM
    does for a text-only model); any other part (an image, audio) is refused.  Other keys
    (``name``...) are passed to the template; keys set to null are dropped, as
    transformers drops them."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{i}] must be an object with 'role' and 'content'")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise BadRequest(f"messages[{i}].role must be a non-empty string")
        clean = {k: v for k, v in message.items() if v is not None}
        clean["content"] = _message_text(message.get("content"), i)
        out.append(clean)
    return out


def _message_text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"messages[{i}].content must be a string or a list of text parts")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            raise BadRequest(f"messages[{i}].content[{j}] of type {kind!r} is not supported "
                             "by this engine (text parts only: {\"type\": \"text\", "
                             "\"text\": ...})")
        texts.append(part["text"])
    return "\n".join(texts)


def is_token_list(ids: Any) -> bool:
    return isinstance(ids, list) and bool(ids) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in ids)


def check_flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be true or false")
    return value


def sampling(max_new: Any, temperature: Any, ignore_eos: Any, max_key: str) -> SamplingParams:
    """Checked sampling settings; ``max_key`` names the field in the client's shape."""
    if not isinstance(max_new, int) or isinstance(max_new, bool) \
            or not 1 <= max_new <= MAX_NEW_TOKENS_LIMIT:
        raise BadRequest(f"'{max_key}' must be an integer in [1, {MAX_NEW_TOKENS_LIMIT}]")
    try:
        return SamplingParams(max_new_tokens=max_new, temperature=temperature,
                              ignore_eos=bool(ignore_eos))
    except ValueError as e:
        raise BadRequest(str(e)) from None


def check_room(body: dict[str, Any]) -> int | None:
    """The ``bootstrap_room`` a router set (never a client), checked."""
    room = body.get("bootstrap_room")
    if room is not None and (not isinstance(room, int) or isinstance(room, bool) or room < 0):
        raise BadRequest("'bootstrap_room' must be a non-negative integer")
    return room


def _sampling_settings(body: dict[str, Any]) -> dict[str, Any]:
    """The sampling settings from ``sampling_params`` or the top level (not both)."""
    nested = body.get("sampling_params")
    if nested is None:
        return {k: body[k] for k in SAMPLING_KEYS if k in body}
    if not isinstance(nested, dict):
        raise BadRequest("'sampling_params' must be an object")
    unknown = sorted(set(nested) - set(SAMPLING_KEYS))
    if unknown:
        raise BadRequest(f"sampling_params {', '.join(unknown)} not supported by this engine "
                         f"(supported: {', '.join(SAMPLING_KEYS)})")
    both = sorted(set(nested) & {k for k in SAMPLING_KEYS if k in body})
    if both:
        raise BadRequest(f"{', '.join(both)} given both at the top level and in "
                         "sampling_params: give each once")
    return dict(nested)


def parse_generate(body: dict[str, Any]) -> GenerateRequest:
    """Validate a request; every problem is a :class:`BadRequest` (HTTP 400)."""
    if "text" in body and "prompt" in body:
        raise BadRequest("give 'text' or 'prompt', not both")
    text_key = "text" if "text" in body else "prompt"
    prompt = body.get(text_key)
    ids = body.get("input_ids")
    messages = None
    if body.get("messages") is not None:
        if prompt is not None or ids is not None:
            raise BadRequest(f"give one of '{text_key}', 'input_ids' or 'messages'")
        messages = check_messages(body["messages"])
    else:
        check_prompt(prompt, ids, text_key)
    settings = _sampling_settings(body)
    params = sampling(settings.get("max_new_tokens", 16), settings.get("temperature", 0.0),
                      settings.get("ignore_eos", False), "max_new_tokens")
    room = check_room(body)
    decode_url = body.get("decode_url")
    if decode_url is not None and (not isinstance(decode_url, str)
                                   or not decode_url.startswith("http://")):
        raise BadRequest("'decode_url' must be an http:// URL")
    return GenerateRequest(ids, prompt, params, room, decode_url, check_flag(body, "stream"),
                           messages)


def finish_reason(seq: Any) -> dict[str, Any] | None:
    """SGLang's ``meta_info.finish_reason``: ``{"type": "length", "length": N}`` or stop."""
    if seq.finish_reason == "length":
        return {"type": "length", "length": seq.params.max_new_tokens}
    if seq.finish_reason == "stop":
        return {"type": "stop", "matched": seq.eos_id}
    return None


def response_body(seq: Any, tokenizer: Any, arrival: float, done: float) -> dict[str, Any]:
    """The ``/generate`` answer for a finished sequence: SGLang's ``text``, ``output_ids``
    and ``meta_info``, plus the engine's ``meta`` (its timings, in milliseconds)."""
    ttft = (seq.token_times[0] - arrival) * 1e3 if seq.token_times else None
    return {
        "output_ids": list(seq.output_ids),
        "text": tokenizer.decode(seq.output_ids),
        "meta_info": {"prompt_tokens": len(seq.prompt_ids),
                      "completion_tokens": len(seq.output_ids),
                      "finish_reason": finish_reason(seq), "e2e_latency": done - arrival},
        "meta": {"ttft_ms": ttft, "e2e_ms": (done - arrival) * 1e3,
                 "finish_reason": seq.finish_reason,
                 "prompt_tokens": len(seq.prompt_ids),
                 "preemptions": seq.num_preemptions},
    }


def stream_chunk(seq: Any, tokenizer: Any, n_out: int, done: bool) -> dict[str, Any]:
    """One SGLang ``/generate`` stream event: the text and ids so far (cumulative, as
    SGLang streams by default), ``finish_reason`` on the last one."""
    ids = list(seq.output_ids[:n_out])
    return {"text": tokenizer.decode(ids), "output_ids": ids,
            "meta_info": {"prompt_tokens": len(seq.prompt_ids), "completion_tokens": len(ids),
                          "finish_reason": finish_reason(seq) if done else None}}
