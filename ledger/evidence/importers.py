"""Bench result importers: the bundled engine's JSON lines, sglang and vLLM result files.

Every importer turns a file into *run rows*: flat dicts of numeric metrics (sglang key
names), the row's load point (``concurrency`` or ``rate``, see :mod:`ledger.evidence.load`),
and ``output_digest`` when the bench gave one.  The caller adds ``side`` and ``repeat``.
Nothing here touches the workspace: a file that does not parse raises
:class:`ImportFormatError` and the caller stores nothing.

Shapes (detected per object, first match wins):

* ``engine`` - the bundled engine's ``bench --json``: JSON lines, one object per
  concurrency, sglang key names plus ``output_digest``.
* ``vllm`` - ``vllm bench serve --save-result`` (and the older ``benchmark_serving.py``):
  one JSON object with ``total_token_throughput`` and no ``input_throughput``.  Older
  files spell one key ``"request_goodput:"`` (with the colon); it is read as
  ``request_goodput``.
* ``sglang`` - ``bench_serving --output-file``: JSON lines, one object per run, with
  ``input_throughput``.
* ``sglang-old`` - the 18-key lines of older ``bench_serving`` (``median_ttft_ms``,
  ``median_itl_ms``, ``total_output_tokens_retokenized``; no ``request_throughput``, which
  is derived as ``completed / duration``).  Rate sweeps wrote these with
  ``max_concurrency: null`` and ``request_rate: 1.0 / 2.0 / Infinity`` (a bare ``Infinity``,
  which Python's json reads).

Load point: ``max_concurrency`` when set, else ``request_rate`` (a number, ``inf``,
``"inf"``, ``Infinity``), unless the caller gives one (``--concurrency`` / ``--rate``), which
wins.  A result with neither is refused, asking for one.  One file is one kind of sweep:
concurrency and rate points are not mixed.

Only scalar numbers are kept as metrics: per-request lists (vLLM's ``ttfts``, ``itls``,
``generated_texts`` …), nested ``server_info``, strings, and the load parameters
themselves (``max_concurrency``, ``request_rate``) are dropped; non-finite numbers become
missing values.  sglang's measured mean ``concurrency`` is kept as ``measured_concurrency``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from typing import Iterable
from typing import Mapping

from ledger.errors import EvidenceError
from ledger.errors import FileError
from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import RATE
from ledger.evidence.load import LoadPoint
from ledger.evidence.load import parse_rate

CORE_KEYS = frozenset({"output_throughput", "request_throughput"})
SHAPES: dict[str, frozenset[str]] = {
    "engine": frozenset({"max_concurrency", "output_throughput", "output_digest"}),
    "vllm": CORE_KEYS | {"total_token_throughput", "median_tpot_ms"},
    "sglang": CORE_KEYS | {"input_throughput", "median_tpot_ms"},
    "sglang-old": frozenset(
        {"output_throughput", "median_ttft_ms", "median_itl_ms", "completed", "duration",
         "total_output_tokens_retokenized"}
    ),
}
# The keys that tell the shapes apart when the core keys are all there (in this order).
MARKERS = {
    "engine": "output_digest",
    "vllm": "total_token_throughput",
    "sglang": "input_throughput",
    "sglang-old": "total_output_tokens_retokenized",
}
LOAD_KEYS = frozenset({"max_concurrency", "request_rate"})
RENAMED = {"request_goodput:": "request_goodput", "concurrency": "measured_concurrency"}
MAX_FILE_BYTES = 64 << 20


class ImportFormatError(FileError, EvidenceError):
    """A result file is unreadable, malformed or of an unknown shape."""


def detect_shape(obj: Mapping[str, Any]) -> str | None:
    """Name of the result shape ``obj`` has (``engine``, ``vllm``, ``sglang``), or None."""
    for name, marker in MARKERS.items():
        if marker in obj and SHAPES[name] <= obj.keys():
            return name
    return None


def read_objects(path: Path) -> list[dict[str, Any]]:
    """The JSON objects in ``path``: one document (vLLM, possibly pretty-printed) or JSON lines."""
    where = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ImportFormatError(
                where, f"larger than {MAX_FILE_BYTES >> 20} MiB: not a result file"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ImportFormatError(where, f"cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ImportFormatError(where, "not UTF-8 text: not a JSON result file") from e
    return parse_objects(text, where)


def parse_objects(text: str, where: str) -> list[dict[str, Any]]:
    """Parse one JSON object or JSON lines from ``text``; ``where`` names it in errors."""
    if not text.strip():
        raise ImportFormatError(where, "empty file: no results")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    if whole is not None:
        raise ImportFormatError(
            where, f"expected JSON objects, found a JSON {type(whole).__name__}"
        )
    objs: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ImportFormatError(f"{where}:{lineno}", f"not JSON ({e.msg})") from e
        if not isinstance(obj, dict):
            raise ImportFormatError(f"{where}:{lineno}", "expected a JSON object on each line")
        objs.append(obj)
    return objs


def _metrics(obj: Mapping[str, Any], shape: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key, value in obj.items():
        if key in LOAD_KEYS:
            continue
        key = RENAMED.get(key, key)
        if key == "output_digest":
            if value is not None:
                row[key] = str(value)
        elif isinstance(value, bool):
            continue  # JSON true/false are flags, not metrics
        elif isinstance(value, (int, float)):
            row[key] = float(value) if math.isfinite(value) else None
    if shape == "sglang-old" and "request_throughput" not in row:
        done, took = row.get("completed"), row.get("duration")
        row["request_throughput"] = done / took if done is not None and took else None
    return row


def load_point(
    obj: Mapping[str, Any],
    where: str,
    concurrency: int | None = None,
    rate: float | None = None,
) -> LoadPoint:
    """The load point of one result (see the module docstring)."""
    if concurrency is not None:
        return LoadPoint(CONCURRENCY, float(concurrency))
    if rate is not None:
        return LoadPoint(RATE, float(rate))
    value = obj.get("max_concurrency")
    if value is not None:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value != int(value)
            or value < 1
        ):
            raise ImportFormatError(
                where, f"max_concurrency must be a positive integer, got {value!r}"
            )
        return LoadPoint(CONCURRENCY, float(int(value)))
    raw = obj.get("request_rate")
    if raw is None:
        raise ImportFormatError(
            where,
            "the result has no load point (max_concurrency and request_rate are both "
            "missing or null): give it explicitly with --concurrency C or --rate R",
        )
    parsed = parse_rate(raw)
    if parsed is None:
        raise ImportFormatError(
            where,
            f"request_rate {raw!r} is not a rate (a positive number or inf) and "
            "max_concurrency is null: give the load point with --concurrency C or --rate R",
        )
    return LoadPoint(RATE, parsed)


def _check_overrides(where: str, concurrency: int | None, rate: float | None) -> None:
    if concurrency is not None and rate is not None:
        raise ImportFormatError(where, "give --concurrency or --rate, not both")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ImportFormatError(where, f"concurrency override must be >= 1, got {concurrency!r}")
    if rate is not None and parse_rate(rate) is None:
        raise ImportFormatError(where, f"rate override must be > 0 (or inf), got {rate!r}")


def rows_from_objects(
    objs: Iterable[Mapping[str, Any]],
    where: str,
    concurrency: int | None = None,
    shapes: tuple[str, ...] = tuple(SHAPES),
    rate: float | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Turn parsed result objects into rows; every object must have the same shape."""
    _check_overrides(where, concurrency, rate)
    shape: str | None = None
    kind: str | None = None
    rows: list[dict[str, Any]] = []
    for i, obj in enumerate(objs, 1):
        here = f"{where} (object {i})"
        found = detect_shape(obj)
        if found is None or found not in shapes:
            expected = "; ".join(f"{s}: {', '.join(sorted(SHAPES[s]))}" for s in shapes)
            raise ImportFormatError(
                here,
                "unknown result shape; expected the keys of one of "
                f"[{expected}]; found: {', '.join(sorted(obj)) or 'no keys'}",
            )
        if shape is not None and found != shape:
            raise ImportFormatError(here, f"mixes {shape} and {found} results in one file")
        shape = found
        point = load_point(obj, here, concurrency, rate)
        if kind is not None and point.kind != kind:
            raise ImportFormatError(
                here,
                f"mixes {kind} and {point.kind} load points in one file; import them "
                "separately (or give --concurrency / --rate)",
            )
        kind = point.kind
        row = _metrics(obj, found)
        row.update(point.to_row())
        rows.append(row)
    if not rows:
        raise ImportFormatError(where, "no results in the file")
    return str(shape), rows


def load_result_file(
    path: Path, concurrency: int | None = None, rate: float | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Detect the shape of a bench result file and return ``(shape, rows)``.

    ``concurrency`` / ``rate``: the load point of every result in the file, overriding
    what the file says (for files that say neither).
    """
    path = Path(path)
    return rows_from_objects(read_objects(path), str(path), concurrency, rate=rate)


def parse_engine_json(text: str, where: str) -> list[dict[str, Any]]:
    """Rows from the bundled engine's ``bench --json`` output (engine shape only)."""
    return rows_from_objects(parse_objects(text, where), where, shapes=("engine",))[1]


__all__ = [
    "ImportFormatError",
    "SHAPES",
    "detect_shape",
    "load_point",
    "load_result_file",
    "parse_engine_json",
    "parse_objects",
    "read_objects",
    "rows_from_objects",
]
