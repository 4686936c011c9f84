"""What a bench result file holds: its JSON objects, each with its place, and their shape.

The shapes and how they are told apart are those of :mod:`ledger.evidence.importers`'
docstring; turning the objects into run rows (metrics, load points, one workload) is done
there.  A file that does not read as JSON objects of a known shape raises
:class:`ImportFormatError`, naming the file (and line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from typing import Mapping

from ledger.errors import EvidenceError
from ledger.errors import FileError

CORE_KEYS = frozenset({"output_throughput", "request_throughput"})
SHAPES: dict[str, frozenset[str]] = {
    "engine": frozenset({"max_concurrency", "output_throughput", "output_digest"}),
    "vllm": CORE_KEYS | {"total_token_throughput", "median_tpot_ms"},
    "sglang": CORE_KEYS | {"input_throughput", "median_tpot_ms"},
    "sglang-old": frozenset(
        {"output_throughput", "median_ttft_ms", "median_itl_ms", "completed", "duration",
         "total_output_tokens_retokenized"}
    ),
    # Flattened by ledger.evidence.tools from the tool's own layout.
    "aiperf": frozenset({"aiperf_version", "output_throughput", "request_throughput"}),
    "genai-perf": frozenset({"genai_perf", "output_throughput", "request_throughput"}),
    "guidellm": frozenset({"guidellm", "output_throughput", "median_ttft_ms"}),
    "llmperf": frozenset({"llmperf", "median_ttft_ms", "completed"}),
    "sglang-one-batch": frozenset({"sglang_one_batch", "output_throughput", "batch_size"}),
    "sglang-one-batch-server": frozenset({"sglang_one_batch_server", "output_throughput",
                                          "batch_size"}),
    "sglang-offline": frozenset({"sglang_offline", "output_throughput", "request_throughput"}),
}
# The keys that tell the shapes apart when the core keys are all there (in this order).
MARKERS = {
    "aiperf": "aiperf_version",
    "genai-perf": "genai_perf",
    "guidellm": "guidellm",
    "llmperf": "llmperf",
    "sglang-one-batch": "sglang_one_batch",
    "sglang-one-batch-server": "sglang_one_batch_server",
    "sglang-offline": "sglang_offline",
    "engine": "output_digest",
    "vllm": "total_token_throughput",
    "sglang": "input_throughput",
    "sglang-old": "total_output_tokens_retokenized",
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


def read_text(path: Path) -> str:
    """The text of a result file (refused when too large, unreadable or not UTF-8)."""
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
    return text


def parse_objects(text: str, where: str) -> list[dict[str, Any]]:
    """Parse one JSON object or JSON lines from ``text``; ``where`` names it in errors."""
    return [obj for _, obj in parse_located(text, where)]


def parse_located(text: str, where: str) -> list[tuple[str, dict[str, Any]]]:
    """``(where[:line], object)`` for one JSON document or each JSON line of ``text``."""
    if not text.strip():
        raise ImportFormatError(where, "empty file: no results")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [(where, whole)]
    sweep = _sweep_runs(whole, where)
    if sweep is not None:
        return sweep
    if whole is not None:
        hint = (" (nearest known format: llmperf's per-request list, whose objects have "
                "ttft_s, end_to_end_latency_s, number_output_tokens)"
                if isinstance(whole, list) else "")
        raise ImportFormatError(
            where, f"expected JSON objects, found a JSON {type(whole).__name__}{hint}"
        )
    objs: list[tuple[str, dict[str, Any]]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ImportFormatError(f"{where}:{lineno}", f"not JSON ({e.msg})") from e
        if not isinstance(obj, dict):
            raise ImportFormatError(f"{where}:{lineno}", "expected a JSON object on each line")
        objs.append((f"{where}:{lineno}", obj))
    return objs


def _sweep_runs(whole: Any, where: str) -> list[tuple[str, dict[str, Any]]] | None:
    """The runs of a vLLM ``bench sweep serve`` ``summary.json``: a JSON list of one
    combination's ``--save-result`` objects, each with its ``run_number`` and the sweep's
    overrides (``max_num_seqs`` ...) added.  They are repeats of one workload, each named
    ``summary.json[run=N]``; ``run_number`` is no metric and is dropped.  None for any
    other list (the caller says what it is not)."""
    if not isinstance(whole, list) or not whole or not all(
            isinstance(o, dict) and "run_number" in o and detect_shape(o) == "vllm"
            for o in whole):
        return None
    out = []
    for i, obj in enumerate(whole):
        run = obj.get("run_number")
        obj = {k: v for k, v in obj.items() if k != "run_number"}
        out.append((f"{where}[run={run if isinstance(run, int) else i}]", obj))
    return out


def nearest_format(obj: Mapping[str, Any], shapes: tuple[str, ...] = tuple(SHAPES)) -> str:
    """``nearest known format: vllm (lacks total_token_throughput)``: the shape whose keys
    the object has most of, and what it lacks of them.  With every shape allowed, the
    other tools' own layouts count too (:data:`ledger.evidence.tools.RAW_SHAPES`: an
    llmperf summary lacking its throughput is named as such, not as a flat shape)."""
    from ledger.evidence.tools import RAW_SHAPES

    known = {name: SHAPES[name] for name in shapes}
    if shapes == tuple(SHAPES):
        known.update(RAW_SHAPES)

    def share(name: str) -> float:
        return len(known[name] & obj.keys()) / len(known[name])

    best = max(known, key=share)
    if share(best) == 0:
        return f"nearest known format: none shares a key ({', '.join(known)} are known)"
    lacks = ", ".join(sorted(known[best] - obj.keys()))
    return f"nearest known format: {best} (lacks {lacks})"


def shape_of(here: str, obj: Mapping[str, Any], shapes: tuple[str, ...]) -> str:
    found = detect_shape(obj)
    if found is None or found not in shapes:
        expected = "; ".join(f"{s}: {', '.join(sorted(SHAPES[s]))}" for s in shapes)
        raise ImportFormatError(
            here,
            f"unknown result shape, {nearest_format(obj, shapes)}; expected the keys of "
            f"one of [{expected}]; found: {', '.join(sorted(obj)) or 'no keys'}",
        )
    return found
