"""Does the bench read the knob?  The engine a bench command measures against the engine
that reads the entry's knob.

Pure: strings in, a reason (or None) out.

A bench command measures the **bundled engine** when it runs the engine's own bench
(``-m engine bench``, the default ``bench:`` that ``ledger init`` writes) or ``aiperf:``
(AIPerf driving the bundled engine, :mod:`ledger.evidence.aiperf_bench`).  Any other
command (a script that starts SGLang or vLLM with the side's ``{env_file}`` and runs
``sglang.bench_serving`` / ``vllm bench serve`` / AIPerf against it) measures whatever it
starts: the ledger cannot tell, and trusts it.

The knob's engine: the target's engine (``engine:`` in ledger.yaml, or the release its
file names, :func:`ledger.commands.catalog.engine_of`) when it is SGLang or vLLM; else
the engine whose catalog declares the knob's name (``SGLANG_*`` in SGLang's, ``VLLM_*`` in
vLLM's); a knob the bundled engine declares is the bundled engine's.

A bundled-engine bench on a knob of another engine measures an engine that never reads
it: A and B run the same code, the outputs are identical, the verdict ``neutral`` (or
noise), and it replaces real evidence in the headline.  ``ledger ab`` refuses that unless
``--allow-other-engine`` (say, to check the bench itself).
"""

from __future__ import annotations

import re
import shlex

BUNDLED = "bundled"
_BUNDLED_BENCH_RE = re.compile(r"(^|\s)-m\s+engine\s+bench(\s|$)")

SGLANG_EXAMPLE = (
    "bash bench-sglang.sh {env_file} {concurrency} {out}   # the script: set -a; . \"$1\"; "
    "start python -m sglang.launch_server …; wait for /health; python -m sglang.bench_serving "
    "--backend sglang --dataset-name random --max-concurrency \"$2\" --output-file \"$3\"; "
    "stop the server"
)
VLLM_EXAMPLE = (
    "bash bench-vllm.sh {env_file} {concurrency} {out}   # the script: set -a; . \"$1\"; "
    "start vllm serve MODEL …; wait for /health; vllm bench serve --model MODEL "
    "--dataset-name random --max-concurrency \"$2\" --save-result --result-filename \"$3\"; "
    "stop the server"
)
AIPERF_EXAMPLE = (
    "or the client AIPerf: aiperf profile --url http://HOST:PORT --concurrency \"$2\" … in "
    "that script, its profile_export_aiperf.json copied to \"$3\""
)


def bench_engine(command: str) -> str | None:
    """``bundled`` when ``command`` (a ``bench:`` template, before :func:`resolve_bench`)
    measures the bundled engine; None when the ledger cannot tell which engine it runs."""
    text = command.strip()
    if text.startswith("aiperf:"):
        return BUNDLED
    try:
        words = " ".join(shlex.split(text))
    except ValueError:
        words = text
    return BUNDLED if _BUNDLED_BENCH_RE.search(words) else None


def knob_engine(knob: str, target_engine: str | None, bundled_knobs, catalogs) -> str | None:
    """The engine that reads ``knob``: ``sglang`` / ``vllm`` (from ``target_engine``, e.g.
    ``sglang==0.5.23``, or the catalog declaring it), ``bundled``, or None (unknown).

    ``bundled_knobs``: the bundled engine's knob names (a container); ``catalogs``:
    engine name -> container of the knob names its catalog declares."""
    if target_engine:
        name = target_engine.split("==")[0].strip().lower()
        if name in ("sglang", "vllm"):
            return name
    if knob in bundled_knobs:
        return BUNDLED
    for name, known in sorted(catalogs.items()):
        if knob in known:
            return name
    return None


def other_engine_reason(entry_id: str, knob: str, target: str, command: str,
                        target_engine: str | None, knob_engine_name: str | None) -> str | None:
    """Why a bundled-engine bench cannot measure ``knob`` (None when it can, or when the
    ledger cannot tell): the mismatch, and how to set ``bench:`` for the real engine."""
    if bench_engine(command) != BUNDLED or knob_engine_name in (None, BUNDLED):
        return None
    runs = f"target {target!r} runs {target_engine}" if target_engine else \
        f"{knob} is a {knob_engine_name} knob"
    example = SGLANG_EXAMPLE if knob_engine_name == "sglang" else VLLM_EXAMPLE
    return (
        f"ab {entry_id}: the bench measures the bundled engine ({command.split(' --')[0]} …), "
        f"which never reads {knob}, and {runs}: A and B would run the same code and the "
        f"verdict would say nothing of {knob}.  Set bench: in ledger.yaml (or give --bench) "
        f"to a command that starts the real engine with the side's env and benches it, e.g.\n"
        f"  bench:\n    command: {example}\n"
        f"  ({'vLLM' if knob_engine_name == 'sglang' else 'SGLang'}: "
        f"{VLLM_EXAMPLE if knob_engine_name == 'sglang' else SGLANG_EXAMPLE}; "
        f"{AIPERF_EXAMPLE})\n"
        "--allow-other-engine measures it on the bundled engine all the same"
    )


__all__ = ["BUNDLED", "bench_engine", "knob_engine", "other_engine_reason"]
