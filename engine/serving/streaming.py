"""Answering a worker's generation requests: ``/v1/completions`` and
``/v1/chat/completions`` (OpenAI's shapes, whole or as server-sent events) and a streamed
``/generate`` (SGLang's shape: each event holds the text and ids so far).  The worker
(engine.serving.worker) starts the job; this module only turns its progress into what the
client asked for.

Once a stream has started its status is 200; a failure after that is sent as an event
holding ``error`` (the ``openai`` client raises it), then ``[DONE]``.  A client that goes
away mid-stream only stops the writing: the sequence runs to its end (the engine has no
cancel), which bounds the waste by ``max_tokens``.
"""

from __future__ import annotations

from typing import Any

from engine.serving.http import GENERATION_TIMEOUT_S
from engine.serving.http import BadRequest
from engine.serving.http import JSONHandler
from engine.serving.openai_api import ChatCompletion
from engine.serving.openai_api import Completion
from engine.serving.openai_api import TextDeltas
from engine.serving.openai_api import error_body
from engine.serving.openai_api import finish_reason
from engine.serving.openai_api import parse_chat
from engine.serving.openai_api import parse_completion
from engine.serving.requests import GenerateRequest
from engine.serving.requests import stream_chunk


def serve_completion(handler: JSONHandler, worker: Any, chat: bool = False) -> None:
    """``POST /v1/completions`` (or, with ``chat``, ``/v1/chat/completions``) on a worker
    (``worker``: engine.serving.worker.Worker)."""
    try:
        creq = (parse_chat if chat else parse_completion)(handler.read_json())
        job = worker.start(creq.gen)
    except BadRequest as e:
        handler.send_json(400, error_body(str(e)))
        return
    except Exception as e:  # noqa: BLE001 - answer and keep serving
        handler.send_json(500, error_body(f"{type(e).__name__}: {e}", "server_error"))
        return
    if isinstance(job, tuple):
        status, body = job
        handler.send_json(status, body if status == 200 else
                          error_body(str(body.get("error")), "server_error"))
        return
    comp = (ChatCompletion if chat else Completion)(worker.model, creq.return_token_ids,
                                                    creq.include_usage)
    tokenizer = worker.engine.tokenizer
    if not creq.gen.stream:
        seq = job.future.result(GENERATION_TIMEOUT_S)
        if seq.error:
            handler.send_json(503, error_body(seq.error, "server_error"))
        else:
            handler.send_json(200, comp.body(seq, tokenizer))
        return
    deltas = TextDeltas(tokenizer)
    _stream(handler, job, lambda n, done: _completion_events(comp, job.seq, deltas, n, done),
            lambda: [comp.usage_chunk(job.seq)] if creq.include_usage else [])


def _completion_events(comp: Completion, seq: Any, deltas: TextDeltas, n: int, done: bool
                       ) -> list[dict[str, Any]]:
    ids = list(seq.output_ids[:n])
    text = deltas.delta(ids, done)
    new_ids = ids[deltas.ids_sent:]
    deltas.ids_sent = len(ids)
    if not (text or new_ids or done):
        return []
    return [comp.chunk(text, new_ids, finish_reason(seq) if done else None)]


def serve_generate_stream(handler: JSONHandler, worker: Any, req: GenerateRequest) -> None:
    """A streamed ``/generate``: SGLang's cumulative events, ``[DONE]`` last."""
    job = worker.start(req)  # a BadRequest here is answered by the caller, before any event
    if isinstance(job, tuple):
        handler.send_json(*job)
        return
    tokenizer = worker.engine.tokenizer
    _stream(handler, job, lambda n, done: [stream_chunk(job.seq, tokenizer, n, done)],
            lambda: [])


def _stream(handler: JSONHandler, job: Any, events, tail) -> None:
    handler.start_events()
    try:
        for n, done in job.progress():
            if done and job.seq.error:
                handler.send_event(error_body(job.seq.error, "server_error"))
                break
            for event in events(n, done):
                handler.send_event(event)
        else:
            for event in tail():
                handler.send_event(event)
        handler.send_event("[DONE]")
        handler.end_events()
    except OSError:
        handler.close_connection = True  # the client went away
