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


def make_router_handler(prefill_url: str, decode_url: str, timeout: float,
                        info: dict[str, Any] | None = None) -> type[JSONHandler]:
    ends = Upstreams(prefill_url, decode_url, timeout, info or {"role": "router"})
    rng = random.SystemRandom()

    class Handler(JSONHandler):
        def do_GET(self) -> None:
            answer_get(self, ends, urlparse(self.path).path)

        def do_POST(self) -> None:
            answer_post(self, ends, urlparse(self.path).path, rng.getrandbits(62))

    return Handler


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
        if self.path == "/generate":
            out.setdefault("meta", {}).update(
                ttft_ms=self.result.get("ttft_ms"),
                e2e_ms=(time.perf_counter() - self.start) * 1e3)
        return 200, out

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
        try:
            if first is not None:
                handler.send_chunk(b"data: " + first + b"\n\n")
            for data in events:
                handler.send_chunk(b"data: " + data + b"\n\n")
        except HTTPFailure as e:
            handler.send_event(error_body(e.message, "server_error"))
            handler.send_event("[DONE]")
        except OSError:
            handler.close_connection = True
            return
        handler.end_events()
