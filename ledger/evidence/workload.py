"""Workload keys: what a bench result measured, so that only like is compared with like.

A result's *workload key* is the tool that measured it, the backend it drove, the
dataset, the input/output lengths (and the random range ratio, the length
distribution), the number of prompts, the model, and the load parameter that is not the
sweep's axis: a concurrency sweep keeps its ``request_rate`` in the key, a request-rate
sweep its ``max_concurrency`` cap.  Two results are repeats of one another only when
their keys are equal (and they ran at the same load point).

Each result shape names its fields differently (``dataset_name``, ``random_input_len``,
``model_id`` …): :data:`SOURCES` says, per shape, which key of the file gives which field,
so a refusal names the key the operator sees in the file.  A field the file does not
say is ``None``.  sglang's ``random_*`` lengths are argparse defaults when the dataset is
not a random one (a ``sharegpt`` line still says ``random_input_len: 1024``), so they
only count for the datasets that use them.

**Lengths a file does not say.**  vLLM's ``--save-result`` files (and sglang's lines of
a non-random dataset, llmperf's per-request lists, guidellm reports, ``bench_offline_
throughput`` lines, AIPerf / genai-perf runs of a file dataset) name no input or output
length, but count the tokens they sent and got: ``total_input_tokens`` /
``total_output_tokens`` over ``completed`` requests (or a tool's stated per-request mean,
or the ``input_lens`` / ``output_lens`` arrays of ``--save-detailed``).  Where a key's
``input_len`` / ``output_len`` is unknown, the key carries that *estimate*,
``input_len_mean`` / ``output_len_mean`` (tokens per request, to 0.1).  Estimates are not
exact (retokenising a prompt moves its length by a few tokens: the real vLLM 0.9.2 file
counts 509 tokens for 16 prompts of 32), so they are not part of :func:`key_id`; two
results' estimates count as a difference only when they are **more than 10% apart
(of the larger) and more than 4 tokens apart**.  Why 10%: a serving engineer reads
1024 vs 1000 tokens as one workload and 1024 vs 512 as another; 10% is wide enough for
the drift of retokenising (<1% on a mean: 31.8 vs 32.0 in the real files) and for the
spread of generated lengths between runs that do not ignore EOS, while the length
settings one compares (128 vs 1024, 1024 vs 2048) are far beyond it; prefill cost and
KV footprint grow with the length, so a difference past it changes what tokens/s
mean.  Why 4 tokens: a BOS token or chat template adds a few
tokens whatever the length, and at 16 or 32 tokens that alone is over 10%.  An output
estimate counts what the engine generated, not what was asked: a side that stops early
measured less work per request, and its tokens/s do not compare either.  A difference
is refused as for the stated fields and named with both values (``input_len ~1024 (A)
vs ~128 (B) tokens per request ...``); ``--allow-mismatch input_len`` (``output_len``)
accepts it, also between the results of one file or one side, since an estimate may
be wrong where a stated value is not.  A stated length is never compared with an
estimate (``random_input_len`` is a maximum, not a mean, when the range ratio is below
1), and keys stored before estimates existed have none: nothing to compare.

Pure: no files, no printing.
"""

from __future__ import annotations

import math
from typing import Any
from typing import Iterable
from typing import Mapping
from typing import Sequence

from ledger.errors import EvidenceError

FIELDS = ("tool", "backend", "dataset", "input_len", "output_len", "range_ratio",
          "num_prompts", "model", "max_concurrency", "request_rate")
LOAD_FIELDS = {"concurrency": "max_concurrency", "rate": "request_rate"}

_SGLANG = {"backend": "backend", "dataset": "dataset_name", "input_len": "random_input_len",
           "output_len": "random_output_len", "range_ratio": "random_range_ratio",
           "model": "server_info.model_path", "max_concurrency": "max_concurrency",
           "request_rate": "request_rate"}
_VLLM = {"backend": "backend", "dataset": "dataset_name", "input_len": "random_input_len",
         "output_len": "random_output_len", "range_ratio": "random_range_ratio",
         "num_prompts": "num_prompts", "model": "model_id",
         "max_concurrency": "max_concurrency", "request_rate": "request_rate"}
# Flattened by ledger.evidence.tools: the workload is nested under "workload".
_NESTED = {**{n: f"workload.{n}" for n in ("backend", "dataset", "input_len", "output_len",
                                           "num_prompts", "model")},
           "max_concurrency": "max_concurrency", "request_rate": "request_rate"}
_BATCH = {"backend": "run_name", "input_len": "input_len", "output_len": "output_len",
          "max_concurrency": "max_concurrency", "request_rate": "request_rate"}
