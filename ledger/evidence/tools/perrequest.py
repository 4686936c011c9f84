"""Per-request arrays made into percentiles and an output digest.

vLLM's ``--save-result --save-detailed`` and SGLang's ``bench_serving --output-details``
write, beside their summary numbers, one entry per request: ``ttfts`` (s), ``itls`` (a
list of gaps per request, s), ``input_lens``, ``output_lens``, ``errors`` (``""`` when the
request succeeded) and ``generated_texts``.  :func:`details` turns them into:

* ``{mean,median,std,p90,p95,p99}_ttft_ms`` over the successful requests and the same of
  ``itl`` over every gap of every successful request, filling only the statistics the
  file does not state itself (the bench's own numbers win; it had the same requests);
* ``generated_digest``: ``sha256:`` of every request's generated text in request order
  (the order of the prompts the bench sent, not of completion, so two runs of one seed
  and dataset compare; a failed request counts as an empty text).  The importer reads it
  as the row's ``output_digest``;
* ``per_request_count``, and ``failed`` where the file does not say it.

Percentiles interpolate linearly between order statistics (numpy's default, which
vLLM's and SGLang's benches use).  Pure: no files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from typing import Any
from typing import Iterable
from typing import Mapping
from typing import Sequence

PERCENTILES = (90, 95, 99)
DETAIL_KEYS = ("ttfts", "itls", "generated_texts", "errors")


def is_number(value: Any) -> bool:
    """A finite JSON number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def unix_date(stamp: Any) -> str | None:
    """A Unix timestamp (s) as an ISO 8601 UTC date, None when it is none."""
    return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).isoformat() \
        if is_number(stamp) else None


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted ``ordered`` (linear interpolation)."""
    at = (len(ordered) - 1) * q / 100.0
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def percentile_stats(values: Iterable[float], name: str, ddof: int = 0) -> dict[str, float]:
    """``mean_NAME_ms``, ``median_…``, ``std_…`` and ``pNN_…`` of ``values``; the standard
    deviation divides by n - ``ddof`` (0 as numpy's, vLLM's and SGLang's; 1 as pandas',
    llmperf's)."""
    ordered = sorted(v for v in values if is_number(v))
    if not ordered:
        return {}
    mean = sum(ordered) / len(ordered)
    spread = sum((v - mean) ** 2 for v in ordered) / max(len(ordered) - ddof, 1)
    out = {f"mean_{name}_ms": mean, f"median_{name}_ms": percentile(ordered, 50),
           f"std_{name}_ms": math.sqrt(spread)}
    out.update({f"p{q}_{name}_ms": percentile(ordered, q) for q in PERCENTILES})
    return out


def texts_digest(texts: Sequence[Any]) -> str:
    """``sha256:`` of the texts in order, each closed by a NUL (None counts as empty)."""
    h = hashlib.sha256()
    for text in texts:
        h.update(("" if text is None else str(text)).encode("utf-8") + b"\0")
    return "sha256:" + h.hexdigest()


def has_details(obj: Mapping[str, Any]) -> bool:
    return any(isinstance(obj.get(k), list) for k in DETAIL_KEYS)


def _ok(obj: Mapping[str, Any], n: int) -> list[bool]:
    errors = obj.get("errors")
    if isinstance(errors, list) and len(errors) == n:
        return [not e for e in errors]
    return [True] * n


def details(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the per-request arrays of ``obj`` add to its flat result (see the module)."""
    ttfts = obj.get("ttfts") if isinstance(obj.get("ttfts"), list) else []
    itls = obj.get("itls") if isinstance(obj.get("itls"), list) else []
    texts = obj.get("generated_texts")
    n = max(len(ttfts), len(itls), len(texts) if isinstance(texts, list) else 0)
    ok = _ok(obj, n)
    found: dict[str, Any] = {"per_request_count": n}
    found.update(percentile_stats(
        (t * 1000.0 for t, good in zip(ttfts, ok) if good and is_number(t)), "ttft"))
    gaps = [g * 1000.0 for gs, good in zip(itls, ok) if good and isinstance(gs, list)
            for g in gs if is_number(g)]
    found.update(percentile_stats(gaps, "itl"))
    if isinstance(texts, list) and texts:
        found["generated_digest"] = texts_digest(texts)
    if "failed" not in obj and isinstance(obj.get("errors"), list):
        found["failed"] = ok.count(False)
    return {k: v for k, v in found.items() if k not in obj}


__all__ = ["details", "has_details", "is_number", "percentile", "percentile_stats",
           "texts_digest", "unix_date"]
