"""The PD router: sends each request to a decode and a prefill worker under one
``bootstrap_room`` id (the flow is described in engine.serving.worker) and answers with the
decode side's result.

Both client APIs go through it: SGLang's ``/generate`` and OpenAI's ``/v1/completions``
and ``/v1/chat/completions``, each whole or streamed.  The prefill worker always gets the
engine's flat ``/generate`` body (it only computes the prompt's KV and first token; a chat
request's ``messages`` go in it as they are, and each worker renders them through its own
chat template: the two serve the same checkpoint, and a prompt whose length differs between
them is refused when the KV lands); the decode worker gets the
client's own body and path, so the answer, whole or as events, is in the client's shape,
and the router forwards it (for a whole ``/generate`` it adds ``meta.ttft_ms`` and
``meta.e2e_ms`` as timed here).  ``/server_info`` answers with the router's own start-up
information plus each worker's.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from engine.serving.http import GENERATION_TIMEOUT_S
from engine.serving.http import BadRequest
from engine.serving.http import HTTPFailure
from engine.serving.http import JSONHandler
from engine.serving.http import get
from engine.serving.http import post
from engine.serving.http import stream_post
from engine.serving.metrics import ServingMetrics
from engine.serving.metrics import evenly_spaced
from engine.serving.metrics import send_metrics
from engine.serving.openai_api import error_body
from engine.serving.openai_api import parse_chat
from engine.serving.openai_api import parse_completion
from engine.serving.requests import GenerateRequest
from engine.serving.requests import parse_generate

ROUTES: dict[str, Callable[[dict[str, Any]], GenerateRequest]] = {
    "/generate": parse_generate,
    "/v1/completions": lambda body: parse_completion(body).gen,
    "/v1/chat/completions": lambda body: parse_chat(body).gen,
}


@dataclass(frozen=True)
class Upstreams:
    """The router's two workers, its transfer timeout and its own start-up information."""

    prefill_url: str
    decode_url: str
    timeout: float
    info: dict[str, Any]
    metrics: ServingMetrics | None = None


