"""Bench result importers: the bundled engine's JSON lines, sglang and vLLM result files.

Every importer turns a file into *run rows*: flat dicts of numeric metrics (sglang key
names), the row's load point (``concurrency`` or ``rate``, see :mod:`ledger.evidence.load`),
and ``output_digest`` when the bench gave one.  The caller adds ``side`` and ``repeat``.
Nothing here touches the workspace: a file that does not parse raises
:class:`ImportFormatError` and the caller stores nothing.  Reading a file into its JSON
objects and telling their shape is :mod:`ledger.evidence.result_json`'s part.

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
* ``aiperf``, ``genai-perf``, ``guidellm``, ``llmperf``, ``sglang-one-batch``,
  ``sglang-one-batch-server``, ``sglang-offline`` - other tools' files, made flat first
  by :mod:`ledger.evidence.tools` (each tool's layout, load point and metadata there).

Load point: ``max_concurrency`` when set, else ``request_rate`` (a number, ``inf``,
``"inf"``, ``Infinity``), unless the caller gives one (``--concurrency`` / ``--rate``), which
wins.  A result with neither is refused, asking for one.  One file is one kind of sweep:
concurrency and rate points are not mixed.

Only scalar numbers are kept as metrics.  Per-request lists (vLLM's ``--save-detailed``
and sglang's ``--output-details`` ``ttfts``, ``itls``, ``generated_texts`` …) first give
the percentiles the file lacks and the output digest (:mod:`ledger.evidence.tools.perrequest`);
the lists themselves, nested ``server_info``, strings, and the load parameters themselves
(``max_concurrency``, ``request_rate``) are then dropped; non-finite numbers become
missing values.  sglang's measured mean ``concurrency`` is kept as ``measured_concurrency``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.evidence.load import CONCURRENCY
from ledger.evidence.load import RATE
from ledger.evidence.load import LoadPoint
from ledger.evidence.load import parse_rate
from ledger.evidence.result_json import SHAPES
from ledger.evidence.result_json import ImportFormatError
from ledger.evidence.result_json import parse_located
from ledger.evidence.result_json import parse_objects
from ledger.evidence.result_json import read_text
from ledger.evidence.result_json import shape_of
from ledger.evidence.workload import ESTIMATED
from ledger.evidence.workload import ESTIMATE_NOTE
from ledger.evidence.workload import allow_hint
from ledger.evidence.workload import differing
from ledger.evidence.workload import group_keys
from ledger.evidence.workload import label
from ledger.evidence.workload import matches
from ledger.evidence.workload import normal
from ledger.evidence.workload import raw_value
from ledger.evidence.workload import show
from ledger.evidence.workload import source_name
from ledger.evidence.workload import workload_of

LOAD_KEYS = frozenset({"max_concurrency", "request_rate"})
RENAMED = {"request_goodput:": "request_goodput", "concurrency": "measured_concurrency",
           "generated_digest": "output_digest"}


def _refuse_failed_run(here: str, obj: Mapping[str, Any]) -> None:
    """A run that completed no request measured nothing: its throughputs of 0 would read
    as a regression of 100%.  Refused, naming what the file says (``completed: 0,
    failed: 8``), never stored as a 0 throughput."""
    done = obj.get("completed")
    if isinstance(done, (int, float)) and not isinstance(done, bool) and done == 0:
        failed = obj.get("failed")
        said = "completed: 0" + (f", failed: {failed}" if isinstance(failed, (int, float))
                                 and not isinstance(failed, bool) else "")
        raise ImportFormatError(
            here, f"the run completed no request ({said}): it measured nothing, so it is "
            "not imported; fix the failing requests (the server's log says why) and run the "
            "bench again")


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
    axis: str | None = None,
) -> LoadPoint:
    """The load point of one result (see the module docstring); ``axis`` (from
    :func:`choose_axis`) says which of its load parameters is the sweep's."""
    if concurrency is not None:
        return LoadPoint(CONCURRENCY, float(concurrency))
    if rate is not None:
        return LoadPoint(RATE, float(rate))
    value = obj.get("max_concurrency")
    if value is not None and axis != RATE:
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


@dataclass
class Parsed:
    """One file's (or one bench run's) results: their shape, rows, workload key, and what
    the file says of where and how it was measured (``origin``: host, date, tool version)."""

    shape: str
    rows: list[dict[str, Any]]
    workload: dict[str, Any]
    origin: dict[str, Any] = field(default_factory=dict)


