"""``GET /metrics``: Prometheus metrics of every role, named and shaped as SGLang names them.

Modelled on SGLang's ``python/sglang/srt/metrics/collector.py`` (``TokenizerMetricsCollector``
and ``SchedulerMetricsCollector``) at sgl-project/sglang commit
``00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538`` (main, late 2025, after the v0.5 releases; the
names and default buckets below are unchanged since v0.4.x): the same metric names, help
texts, default histogram buckets and the ``model_name`` label, so a dashboard, an alert or a
PromQL query written for a real SGLang reads the bundled engine unchanged.

Exported (all labelled ``model_name``):

* histograms ``sglang:time_to_first_token_seconds``, ``sglang:inter_token_latency_seconds``,
  ``sglang:e2e_request_latency_seconds`` (observed once per finished request; inter-token
  latency once per token after the first, as SGLang observes it);
* counters ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
  ``sglang:num_requests_total``;
* gauges ``sglang:num_running_reqs``, ``sglang:num_queue_reqs`` (read at scrape time).

Decisions where SGLang gives no direct model:

* Each role counts the requests *it* answered, as its client saw them: a prefill worker
  a request with its prompt and its one token, a decode worker the whole generation (the
  first token included, as SGLang's decode server reports it), the router what the
  client got end to end.  Query one role (a ``job`` or ``instance`` selector), never the
  sum of all three, which counts a PD request twice or three times.
* The router has no queue: ``num_running_reqs`` is its requests in flight,
  ``num_queue_reqs`` is 0.  Its ``model_name`` is the decode worker's model, asked once at
  the first scrape or request (``unknown`` while the decode worker does not answer).
* A request that fails (an error answer) is not observed, as SGLang observes only
  finished requests.

Each server has its own ``CollectorRegistry`` (never the process-global one), so several
servers in one process (the tests) do not collide.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import Histogram
from prometheus_client import generate_latest

# SGLang's default buckets (TokenizerMetricsCollector, see the module docstring).
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
               600, 1200, 1800, 2400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
               8.000)
LABELS = ("model_name",)


class ServingMetrics:
    """One server's metrics: observe finished requests, render the text exposition.

    ``model_name``: the label value, or a callable asked until it returns a name (the
    router's, see the module docstring).  ``running`` and ``queued``: read at scrape time.
    """

    def __init__(self, model_name: str | Callable[[], str | None],
                 running: Callable[[], int], queued: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._model_name = model_name
        self._label: str | None = model_name if isinstance(model_name, str) else None
        self._lock = threading.Lock()
        self._running = running
        self._queued = queued
        reg = self.registry
        self.prompt_tokens = Counter("sglang:prompt_tokens_total",
                                     "Number of prefill tokens processed.", LABELS,
                                     registry=reg)
        self.generation_tokens = Counter("sglang:generation_tokens_total",
                                         "Number of generation tokens processed.", LABELS,
                                         registry=reg)
        self.requests = Counter("sglang:num_requests_total", "Number of requests processed.",
                                LABELS, registry=reg)
        self.ttft = Histogram("sglang:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.", LABELS,
                              buckets=TTFT_BUCKETS, registry=reg)
        self.itl = Histogram("sglang:inter_token_latency_seconds",
                             "Histogram of inter-token latency in seconds.", LABELS,
                             buckets=ITL_BUCKETS, registry=reg)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds",
                             "Histogram of End-to-end request latency in seconds", LABELS,
                             buckets=E2E_BUCKETS, registry=reg)
        self.num_running = Gauge("sglang:num_running_reqs", "The number of running requests.",
                                 LABELS, registry=reg)
        self.num_queue = Gauge("sglang:num_queue_reqs",
                               "The number of requests in the waiting queue.", LABELS,
                               registry=reg)
        if self._label is not None:
            self._start_series(self._label)

    def _start_series(self, model: str) -> None:
        """Every series at zero from the start, so a ``rate()`` sees the first request."""
        for metric in (self.prompt_tokens, self.generation_tokens, self.requests, self.ttft,
                       self.itl, self.e2e):
            metric.labels(model)

    def label(self) -> str:
        """The ``model_name`` label value (resolved once, for a callable)."""
        with self._lock:
            if self._label is None:
                name = self._model_name() if callable(self._model_name) else None
                if name is None:
                    return "unknown"
                self._label = name
                self._start_series(name)
            return self._label

    def observe(self, prompt_tokens: int, arrival: float, token_times: Sequence[float],
                done: float) -> None:
        """One finished request: ``arrival``, each token's time and ``done`` on one clock
        (``time.perf_counter``); the number of generated tokens is ``len(token_times)``."""
        model = self.label()
        self.requests.labels(model).inc()
        self.prompt_tokens.labels(model).inc(prompt_tokens)
        self.generation_tokens.labels(model).inc(len(token_times))
        if token_times:
            self.ttft.labels(model).observe(max(0.0, token_times[0] - arrival))
        itl = self.itl.labels(model)
        for before, after in zip(token_times, token_times[1:]):
            itl.observe(max(0.0, after - before))
        self.e2e.labels(model).observe(max(0.0, done - arrival))

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition format and its content type, gauges read now."""
        model = self.label()
        self.num_running.labels(model).set(self._running())
        self.num_queue.labels(model).set(self._queued())
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def send_metrics(handler: BaseHTTPRequestHandler, metrics: ServingMetrics) -> None:
    """Answer ``GET /metrics`` on ``handler`` (any role's)."""
    data, content_type = metrics.exposition()
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def evenly_spaced(first: float, last: float, count: int) -> list[float]:
    """``count`` token times from ``first`` to ``last`` evenly spaced: what a server that
    only saw the whole answer knows of its tokens (SGLang, given a chunk of several tokens,
    observes the chunk's interval divided by its tokens, once per token)."""
    if count <= 1:
        return [first][:count]
    step = (last - first) / (count - 1)
    return [first + i * step for i in range(count)]
