"""One HTTP worker (roles ``both``, ``prefill``, ``decode``); the router: engine.serving.router.

PD flow (shared ``bootstrap_room`` id, as in SGLang's disaggregation):

1. The router sends the request to the decode worker, which reserves KV pages for the
   prompt and records the room in its inflight table (state ``WaitingForInput``), and to
   the prefill worker, which computes the prompt's KV and first token.
2. Bootstrap handshake: the prefill worker polls the decode worker's ``/bootstrap`` until
   the room is known there, then pushes the KV (``/kv_transfer``, see engine.serving.kv_transfer).
3. The decode worker copies the KV into the reserved pages and decodes the rest.

Both sides bound the transfer by ``ENGINE_INFLIGHT_TIMEOUT_S``: past it, the pages are
freed on that side and the request is answered with HTTP 504; the servers keep serving.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs
from urllib.parse import urlparse

from engine.config import EngineError
from engine.core.block_manager import OutOfPages
from engine.core.llm import LLMEngine
from engine.core.sequence import Sequence
from engine.serving.http import GENERATION_TIMEOUT_S
from engine.serving.http import BadRequest
from engine.serving.http import HTTPFailure
from engine.serving.http import JSONHandler
from engine.serving.http import get
from engine.serving.http import post
from engine.serving.info import startup_info
from engine.serving.kv_transfer import decode_kv
from engine.serving.kv_transfer import encode_kv
from engine.serving.metrics import ServingMetrics
from engine.serving.metrics import send_metrics
from engine.serving import streaming
from engine.serving.openai_api import models_body
from engine.serving.requests import MAX_NEW_TOKENS_LIMIT
from engine.serving.requests import GenerateRequest
from engine.serving.requests import parse_generate
from engine.serving.requests import response_body


@dataclass
class Inflight:
    """One request's KV transfer, on either side."""

    room: int
    seq: Sequence
    state: str  # Bootstrapping | WaitingForInput | Transferring | Success | Failed
    created: float = field(default_factory=time.monotonic)
    landed: threading.Event = field(default_factory=threading.Event)
    future: Any = None


@dataclass
class Job:
    """A request being generated: its sequence and the future that resolves when done."""

    seq: Sequence
    future: Future
    arrival: float

    def progress(self, poll_s: float = 0.004) -> Iterator[tuple[int, bool]]:
        """(tokens generated so far, finished) once per token, the last with True.

        Polls the sequence (the engine loop appends to it) so the engine core needs no
        callback; a few milliseconds of poll are far below one decode step's time.  Where
        several tokens came between two polls (a loaded machine, a slow reader), each is
        still its own step of the count, so a stream sends one event per token whatever
        the timing — as SGLang streams with its default ``stream_interval`` of 1."""
        sent = 0
        while True:
            done = self.future.done()
            n = len(self.seq.output_ids)
            for count in range(sent + 1, n):
                yield count, False
            if done:
                yield n, True
                return
            if n > sent:
                yield n, False
            sent = max(sent, n)
            time.sleep(poll_s)


