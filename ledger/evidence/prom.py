"""Reading an engine's metrics from Prometheus: the PromQL, the HTTP API, the buckets.

The only network this module opens is the Prometheus URL the operator gives
(``--prometheus URL``), with urllib: ``GET /api/v1/query_range`` and ``GET /api/v1/series``.
An unreachable server, a refused query or an answer that is not Prometheus's JSON is an
:class:`~ledger.errors.EvidenceError` naming the URL; nothing is retried.

PromQL per step (names from :mod:`ledger.evidence.metric_catalog` for the engine release;
``SEL`` is the operator's ``--match`` matchers; ``R`` the step, so consecutive steps read
disjoint intervals):

* ``output_throughput``    ``sum(rate(GEN_TOKENS{SEL}[R]))`` (tokens/s);
* ``median_/p99_ttft_ms``, ``median_/p99_itl_ms``, ``median_/p99_e2e_latency_ms``:
  ``histogram_quantile(q, sum by (le) (rate(HIST_bucket{SEL}[R]))) * 1000``;
* ``running``, ``queued``  ``sum(avg_over_time(GAUGE{SEL}[R]))``: requests in the batch and
  in the queue, on average over the step (their sum is the step's load).

Counter resets (a restarted engine starts its counters at zero) are handled by ``rate()``
itself, which treats any decrease as a reset; the bucket counters are counters too.  The
keys are sglang ``bench_serving``'s, so the guards of ledger.yaml (``p99_ttft_ms``) judge
observed and bench evidence alike.  A quantile read from a histogram is interpolated
linearly inside its bucket: :func:`bucket_resolution` says which bucket each value fell
in, so a reader knows how coarse the number is.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ledger.errors import EvidenceError
from ledger.evidence.metric_catalog import metric

QUANTILES = (("median", 0.5), ("p99", 0.99))
LATENCIES = (("ttft", "ttft"), ("itl", "itl"), ("e2e", "e2e_latency"))  # measure, key stem
RUNNING = "running"
QUEUED = "queued"
TIMEOUT_S = 30.0
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*'
_MATCH_RE = re.compile(rf"\{{(?:{_MATCHER}(?:,{_MATCHER})*,?\s*)?\}}\Z")


def parse_match(text: str | None) -> str:
    """``{job="decode",instance=~"a.*"}`` as its inner matchers (``""`` for none);
    InvalidValue-like EvidenceError for anything else (a user value never reaches
    PromQL unchecked)."""
    if not text:
        return ""
    text = text.strip()
    if not _MATCH_RE.match(text):
        raise EvidenceError(f"--match {text!r}: write label matchers in braces, e.g. "
                            '\'{job="decode"}\'')
    return text[1:-1].strip().rstrip(",")


def _sel(name: str, match: str) -> str:
    return f"{name}{{{match}}}" if match else name


def metric_names(engine: str, release: str | None) -> dict[str, str]:
    """Measure -> the Prometheus name ``engine`` at ``release`` exports (the catalog)."""
    names = {m: metric(engine, m, release).name for m, _ in LATENCIES}
    names["generation_tokens"] = metric(engine, "generation_tokens", release).name
    names[RUNNING] = metric(engine, RUNNING, release).name
    names[QUEUED] = metric(engine, QUEUED, release).name
    return names


def queries(engine: str, release: str | None, match: str, step_s: float) -> dict[str, str]:
    """Key -> PromQL of one step (rules in the module docs)."""
    names = metric_names(engine, release)
    r = f"{max(1, round(step_s))}s"
    out = {"output_throughput": f"sum(rate({_sel(names['generation_tokens'], match)}[{r}]))"}
    for measure, stem in LATENCIES:
        bucket = _sel(names[measure] + "_bucket", match)
        for label, q in QUANTILES:
            out[f"{label}_{stem}_ms"] = \
                f"histogram_quantile({q}, sum by (le) (rate({bucket}[{r}]))) * 1000"
    for gauge in (RUNNING, QUEUED):
        out[gauge] = f"sum(avg_over_time({_sel(names[gauge], match)}[{r}]))"
    return out


class Prometheus:
    """The operator's Prometheus server at ``url`` (``http://host:9090``)."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S) -> None:
        if not re.match(r"https?://[^\s/]+", url or ""):
            raise EvidenceError(f"--prometheus {url!r}: give the server's URL, e.g. "
                                "http://127.0.0.1:9090")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: list[tuple[str, str]]) -> Any:
        import urllib.error  # here: loading urllib.request costs every command ~30 ms
        import urllib.parse
        import urllib.request

        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as e:
            detail = _error_of(e.read())
            raise EvidenceError(f"Prometheus at {self.url} refused the query ({e.code}"
                                f"{': ' + detail if detail else ''})") from None
        except (urllib.error.URLError, OSError) as e:
            raise EvidenceError(f"cannot reach Prometheus at {self.url}: "
                                f"{getattr(e, 'reason', e)}") from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise EvidenceError(f"{self.url}{path} did not answer Prometheus's JSON: is "
                                "--prometheus the Prometheus server?") from None
        if not isinstance(answer, dict) or answer.get("status") != "success":
            raise EvidenceError(f"Prometheus at {self.url}: {_error_of(body) or 'no success'}")
        return answer.get("data")

    def range(self, promql: str, start: float, end: float, step_s: float
              ) -> dict[float, float]:
        """Step time -> value of a query that returns one series (none: empty)."""
        data = self._get("/api/v1/query_range", [("query", promql), ("start", f"{start:.3f}"),
                                                 ("end", f"{end:.3f}"),
                                                 ("step", f"{step_s:g}")])
        result = (data or {}).get("result") or []
        if len(result) > 1:
            raise EvidenceError(f"Prometheus at {self.url}: {promql} returned "
                                f"{len(result)} series where one was expected")
        values = result[0].get("values", []) if result else []
        out = {}
        for t, v in values:
            value = float(v)
            if math.isfinite(value):
                out[float(t)] = value
        return out

    def bucket_bounds(self, name: str, match: str, start: float, end: float) -> list[float]:
        """The ``le`` bounds of histogram ``name``'s buckets in ``[start, end]``, sorted."""
        data = self._get("/api/v1/series", [("match[]", _sel(name + "_bucket", match)),
                                            ("start", f"{start:.3f}"), ("end", f"{end:.3f}")])
        bounds = set()
        for series in data or []:
            try:
                bounds.add(float(series.get("le")))
            except (TypeError, ValueError):
                continue
        return sorted(bounds)


def _error_of(body: bytes) -> str:
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    return str(answer.get("error") or "") if isinstance(answer, dict) else ""


def bucket_resolution(bounds_s: list[float], value_ms: float | None) -> str | None:
    """``0.4..0.6 s``: the bucket a quantile (in ms) was interpolated in, or None."""
    if value_ms is None or not bounds_s:
        return None
    value = value_ms / 1000.0
    lower = 0.0
    for upper in bounds_s:
        if value <= upper:
            return f"{lower:g}..{upper:g} s"
        lower = upper
    return f"above {lower:g} s"


__all__ = ["LATENCIES", "Prometheus", "QUANTILES", "QUEUED", "RUNNING", "bucket_resolution",
           "metric_names", "parse_match", "queries"]