# shape -> (tool, {field: the file's key for it}); dotted keys reach into a nested object.
SOURCES: dict[str, tuple[str, dict[str, str]]] = {
    "engine": ("engine bench", {"backend": "mode", "input_len": "input_len",
                                "output_len": "output_len", "num_prompts": "num_prompts",
                                "model": "model", "max_concurrency": "max_concurrency",
                                "request_rate": "request_rate"}),
    "sglang": ("sglang bench_serving", _SGLANG),
    "sglang-old": ("sglang bench_serving", _SGLANG),
    "vllm": ("vllm bench serve", _VLLM),
    "aiperf": ("aiperf", _NESTED),
    "genai-perf": ("genai-perf", _NESTED),
    "guidellm": ("guidellm", _NESTED),
    "llmperf": ("llmperf", _NESTED),
    # The operator's label of the configuration is what tells its runs apart.
    "sglang-one-batch": ("sglang bench_one_batch", _BATCH),
    "sglang-one-batch-server": ("sglang bench_one_batch_server", _BATCH),
    "sglang-offline": ("sglang bench_offline_throughput", {
        "backend": "backend", "max_concurrency": "max_concurrency",
        "request_rate": "request_rate"}),
}
# Estimated lengths (see the module docstring): key name -> the field it stands for.
ESTIMATED = {"input_len_mean": "input_len", "output_len_mean": "output_len"}
TOLERANCE = 0.10  # estimates this far apart (of the larger) measured different lengths,
SLACK_TOKENS = 4.0  # unless they are no more than this many tokens apart
# Datasets whose lengths come from random_input_len / random_output_len / random_range_ratio.
RANDOM_DATASETS = ("random", "random-ids", "image", "random-image", "generated-shared-prefix")
_RANDOM_FIELDS = ("input_len", "output_len", "range_ratio")


def raw_value(obj: Mapping[str, Any], source: str) -> Any:
    """The value of ``source`` (``a.b`` reaches into nested objects) in ``obj``, or None."""
    value: Any = obj
    for part in source.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def normal(value: Any) -> Any:
    """A key value in one spelling: 1024.0 -> 1024, "inf"/Infinity -> inf, nested -> None."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return value
        return normal(number) if value.strip().lower() in ("inf", "infinity") else value
    if isinstance(value, (int, float)):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return float(value)
        return int(value) if value == int(value) else float(value)
    return None  # lists and objects are not key values


def workload_of(obj: Mapping[str, Any], shape: str, axis: str) -> dict[str, Any]:
    """The workload key of one result of ``shape`` in a sweep along ``axis``
    (``concurrency`` or ``rate``): every field of :data:`FIELDS` but the axis's own."""
    tool, sources = SOURCES.get(shape, (shape, {}))
    key: dict[str, Any] = {"tool": tool}
    for name in FIELDS[1:]:
        key[name] = normal(raw_value(obj, sources[name])) if name in sources else None
    if "dataset_name" in sources.values() and key["dataset"] not in RANDOM_DATASETS:
        for name in _RANDOM_FIELDS:
            key[name] = None  # argparse defaults the dataset did not use
    if shape.startswith("sglang") and key["dataset"] == "sharegpt":
        key["output_len"] = normal(obj.get("sharegpt_output_len"))
    key.pop(LOAD_FIELDS[axis])
    for name, field in ESTIMATED.items():
        mean = _tokens_per_request(obj, field.partition("_")[0]) \
            if key[field] is None else None
        if mean is not None:
            key[name] = round(mean, 1)
    return key


def _count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0


def _tokens_per_request(obj: Mapping[str, Any], which: str) -> float | None:
    """The mean ``which`` (``input`` / ``output``) tokens per request a result counts:
    its totals over ``completed``, else a stated mean, else its per-request lengths."""
    total, done = obj.get(f"total_{which}_tokens"), obj.get("completed")
    if _count(total) and _count(done) and done > 0:
        return float(total) / float(done)
    if _count(obj.get(f"mean_{which}_tokens")):
        return float(obj[f"mean_{which}_tokens"])
    lens, errors = obj.get(f"{which}_lens"), obj.get("errors")
    if not isinstance(lens, list):
        return None
    if isinstance(errors, list) and len(errors) == len(lens):
        lens = [n for n, e in zip(lens, errors) if not e]  # a failed request sent nothing
    lens = [n for n in lens if _count(n)]
    return sum(lens) / len(lens) if lens else None


def apart(a: Any, b: Any) -> bool:
    """Whether two estimated lengths measured different workloads (see the module)."""
    if not (_count(a) and _count(b)):
        return False
    low, high = sorted((float(a), float(b)))
    return high - low > max(TOLERANCE * high, SLACK_TOKENS)