class Worker:
    """The state behind one worker's HTTP handlers."""

    def __init__(self, engine: LLMEngine, role: str, info: dict[str, Any] | None = None
                 ) -> None:
        self.engine = engine
        self.role = role
        self.info = info or startup_info(role, None, engine.knobs)
        # The CPU paths the engine chose (ISA, GEMMs, kernels): what the process runs.
        self.info["cpu_paths"] = engine.model.cpu_paths
        self.model = self.info.get("model") or "engine"
        self.timeout = engine.knobs.inflight_timeout_s
        self.drop_prob = engine.knobs.transfer_drop_prob
        self.inflight: dict[int, Inflight] = {}
        self.lock = threading.Lock()
        self.rng = random.Random(engine.knobs.seed)
        sched = engine.scheduler
        self.metrics = ServingMetrics(self.model, lambda: len(sched.running),
                                      lambda: len(sched.waiting))
        # Test-only: ``POST /debug/stop_loop`` stops the engine loop while HTTP (and
        # ``/health``) keep answering, the failure a generating health check must catch.
        self.debug_endpoints = os.environ.get("ENGINE_DEBUG_ENDPOINTS") == "1"

    def health(self) -> dict[str, Any]:
        with self.lock:
            inflight = len(self.inflight)
        sched = self.engine.scheduler
        return {"status": "ok", "role": self.role, "free_pages": self.engine.blocks.num_free,
                "total_pages": self.engine.blocks.num_pages, "inflight": inflight,
                "running": len(sched.running), "waiting": len(sched.waiting),
                "dtype": self.engine.dtype_name, "device": self.engine.device_name,
                "ops": self.engine.model.ops.describe(),
                "cpu_paths": self.engine.model.cpu_paths, "knobs": self.engine.knobs.as_env(),
                "engine_release": self.engine.knobs.release}

    def _sequence(self, req: GenerateRequest) -> Sequence:
        tokenizer = self.engine.tokenizer
        params = req.params
        try:
            if req.messages is not None:
                ids = tokenizer.apply_chat_template(req.messages)
            else:
                ids = req.input_ids if req.input_ids is not None else \
                    tokenizer.encode(req.prompt or "")
            if req.to_context_end:
                room_left = self.engine.cfg.max_position_embeddings - len(ids)
                params = replace(params, max_new_tokens=max(1, min(room_left,
                                                                   MAX_NEW_TOKENS_LIMIT)))
            return self.engine.make_sequence(ids, params)
        except EngineError as e:
            raise BadRequest(str(e)) from None

    def start(self, req: GenerateRequest) -> Job | tuple[int, dict[str, Any]]:
        """Start generating: a :class:`Job` to finish or stream, or an error answer.

        A decode worker returns once the KV has landed (or failed to); a prefill worker in
        a PD pair answers in full (its client, the router, never streams from it).
        """
        arrival = time.perf_counter()
        seq = self._sequence(req)
        if self.role == "decode":
            if req.bootstrap_room is None:
                raise BadRequest("a decode worker needs 'bootstrap_room' (send via the router)")
            return self._decode_side(seq, req.bootstrap_room, arrival)
        if self.role == "prefill" and req.bootstrap_room is not None:
            if req.decode_url is None:
                raise BadRequest("'bootstrap_room' needs 'decode_url' on a prefill worker")
            seq.hold_kv = True
            return self._prefill_side(seq, req.bootstrap_room, req.decode_url, arrival)
        return self._job(seq, self.engine.submit(seq), arrival)

    def _job(self, seq: Sequence, future: Future, arrival: float) -> Job:
        """A job whose finish, when it succeeds, is observed in ``/metrics``."""
        def observe(done: Future) -> None:
            if not done.cancelled() and done.exception() is None and not seq.error:
                self.metrics.observe(len(seq.prompt_ids), arrival, seq.token_times,
                                     time.perf_counter())

        future.add_done_callback(observe)
        return Job(seq, future, arrival)

    def generate(self, req: GenerateRequest) -> tuple[int, dict[str, Any]]:
        """The whole answer (SGLang's ``/generate`` shape)."""
        job = self.start(req)
        return job if isinstance(job, tuple) else self.finish(job)

    def finish(self, job: Job) -> tuple[int, dict[str, Any]]:
        seq = job.future.result(GENERATION_TIMEOUT_S)
        if seq.error:
            return 503, {"error": seq.error}
        return 200, response_body(seq, self.engine.tokenizer, job.arrival, time.perf_counter())

    # ---- prefill side ------------------------------------------------------------------
    def _prefill_side(self, seq: Sequence, room: int, decode_url: str,
                      arrival: float) -> tuple[int, dict[str, Any]]:
        seq = self.engine.submit(seq).result(GENERATION_TIMEOUT_S)
        if seq.error:
            return 503, {"error": seq.error}
        entry = Inflight(room, seq, "Bootstrapping")
        with self.lock:
            self.inflight[room] = entry
        deadline = entry.created + self.timeout
        try:
            self._bootstrap(decode_url, room, deadline)
            entry.state = "Transferring"
            if self.rng.random() < self.drop_prob:
                # Fault injection: the transfer is lost; no ack will come before the deadline.
                time.sleep(max(0.0, deadline - time.monotonic()))
                raise HTTPFailure(504, "transfer dropped (ENGINE_TRANSFER_DROP_PROB)")
            kv = self.engine.call(lambda: self.engine.runner.export_kv(
                seq.block_table, len(seq.prompt_ids))).result()
            payload = encode_kv(room, seq.output_ids[0], seq.token_times[0] - arrival, kv)
            post(f"{decode_url}/kv_transfer", payload, timeout=max(0.01, deadline
                 - time.monotonic()), content_type="application/octet-stream")
            entry.state = "Success"
            self.metrics.observe(len(seq.prompt_ids), arrival, seq.token_times,
                                 time.perf_counter())
        except HTTPFailure as e:
            entry.state = "Failed"
            return 504, {"error": f"KV transfer of room {room} aborted after "
                                  f"{time.monotonic() - entry.created:.2f}s: {e.message}"}
        finally:
            with self.lock:
                self.inflight.pop(room, None)
            self.engine.call(lambda: self.engine.blocks.free(seq.block_table)).result()
        return 200, response_body(seq, self.engine.tokenizer, arrival, time.perf_counter())

    def _bootstrap(self, decode_url: str, room: int, deadline: float) -> None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HTTPFailure(504, f"bootstrap with {decode_url} timed out")
            try:
                if get(f"{decode_url}/bootstrap?room={room}", timeout=left).get("ready"):
                    return
            except HTTPFailure:
                pass  # decode not up yet or restarting; retry until the deadline
            time.sleep(min(0.005, max(0.0, left)))

    # ---- decode side -------------------------------------------------------------------
    def _decode_side(self, seq: Sequence, room: int, arrival: float
                     ) -> Job | tuple[int, dict[str, Any]]:
        def reserve() -> None:
            self.engine.blocks.grow(seq.block_table, len(seq.prompt_ids))

        try:
            self.engine.call(reserve).result()
        except OutOfPages as e:
            return 503, {"error": f"decode worker out of KV pages: {e}"}
        entry = Inflight(room, seq, "WaitingForInput")
        with self.lock:
            if room in self.inflight:
                self.engine.call(lambda: self.engine.blocks.free(seq.block_table)).result()
                return 409, {"error": f"bootstrap_room {room} is already in flight"}
            self.inflight[room] = entry
        landed = entry.landed.wait(self.timeout)
        with self.lock:
            if not landed and entry.state == "WaitingForInput":
                entry.state = "Failed"
            self.inflight.pop(room, None)
        if entry.state == "Failed":
            self.engine.call(lambda: self.engine.blocks.free(seq.block_table)).result()
            return 504, {"error": f"KV for room {room} did not arrive within "
                                  f"ENGINE_INFLIGHT_TIMEOUT_S={self.timeout:g}s; aborted"}
        entry.landed.wait()  # an import in progress finishes quickly (local copy)
        return self._job(seq, entry.future, arrival)

    def kv_arrived(self, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            room, first_token, prefill_ttft, kv = decode_kv(body)
        except ValueError as e:
            raise BadRequest(f"bad KV transfer: {e}") from None
        with self.lock:
            entry = self.inflight.get(room)
            if entry is None or entry.state != "WaitingForInput":
                return 404, {"error": f"room {room} is not waiting for KV (timed out?)"}
            entry.state = "Transferring"
        seq = entry.seq
        if kv.shape[2] != len(seq.prompt_ids):
            with self.lock:
                entry.state = "Failed"
            entry.landed.set()
            return 400, {"error": f"KV holds {kv.shape[2]} tokens, prompt has "
                                  f"{len(seq.prompt_ids)}"}

        def land() -> None:
            self.engine.runner.import_kv(seq.block_table, kv)
            seq.num_computed = len(seq.prompt_ids)
            seq.output_ids.append(first_token)
            # TTFT as the prefill worker measured it, on this side's clock.
            seq.token_times.append(time.perf_counter())

        self.engine.call(land).result()
        entry.future = self.engine.submit(seq, prefilled=True)
        entry.state = "Success"
        entry.landed.set()
        return 200, {"ok": True, "prefill_ttft_ms": prefill_ttft * 1e3}

    def bootstrap_ready(self, room: int) -> dict[str, Any]:
        with self.lock:
            entry = self.inflight.get(room)
            return {"ready": entry is not None and entry.state == "WaitingForInput"}


def make_worker_handler(worker: Worker) -> type[JSONHandler]:
    class Handler(JSONHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/health":
                self.send_json(200, worker.health())
            elif url.path in ("/server_info", "/get_server_info"):
                self.send_json(200, worker.info)
            elif url.path == "/v1/models":
                self.send_json(200, models_body(worker.model, worker.info["start_unix"]))
            elif url.path == "/metrics":
                send_metrics(self, worker.metrics)
            elif url.path == "/bootstrap" and worker.role == "decode":
                try:
                    room = int(parse_qs(url.query).get("room", [""])[0])
                except ValueError:
                    self.send_json(400, {"error": "room must be an integer"})
                    return
                self.send_json(200, worker.bootstrap_ready(room))
            else:
                self.send_json(404, {"error": f"no route GET {url.path}"})

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            if path in ("/v1/completions", "/v1/chat/completions"):
                streaming.serve_completion(self, worker, chat=path == "/v1/chat/completions")
                return
            try:
                if path == "/generate":
                    req = parse_generate(self.read_json())
                    if req.stream:
                        streaming.serve_generate_stream(self, worker, req)
                        return
                    status, body = worker.generate(req)
                elif path == "/debug/stop_loop" and worker.debug_endpoints:
                    worker.engine.stop()
                    status, body = 200, {"stopped": "engine loop"}
                elif path == "/kv_transfer" and worker.role == "decode":
                    status, body = worker.kv_arrived(self.read_body(limit=1 << 31))
                else:
                    status, body = 404, {"error": f"no route POST {path}"}
            except BadRequest as e:
                status, body = 400, {"error": str(e)}
            except Exception as e:  # noqa: BLE001 - answer and keep serving, whatever happened
                status, body = 500, {"error": f"{type(e).__name__}: {e}"}
            self.send_json(status, body)

    return Handler