def choose_axis(
    located: Sequence[tuple[str, Mapping[str, Any]]],
    concurrency: int | None = None,
    rate: float | None = None,
    rate_cap: int | None = None,
) -> str:
    """The sweep axis of results imported together: ``concurrency`` or ``rate``.

    An override (``--concurrency`` / ``--rate``) decides.  Results that all set
    ``max_concurrency`` are a concurrency sweep, unless they share one cap and vary the
    request rate (a rate sweep under one ``--max-concurrency``), or they join a rate
    sweep under that very cap (``rate_cap``) and each says its rate.  Results that set no
    cap are a rate sweep; a file mixing the two is refused.
    """
    if concurrency is not None:
        return CONCURRENCY
    if rate is not None:
        return RATE
    caps = [normal(obj.get("max_concurrency")) for _, obj in located]
    rates = [parse_rate(obj.get("request_rate")) for _, obj in located]
    capped = [c is not None for c in caps]
    if not any(capped):
        return RATE
    if not all(capped):
        first = located[capped.index(not capped[0])][0]
        raise ImportFormatError(
            first, f"mixes {CONCURRENCY} and {RATE} load points in one import (some "
            "results set max_concurrency, some do not); import them separately (or give "
            "--concurrency / --rate)")
    all_rated = all(r is not None for r in rates)
    one_cap = len(set(caps)) == 1
    if all_rated and one_cap and (caps[0] == rate_cap or len(set(rates)) > 1):
        return RATE
    return CONCURRENCY


def _select(located, selection: Mapping[str, str] | None, where: str):
    if not selection:
        return located
    chosen = [(here, obj) for here, obj in located if matches(obj, selection)]
    if not chosen:
        said = "; ".join(
            f"{k}: " + ", ".join(sorted({show(normal(raw_value(o, k))) for _, o in located}))
            for k in selection)
        raise ImportFormatError(where, "no result matches --workload "
                                + " ".join(f"{k}={v}" for k, v in selection.items())
                                + f"; the file has {said}")
    return chosen


def _places(heres: Sequence[str]) -> str:
    """``f.jsonl:1-5`` for consecutive lines of one file, else the places joined."""
    lines = [h.rpartition(":") for h in heres]
    if all(sep and n.isdigit() and f == lines[0][0] for f, sep, n in lines):
        nums = [int(n) for _, _, n in lines]
        if nums == list(range(nums[0], nums[0] + len(nums))) and len(nums) > 1:
            return f"{lines[0][0]}:{nums[0]}-{nums[-1]}"
    return ", ".join(heres)


def _one_workload(located, keys, shape: str, where: str, allow=()) -> dict[str, Any]:
    """The one workload key of ``located``'s results, or a refusal naming each workload
    (``allow``: estimated lengths that may differ, see :mod:`ledger.evidence.workload`)."""
    groups = group_keys(keys, allow)
    if len(groups) == 1:
        return keys[0]
    shown = differing([keys[idx[0]] for idx in groups])
    lines = [f"  {label(keys[idx[0]], shown, shape)}: "
             f"{_places([located[i][0] for i in idx])} ({len(idx)} result(s))"
             for idx in groups]
    first = keys[groups[0][0]]
    pick = " ".join(f"--workload {source_name(shape, n, first)}={show(first.get(n))}"
                    for n in shown if first.get(n) is not None and n not in ESTIMATED)
    estimated = [n for n in shown if n in ESTIMATED]
    raise ImportFormatError(
        where,
        f"holds {len(groups)} workloads, which are not repeats of one another (they differ "
        f"in {', '.join(source_name(shape, n) for n in shown)}):\n" + "\n".join(lines)
        + f"\nimport one at a time, e.g. with {pick or '--workload KEY=VALUE'}"
        + (f" ({ESTIMATE_NOTE}; {allow_hint(estimated)} joins them as repeats all the same)"
           if estimated else ""),
    )


def origin_of(obj: Mapping[str, Any], shape: str) -> dict[str, Any]:
    """What a result says of where and how it was measured: the tool's version, the date,
    the command and the host, where the file has them (else nothing)."""
    if isinstance(obj.get("origin"), Mapping):
        found = dict(obj["origin"])
    else:
        info = obj.get("server_info") if isinstance(obj.get("server_info"), Mapping) else {}
        found = {"tool": shape, "version": info.get("version"), "date": obj.get("date"),
                 "host": obj.get("host") or obj.get("hostname")}
    return {k: v for k, v in found.items() if isinstance(v, (str, int, float)) and v != ""}