def estimates_apart(a: Mapping[str, Any], b: Mapping[str, Any], allow: Iterable[str] = ()
                    ) -> dict[str, dict[str, Any]]:
    """The estimated lengths in which keys ``a`` and ``b`` differ, as ``{name: {A, B}}``,
    leaving out those whose field (``input_len`` …) is in ``allow``."""
    allowed = set(allow)
    return {n: {"A": a.get(n), "B": b.get(n)} for n, field in ESTIMATED.items()
            if field not in allowed and apart(a.get(n), b.get(n))}


def group_keys(keys: Sequence[Mapping[str, Any]], allow: Iterable[str] = ()
               ) -> list[list[int]]:
    """The indices of ``keys`` grouped into repeats, in order of first appearance: equal
    keys whose estimated lengths are not apart from their group's first."""
    allowed = list(allow)
    groups: list[list[int]] = []
    for i, key in enumerate(keys):
        for group in groups:
            first = keys[group[0]]
            if key_id(first) == key_id(key) and not estimates_apart(first, key, allowed):
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def source_name(shape: str, name: str, key: Mapping[str, Any] | None = None) -> str:
    """The file's key for workload field ``name`` (``dataset_name`` for ``dataset``), for
    a result with workload ``key`` (sglang's sharegpt output length has its own key); an
    estimated length is named by its field (``input_len``)."""
    if name in ESTIMATED:
        return ESTIMATED[name]
    if shape.startswith("sglang") and name == "output_len" and key \
            and key.get("dataset") == "sharegpt":
        return "sharegpt_output_len"
    return SOURCES.get(shape, ("", {}))[1].get(name, name)


def show(value: Any) -> str:
    """A key value as the operator reads it: ``random``, ``1024``, ``inf``, ``(not said)``."""
    if value is None:
        return "(not said)"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return str(value)


