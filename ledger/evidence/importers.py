"""Bench result importers: the bundled engine's JSON lines, sglang and vLLM result files.

Every importer turns a file into *run rows*: flat dicts of numeric metrics (sglang key
names), ``concurrency``, and ``output_digest`` when the bench gave one.  The caller adds
``side`` and ``repeat``.  Nothing here touches the workspace: a file that does not parse
raises :class:`ImportFormatError` and the caller stores nothing.

Shapes (detected per object, first match wins):

* ``engine`` - the bundled engine's ``bench --json``: JSON lines, one object per
  concurrency, sglang key names plus ``output_digest``.
* ``vllm`` - ``vllm bench serve --save-result`` (and the older ``benchmark_serving.py``):
  one JSON object with ``total_token_throughput`` and no ``input_throughput``.  Its
  ``max_concurrency`` is null when the run was rate-limited instead, so the caller must
  give the concurrency.
* ``sglang`` - ``bench_serving --output-file``: JSON lines, one object per run, with
  ``input_throughput``.

Only scalar numbers are kept as metrics: per-request lists (vLLM's ``ttfts``, ``itls``,
``generated_texts`` …), nested ``server_info`` and strings are dropped, and non-finite
numbers (``request_rate: inf``) become missing values.
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

CORE_KEYS = frozenset({"max_concurrency", "output_throughput", "request_throughput"})
SHAPES: dict[str, frozenset[str]] = {
    "engine": frozenset({"max_concurrency", "output_throughput", "output_digest"}),
    "vllm": CORE_KEYS | {"total_token_throughput", "median_tpot_ms"},
    "sglang": CORE_KEYS | {"input_throughput", "median_tpot_ms"},
}
# The keys that tell the shapes apart when the core keys are all there.
MARKERS = {
    "engine": "output_digest",
    "vllm": "total_token_throughput",
    "sglang": "input_throughput",
}
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


def _metrics(obj: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "max_concurrency":
            continue
        if key == "output_digest":
            if value is not None:
                row[key] = str(value)
        elif isinstance(value, bool):
            continue  # JSON true/false are flags, not metrics
        elif isinstance(value, (int, float)):
            row[key] = float(value) if math.isfinite(value) else None
    return row


def _concurrency(obj: Mapping[str, Any], override: int | None, where: str) -> int:
    if override is not None:
        return override
    value = obj.get("max_concurrency")
    if value is None:
        raise ImportFormatError(
            where,
            "max_concurrency is null (the bench ran at a request rate, not a concurrency): "
            "give the concurrency explicitly (--concurrency C)",
        )
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != int(value)
        or value < 1
    ):
        raise ImportFormatError(where, f"max_concurrency must be a positive integer, got {value!r}")
    return int(value)


def rows_from_objects(
    objs: Iterable[Mapping[str, Any]],
    where: str,
    concurrency: int | None = None,
    shapes: tuple[str, ...] = tuple(SHAPES),
) -> tuple[str, list[dict[str, Any]]]:
    """Turn parsed result objects into rows; every object must have the same shape."""
    if concurrency is not None and (isinstance(concurrency, bool) or concurrency < 1):
        raise ImportFormatError(where, f"concurrency override must be >= 1, got {concurrency!r}")
    shape: str | None = None
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
        row = _metrics(obj)
        row["concurrency"] = _concurrency(obj, concurrency, here)
        rows.append(row)
    if not rows:
        raise ImportFormatError(where, "no results in the file")
    return str(shape), rows


def load_result_file(
    path: Path, concurrency: int | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Detect the shape of a bench result file and return ``(shape, rows)``."""
    path = Path(path)
    return rows_from_objects(read_objects(path), str(path), concurrency)


def parse_engine_json(text: str, where: str) -> list[dict[str, Any]]:
    """Rows from the bundled engine's ``bench --json`` output (engine shape only)."""
    return rows_from_objects(parse_objects(text, where), where, shapes=("engine",))[1]


__all__ = [
    "ImportFormatError",
    "SHAPES",
    "detect_shape",
    "load_result_file",
    "parse_engine_json",
    "parse_objects",
    "read_objects",
    "rows_from_objects",
]