def parse_results(
    located: Sequence[tuple[str, Mapping[str, Any]]],
    where: str,
    concurrency: int | None = None,
    rate: float | None = None,
    *,
    shapes: tuple[str, ...] = tuple(SHAPES),
    select: Mapping[str, str] | None = None,
    rate_cap: int | None = None,
    axis: str | None = None,
    allow: Sequence[str] = (),
) -> Parsed:
    """Turn located result objects into rows of one shape and one workload.

    ``select``: ``--workload KEY=VALUE`` pairs keeping only the results that have them;
    results of several workloads left after it are refused, each named with its places.
    ``rate_cap``: the cap of the rate sweep these join (see :func:`choose_axis`);
    ``axis``: the sweep axis, when chosen over several files already.
    ``allow``: ``--allow-mismatch`` fields; only estimated lengths are waived here.
    """
    _check_overrides(where, concurrency, rate)
    if not located:
        raise ImportFormatError(where, "no results in the file")
    shape = shape_of(located[0][0], located[0][1], shapes)
    for here, obj in located[1:]:
        found = shape_of(here, obj, shapes)
        if found != shape:
            raise ImportFormatError(here, f"mixes {shape} and {found} results in one file")
    located = _select(located, select, where)
    for here, obj in located:
        _refuse_failed_run(here, obj)
    axis = axis or choose_axis(located, concurrency, rate, rate_cap)
    keys = [workload_of(obj, shape, axis) for _, obj in located]
    workload = _one_workload(located, keys, shape, where, allow)
    rows = []
    for here, obj in located:
        row = _metrics(obj, shape)
        row.update(load_point(obj, here, concurrency, rate, axis).to_row())
        rows.append(row)
    return Parsed(shape, rows, workload, origin_of(located[0][1], shape))


def rows_from_objects(
    objs: Iterable[Mapping[str, Any]],
    where: str,
    concurrency: int | None = None,
    shapes: tuple[str, ...] = tuple(SHAPES),
    rate: float | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """``(shape, rows)`` of parsed result objects (see :func:`parse_results`)."""
    located = [(f"{where} (object {i})", obj) for i, obj in enumerate(objs, 1)]
    parsed = parse_results(located, where, concurrency, rate, shapes=shapes)
    return parsed.shape, parsed.rows


def read_result_file(
    path: Path,
    concurrency: int | None = None,
    rate: float | None = None,
    *,
    select: Mapping[str, str] | None = None,
    rate_cap: int | None = None,
    allow: Sequence[str] = (),
) -> Parsed:
    """Detect the shape of a bench result file and parse it (see :func:`parse_results`)."""
    path = Path(path)
    return parse_results(located_file(path), str(path), concurrency, rate,
                         select=select, rate_cap=rate_cap, allow=allow)


def located_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(place, flat result)`` for each result in ``path``: JSON or JSON lines, an AIPerf
    CSV, an llmperf per-request list, a guidellm YAML report (see
    :mod:`ledger.evidence.tools`), or an AIPerf artifact directory (its summary, with the
    digest of its outputs)."""
    from ledger.evidence import tools

    path = Path(path)
    if path.is_dir():
        summary = path / tools.AIPERF_SUMMARY
        if not summary.is_file():
            raise ImportFormatError(str(path), f"a directory, and no {tools.AIPERF_SUMMARY} "
                                    "in it (an AIPerf artifact directory): give a result file")
        located = located_file(summary)
        digest = tools.outputs_digest(path / tools.AIPERF_OUTPUTS)
        if digest:
            for _, obj in located:
                obj["output_digest"] = digest
        return located
    where = str(path)
    text = read_text(path)
    whole = tools.whole_document(text, where)
    if whole is not None:
        return whole
    return [flat for here, obj in parse_located(text, where)
            for flat in tools.flat_results(here, obj)]


def read_result_files(
    paths: Sequence[Path],
    concurrency: int | None = None,
    rate: float | None = None,
    *,
    select: Mapping[str, str] | None = None,
    rate_cap: int | None = None,
    allow: Sequence[str] = (),
) -> list[Parsed]:
    """Parse result files imported together: one sweep axis for all of them (files of one
    rate each, under one ``--max-concurrency`` cap, are a rate sweep together)."""
    located = [(str(p), located_file(Path(p))) for p in paths]
    chosen = [obj for _, objs in located for obj in objs if not select or matches(obj[1], select)]
    axis = choose_axis(chosen, concurrency, rate, rate_cap) if chosen else None
    return [parse_results(objs, where, concurrency, rate, select=select, axis=axis,
                          allow=allow) for where, objs in located]


def load_result_file(
    path: Path, concurrency: int | None = None, rate: float | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Detect the shape of a bench result file and return ``(shape, rows)``.

    ``concurrency`` / ``rate``: the load point of every result in the file, overriding
    what the file says (for files that say neither).
    """
    parsed = read_result_file(path, concurrency, rate)
    return parsed.shape, parsed.rows


def parse_engine_json(text: str, where: str) -> list[dict[str, Any]]:
    """Rows from the bundled engine's ``bench --json`` output (engine shape only)."""
    return rows_from_objects(parse_objects(text, where), where, shapes=("engine",))[1]


__all__ = [
    "ImportFormatError",
    "load_point",
    "load_result_file",
    "parse_engine_json",
    "rows_from_objects",
]