def differing(keys: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fields in which ``keys`` differ (in FIELDS order): those with two stated values
    that differ, or when there are none, those said by some keys and not by others; then
    the estimated lengths (``input_len_mean`` …) of two keys that are apart."""
    names = [n for n in FIELDS if n in keys[0] and len({_hashable(k.get(n)) for k in keys}) > 1]
    stated = [n for n in names
              if len({_hashable(k.get(n)) for k in keys if k.get(n) is not None}) > 1]
    estimated = [n for n in ESTIMATED
                 if any(apart(a.get(n), b.get(n)) for a in keys for b in keys)]
    return (stated or names) + estimated


def estimate_text(value: Any) -> str:
    """An estimated length as the operator reads it: ``~1024``, ``~31.8``."""
    if not _count(value):
        return show(value)
    return f"~{value:.0f}" if value >= 100 else f"~{value:g}"


ESTIMATE_NOTE = ("tokens per request, from the results' token counts (the files do not "
                 "state their lengths; estimates count as different when more than "
                 f"{TOLERANCE:.0%} and {SLACK_TOKENS:g} tokens apart)")


def _hashable(value: Any) -> Any:
    return ("float", value) if isinstance(value, float) else value


def key_id(key: Mapping[str, Any]) -> tuple:
    """A hashable identity of a key (for grouping results)."""
    return tuple((n, _hashable(key.get(n))) for n in FIELDS if n in key)


def label(key: Mapping[str, Any], names: Iterable[str], shape: str) -> str:
    """``dataset_name random, random_input_len 1024``: the named fields one key states."""
    return ", ".join(f"{source_name(shape, n, key)} "
                     + (f"{estimate_text(key[n])} tokens per request" if n in ESTIMATED
                        else show(key.get(n)))
                     for n in names if key.get(n) is not None) or "the rest"


def parse_selection(items: Iterable[str]) -> dict[str, str]:
    """``--workload KEY=VALUE`` items as a mapping (KEY is the file's key name)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise EvidenceError(f"--workload takes KEY=VALUE (a key of the result file, "
                                f"e.g. dataset_name=random), got {item!r}")
        out[name.strip()] = value.strip()
    return out


def matches(obj: Mapping[str, Any], selection: Mapping[str, str]) -> bool:
    """Whether result ``obj`` has every ``KEY=VALUE`` of ``selection`` (numbers compared as
    numbers, ``null``/``none`` for a missing value)."""
    for name, wanted in selection.items():
        have = normal(raw_value(obj, name))
        if have is None:
            if wanted.lower() not in ("null", "none", ""):
                return False
            continue
        if isinstance(have, (int, float)) and not isinstance(have, bool):
            try:
                if float(wanted) != float(have):
                    return False
            except ValueError:
                return False
        elif str(have) != wanted:
            return False
    return True


def compare_sides(
    a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, allow: Iterable[str] = (),
    *, estimates: bool = True,
) -> dict[str, dict[str, Any]]:
    """The fields in which side A's and B's workload keys differ, as ``{field: {A, B}}``,
    leaving out the fields in ``allow``.  What is not known is no proof of a difference:
    no key on a side (evidence stored before keys were kept) differs in nothing, and a
    field one side does not say (vLLM's files name no dataset) is not compared; ``tool``
    is always said.  Estimated lengths (``input_len_mean`` …, see the module) differ when
    they are apart; ``estimates=False`` leaves them out."""
    if not a or not b:
        return {}
    allowed = set(allow)
    names = [n for n in FIELDS if (n in a or n in b) and n not in allowed]
    diff = {n: {"A": a.get(n), "B": b.get(n)} for n in names
            if _hashable(a.get(n)) != _hashable(b.get(n))
            and (n == "tool" or (a.get(n) is not None and b.get(n) is not None))}
    return {**diff, **(estimates_apart(a, b, allowed) if estimates else {})}


def check_allow(allow: Iterable[str]) -> list[str]:
    """Validate ``--allow-mismatch`` field names."""
    names = list(allow)
    unknown = [n for n in names if n not in FIELDS]
    if unknown:
        raise EvidenceError(f"--allow-mismatch: unknown workload field(s) {', '.join(unknown)}; "
                            f"known: {', '.join(FIELDS)}")
    return names


def mismatch_text(diff: Mapping[str, Mapping[str, Any]], names: tuple[str, str] = ("A", "B")
                  ) -> str:
    """``backend sglang (A) vs vllm (B); input_len ~1024 (A) vs ~128 (B) tokens per
    request, from …`` for a refusal or a summary warning."""
    a, b = names
    return "; ".join(
        f"{ESTIMATED[n]} {estimate_text(d['A'])} ({a}) vs {estimate_text(d['B'])} ({b}) "
        + ESTIMATE_NOTE if n in ESTIMATED else f"{n} {show(d['A'])} ({a}) vs {show(d['B'])} ({b})"
        for n, d in diff.items())


def allow_hint(names: Iterable[str]) -> str:
    """``--allow-mismatch backend --allow-mismatch input_len``: the options that accept
    the differences ``names`` (an estimated length by its field)."""
    fields = dict.fromkeys(ESTIMATED.get(n, n) for n in names)
    return " ".join(f"--allow-mismatch {f}" for f in fields)


def side_workloads(parsed, side: str, stored: Mapping[str, Any], allow: Sequence[str] = ()
                   ) -> dict[str, Any]:
    """Every side's workload key once these files join: the files of one side are repeats,
    so they (and what the side already holds) must have one key.  ``allow`` waives only
    estimated lengths here (an estimate may be wrong; a stated value is not)."""
    keys = {k: dict(v) for k, v in stored.items() if isinstance(v, Mapping)}
    where = {k: "the entry's latest import" for k in keys}
    for path, result in parsed:
        have = keys.get(side)
        if have is not None:
            diff = compare_sides(have, result.workload, estimates=False) \
                | estimates_apart(have, result.workload, allow)
            if diff:
                raise EvidenceError(
                    f"{path}: not a repeat of {where[side]} for side {side}: "
                    + mismatch_text(diff, ("before", "this file"))
                    + "; runs of one side must measure one workload (import it as another "
                    "run with --new-run, or select the matching results with --workload"
                    + (f", or give {allow_hint(n for n in diff if n in ESTIMATED)} if they "
                       "are repeats all the same" if set(diff) & set(ESTIMATED) else "")
                    + ")")
        else:
            keys[side], where[side] = dict(result.workload), str(path)
    return keys


def check_sides(keys: Mapping[str, Any], allow: Sequence[str]) -> dict[str, Any]:
    """Refuse A and B of different workloads (unless ``allow`` names each differing field);
    return the summary's ``workload``: the common key, allowed differences as {A, B}."""
    a, b = keys.get("A"), keys.get("B")
    diff = compare_sides(a, b, allow)
    if diff:
        raise EvidenceError(
            "side A and side B measured different workloads: " + mismatch_text(diff)
            + f"; an A/B compares one workload (give {allow_hint(diff)} to compare them "
            "knowingly)")
    return summary_workload(a, b)


def summary_workload(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict:
    """One key for a summary: the fields A and B share, and ``{A: …, B: …}`` where they
    differ (only after ``--allow-mismatch``); the side that has a key when one has none."""
    if not a or not b:
        return dict(a or b or {})
    diff = compare_sides(a, b)
    names = [*a, *[k for k in b if k not in a]]
    return {n: diff.get(n, a.get(n)) for n in names}


__all__ = [
    "ESTIMATED",
    "FIELDS",
    "SOURCES",
    "check_allow",
    "check_sides",
    "side_workloads",
    "summary_workload",
    "compare_sides",
    "differing",
    "estimates_apart",
    "group_keys",
    "key_id",
    "label",
    "matches",
    "mismatch_text",
    "normal",
    "parse_selection",
    "show",
    "source_name",
    "workload_of",
]