class InFlight:
    """The router's requests in flight (its ``sglang:num_running_reqs``)."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n


def make_router_handler(prefill_url: str, decode_url: str, timeout: float,
                        info: dict[str, Any] | None = None) -> type[JSONHandler]:
    inflight = InFlight()
    metrics = ServingMetrics(lambda: _decode_model(decode_url), lambda: inflight.count,
                             lambda: 0)
    ends = Upstreams(prefill_url, decode_url, timeout, info or {"role": "router"}, metrics)
    rng = random.SystemRandom()

    class Handler(JSONHandler):
        def do_GET(self) -> None:
            answer_get(self, ends, urlparse(self.path).path)

        def do_POST(self) -> None:
            inflight.add(1)
            try:
                answer_post(self, ends, urlparse(self.path).path, rng.getrandbits(62))
            finally:
                inflight.add(-1)

    return Handler


def _decode_model(decode_url: str) -> str | None:
    """The model the decode worker serves (the router's ``model_name`` label), or None."""
    try:
        return get(f"{decode_url}/v1/models", 5.0)["data"][0]["id"]
    except (HTTPFailure, KeyError, IndexError, TypeError):
        return None


def _worker_info(url: str) -> dict[str, Any]:
    try:
        return get(f"{url}/server_info", 5.0)
    except HTTPFailure as e:
        return {"error": str(e)}


def answer_get(handler: JSONHandler, ends: Upstreams, path: str) -> None:
    """``/server_info``, ``/v1/models`` (the decode worker's) and ``/health`` (both ends')."""
    if path in ("/server_info", "/get_server_info"):
        handler.send_json(200, {**ends.info, "prefill": _worker_info(ends.prefill_url),
                                "decode": _worker_info(ends.decode_url)})
    elif path == "/metrics" and ends.metrics is not None:
        send_metrics(handler, ends.metrics)
    elif path == "/v1/models":
        try:
            handler.send_json(200, get(f"{ends.decode_url}/v1/models", 5.0))
        except HTTPFailure as e:
            handler.send_json(502, error_body(str(e), "server_error"))
    elif path == "/health":
        try:
            both = {"prefill": get(f"{ends.prefill_url}/health", 5.0),
                    "decode": get(f"{ends.decode_url}/health", 5.0)}
            handler.send_json(200, {"status": "ok", "role": "router", **both})
        except HTTPFailure as e:
            handler.send_json(503, {"status": "degraded", "error": str(e)})
    else:
        handler.send_json(404, {"error": "no such route"})


def answer_post(handler: JSONHandler, ends: Upstreams, path: str, room: int) -> None:
    """One generation request, refused (400) before either worker sees it if it is bad."""
    if path not in ROUTES:
        handler.send_json(404, {"error": "no such route"})
        return
    openai = path.startswith("/v1/")
    try:
        body = handler.read_json()
        req = ROUTES[path](body)
    except BadRequest as e:
        handler.send_json(400, error_body(str(e)) if openai else {"error": str(e)})
        return
    pair = Pair(ends, path, body, req, room)
    if req.stream:
        pair.stream(handler, openai)
        return
    status, answer = pair.whole()
    if status != 200 and openai:
        answer = error_body(answer["error"], "server_error")
    handler.send_json(status, answer)


class Pair:
    """One request sent to the prefill and the decode worker under one room id."""

    def __init__(self, ends: Upstreams, path: str, body: dict[str, Any],
                 req: GenerateRequest, room: int) -> None:
        self.start = time.perf_counter()
        self.ends = ends
        self.path = path
        self.decode_body = {**body, "bootstrap_room": room}
        self.prefill_body = {**req.worker_body(), "bootstrap_room": room,
                             "decode_url": ends.decode_url}
        self.result: dict[str, Any] = {}
        self.prefill = threading.Thread(target=self._to_prefill, daemon=True)

    @property
    def _timeout(self) -> float:
        return self.ends.timeout + GENERATION_TIMEOUT_S

    def _to_prefill(self) -> None:
        try:
            post(f"{self.ends.prefill_url}/generate", self.prefill_body, timeout=self._timeout)
        except HTTPFailure as e:
            self.result["prefill_error"] = e
        self.result["ttft_ms"] = (time.perf_counter() - self.start) * 1e3

    def _failure(self, err: HTTPFailure) -> tuple[int, dict[str, Any]]:
        prefill_error = self.result.get("prefill_error")
        detail = err.message if prefill_error is None else \
            f"{err.message}; prefill: {prefill_error.message}"
        return (err.status or 502), {"error": detail}

    def whole(self) -> tuple[int, dict[str, Any]]:
        self.prefill.start()
        try:
            out = post(f"{self.ends.decode_url}{self.path}", self.decode_body,
                       timeout=self._timeout)
        except HTTPFailure as e:
            # On failure the decode side answers at once (out of pages, bad request) or
            # at its transfer timeout; the prefill side frees its pages at its deadline.
            return self._failure(e)
        self.prefill.join()
        done = time.perf_counter()
        if self.path == "/generate":
            out.setdefault("meta", {}).update(
                ttft_ms=self.result.get("ttft_ms"), e2e_ms=(done - self.start) * 1e3)
        prompt, generated = _token_counts(out, 0, 0)
        first = self.start + (self.result.get("ttft_ms") or 0.0) / 1e3
        self._observe(prompt, evenly_spaced(min(first, done), done, generated), done)
        return 200, out

    def _observe(self, prompt_tokens: int, token_times: list[float], done: float) -> None:
        if self.ends.metrics is not None:
            self.ends.metrics.observe(prompt_tokens, self.start, token_times, done)

    def stream(self, handler: JSONHandler, openai: bool) -> None:
        """Forward the decode worker's events; an error before the first is a status."""
        self.prefill.start()
        events = stream_post(f"{self.ends.decode_url}{self.path}", self.decode_body,
                             timeout=self._timeout)
        try:
            first = next(events)
        except StopIteration:
            first = None
        except HTTPFailure as e:
            status, answer = self._failure(e)
            handler.send_json(status, error_body(answer["error"], "server_error")
                              if openai else answer)
            return
        handler.start_events()
        counts = (0, 0)
        first_at = last_at = time.perf_counter()
        try:
            if first is not None:
                handler.send_chunk(b"data: " + first + b"\n\n")
                counts = _event_counts(first, counts)
            for data in events:
                handler.send_chunk(b"data: " + data + b"\n\n")
                counts = _event_counts(data, counts)
                last_at = time.perf_counter()
        except HTTPFailure as e:
            handler.send_event(error_body(e.message, "server_error"))
            handler.send_event("[DONE]")
            handler.end_events()
            return
        except OSError:
            handler.close_connection = True
            return
        handler.end_events()
        self._observe(counts[0], evenly_spaced(first_at, last_at, counts[1]),
                      time.perf_counter())


def _token_counts(answer: dict[str, Any], prompt: int, generated: int) -> tuple[int, int]:
    """(prompt, generated) tokens an answer or event reports: SGLang's ``meta_info`` or
    OpenAI's ``usage``; else the counts given (an OpenAI chunk without usage adds its
    ``token_ids``, or one token when it carries text)."""
    meta = answer.get("meta_info") or answer.get("usage")
    if isinstance(meta, dict) and "completion_tokens" in meta:
        return int(meta.get("prompt_tokens") or prompt), int(meta["completion_tokens"])
    choices = answer.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        ids = choice.get("token_ids")
        text = choice.get("text") or (choice.get("delta") or {}).get("content")
        return prompt, generated + (len(ids) if isinstance(ids, list) else int(bool(text)))
    return prompt, generated


def _event_counts(data: bytes, counts: tuple[int, int]) -> tuple[int, int]:
    """The running (prompt, generated) counts of a stream after one more event."""
    try:
        event = json.loads(data)
    except ValueError:
        return counts  # [DONE]
    return _token_counts(event, *counts) if isinstance(event, dict) else counts
