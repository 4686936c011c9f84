"""The PD router: sends each ``/generate`` to a decode and a prefill worker under one
``bootstrap_room`` id (the flow is described in engine.serving.worker) and answers with the
decode side's result, timed end to end."""

from __future__ import annotations

import random
import threading
import time
from typing import Any
from urllib.parse import urlparse

from engine.serving.http import GENERATION_TIMEOUT_S
from engine.serving.http import BadRequest
from engine.serving.http import HTTPFailure
from engine.serving.http import JSONHandler
from engine.serving.http import get
from engine.serving.http import post
from engine.serving.requests import parse_generate


def make_router_handler(prefill_url: str, decode_url: str, timeout: float) -> type[JSONHandler]:
    rng = random.SystemRandom()

    class Handler(JSONHandler):
        def do_GET(self) -> None:
            if urlparse(self.path).path != "/health":
                self.send_json(404, {"error": "no such route"})
                return
            try:
                ends = {"prefill": get(f"{prefill_url}/health", 5.0),
                        "decode": get(f"{decode_url}/health", 5.0)}
                self.send_json(200, {"status": "ok", "role": "router", **ends})
            except HTTPFailure as e:
                self.send_json(503, {"status": "degraded", "error": str(e)})

        def do_POST(self) -> None:
            if urlparse(self.path).path != "/generate":
                self.send_json(404, {"error": "no such route"})
                return
            try:
                body = self.read_json()
                parse_generate(body)  # refuse bad requests before touching the workers
            except BadRequest as e:
                self.send_json(400, {"error": str(e)})
                return
            self.send_json(*route(body))

    def route(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        start = time.perf_counter()
        room = rng.getrandbits(62)
        result: dict[str, Any] = {}

        def to_decode() -> None:
            try:
                result["decode"] = post(f"{decode_url}/generate",
                                        {**body, "bootstrap_room": room},
                                        timeout=timeout + GENERATION_TIMEOUT_S)
            except HTTPFailure as e:
                result["decode_error"] = e

        def to_prefill() -> None:
            try:
                post(f"{prefill_url}/generate",
                     {**body, "bootstrap_room": room, "decode_url": decode_url},
                     timeout=timeout + GENERATION_TIMEOUT_S)
            except HTTPFailure as e:
                result["prefill_error"] = e
            result["ttft_ms"] = (time.perf_counter() - start) * 1e3

        threads = [threading.Thread(target=f, daemon=True) for f in (to_decode, to_prefill)]
        for t in threads:
            t.start()
        # The decode side answers last on success; on failure it answers at once (out of
        # pages, bad request) or at its transfer timeout, and the client need not wait for
        # the prefill side, which frees its own pages at its own deadline.
        threads[0].join()
        if "decode" in result:
            threads[1].join()
            out = result["decode"]
            out.setdefault("meta", {}).update(ttft_ms=result.get("ttft_ms"),
                                              e2e_ms=(time.perf_counter() - start) * 1e3)
            return 200, out
        err = result["decode_error"]
        prefill_error = result.get("prefill_error")
        detail = err.message if prefill_error is None else \
            f"{err.message}; prefill: {prefill_error.message}"
        return (err.status or 502), {"error": detail}

    return Handler
