"""The engine's environment knobs, declared through :mod:`envknobs.registry`.

This module must stay cheap to import (no torch): the ledger's knob catalog imports
``engine.knobs.REGISTRY`` to validate values an operator writes into serve scripts.
Knobs are read once, at start-up, by :func:`load_knobs`; the engine never re-reads the
environment afterwards, so a value in effect is the value a bench JSON reports.

Releases.  The engine has versions like any serving engine, and a release may move a
knob's default underneath a deployment that never set it.  ``REGISTRY`` declares each
knob with its default in the first release; ``RELEASES`` lists, per later release, the
defaults it moved.  A deployment selects its release the way operators pin an engine, as a
pip requirement on the launch line (``python -m engine serve --release
knob-ledger-engine==1.1.0``, ``engine/scripts/``): an upgrade is a bump of that pin, and
the engine starts with that release's defaults (a release it does not carry is refused,
naming those it does).  With no pin it runs as ``RELEASE``, the release this tree
installs as.  The tree carries its newer releases too, so the demo and the tests upgrade
it with no network.  Both tables stay literal: the ledger reads them with ``ast``
(envknobs.catalogs.bundled_engine), from this tree or an engine checkout at any commit.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

from envknobs.registry import KnobError
from envknobs.registry import Registry

REGISTRY = Registry()

REGISTRY.declare(
    "ENGINE_DTYPE", "str", "auto",
    doc="Weight/activation dtype: auto = the checkpoint's torch_dtype (float32 for presets).",
    class_hint="perf", choices=("auto", "float32", "bfloat16"),
)
REGISTRY.declare(
    "ENGINE_DEVICE", "str", "auto",
    doc="Where the model runs: auto = cuda when torch sees a GPU, else cpu.",
    choices=("auto", "cpu", "cuda"),
)
REGISTRY.declare(
    "ENGINE_LINEAR_BACKEND", "str", "auto",
    doc="GEMM path of the projections: onednn = weights prepacked once for oneDNN (up to "
        "2x faster at decode batch sizes; fp32 results differ from aten in the last bits); "
        "aten = plain F.linear; kernels = onednn, and for bf16 batches of up to 64 rows the "
        "fused CPU kernels' GEMM where ENGINE_CPU_KERNELS put them in use; auto = kernels, "
        "but on a CPU with AMX the kernels' GEMM only up to 3 rows (oneDNN's AMX tiles are "
        "faster from there).",
    class_hint="perf", choices=("auto", "aten", "onednn", "kernels"),
)
REGISTRY.declare(
    "ENGINE_CPU_KERNELS", "str", "auto",
    doc="Fused CPU kernels (AVX-512, AVX2 or portable C++: ENGINE_CPU_ISA) around the CPU model's GEMMs (decode attention, RMSNorm + "
        "residual, RoPE, SwiGLU; engine/model/kernels), compiled once per machine (~12 s, cached): "
        "auto = when the model's shapes, the "
        "CPU, a C++ compiler and ninja allow, else eager torch; on = required (an error "
        "where they cannot run); off = eager torch.",
    class_hint="perf", choices=("auto", "on", "off"),
)
REGISTRY.declare(
    "ENGINE_CPU_ISA", "str", "auto",
    doc="CPU code path of the kernels and GEMMs: auto = the fastest this CPU and torch build "
        "run (amx, avx512, avx2, portable; engine/cpu_isa.py); an explicit ISA makes the "
        "engine behave as on a CPU with only that (refused where this CPU cannot run it).",
    class_hint="perf", choices=("auto", "amx", "avx512", "avx2", "portable"),
)
REGISTRY.declare(
    "ENGINE_DECODE_TARGET_CTAS", "int", 0,
    doc="Target number of parallel work items (sequences x kv heads x KV splits) in decode "
        "attention; the split-K partition count is derived from it. 0 = auto: 16 on a GPU, "
        "the thread count on CPU (a core is a CPU's parallel unit: measured on 2 cores, "
        "16 split short contexts at c1 and cost ~30%; benchmarks/ctas_sweep.py).",
    class_hint="perf", min=0, max=65536, unit="work items",
)
REGISTRY.declare(
    "ENGINE_MAX_RUNNING_REQUESTS", "int", 64,
    doc="Most sequences decoded together in one batch.",
    class_hint="perf", min=1, max=4096, unit="requests",
)
REGISTRY.declare(
    "ENGINE_PAGE_SIZE", "int", 16,
    doc="Tokens per KV cache page.", class_hint="perf", min=1, max=1024, unit="tokens",
)
REGISTRY.declare(
    "ENGINE_NUM_PAGES", "int", 2048,
    doc="KV cache pages per worker (the cache holds NUM_PAGES x PAGE_SIZE tokens).",
    class_hint="perf", min=2, max=1 << 22, unit="pages",
)
REGISTRY.declare(
    "ENGINE_PREFILL_CHUNK_TOKENS", "int", 512,
    doc="Most prompt tokens prefilled in one step (chunked prefill).",
    class_hint="perf", min=1, max=1 << 20, unit="tokens",
)
REGISTRY.declare(
    "ENGINE_NUM_THREADS", "int", 0,
    doc="torch intra-op threads; 0 = one per core not kept busy by other work at start-up "
        "(a 0.3 s look at /proc/stat): a thread on a shared core stalls every op.",
    class_hint="perf", min=0, max=1024, unit="threads",
)
REGISTRY.declare(
    "ENGINE_INFLIGHT_TIMEOUT_S", "float", 30.0,
    doc="A KV transfer (bootstrap to pages landed) not finished within this many seconds is "
        "aborted: pages freed on both sides, the request answered with an error.",
    class_hint="bugfix", min=0.05, max=86400.0, unit="s", tags=("liveness",),
)
REGISTRY.declare(
    "ENGINE_TRANSFER_DROP_PROB", "float", 0.0,
    doc="Probability that the prefill side drops a KV transfer on purpose (fault injection).",
    class_hint="bugfix", min=0.0, max=1.0, tags=("test",),
)
REGISTRY.declare(
    "ENGINE_SEED", "int", 0,
    doc="Seed of the random preset weights and of sampling.", min=0, max=2**31 - 1,
)


PACKAGE = "knob-ledger-engine"
RELEASE = "1.0.0"

# Release -> the knob defaults it moved (knob -> new default), oldest release first.
RELEASES: dict[str, dict[str, Any]] = {
    "1.0.0": {},
    # 1.1.0 "lower tail latency under memory pressure": fewer sequences per decode batch
    # (every step of a busy server then decodes 4 instead of up to 64: at c32 on CPU,
    # output tok/s falls to a quarter to a half), and KV transfers given up on sooner.
    "1.1.0": {"ENGINE_MAX_RUNNING_REQUESTS": 4, "ENGINE_INFLIGHT_TIMEOUT_S": 20.0},
}


def parse_release(text: str | None) -> str:
    """The release a pin names: ``knob-ledger-engine==1.1.0`` or ``1.1.0`` (None or empty:
    :data:`RELEASE`).  KnobError for a release this engine does not carry, naming those
    it does."""
    if text is None or text == "":
        return RELEASE
    name, sep, version = text.partition("==")
    if not sep:
        name, version = PACKAGE, text
    if name.strip() != PACKAGE or version.strip() not in RELEASES:
        raise KnobError(f"engine release {text!r}: this engine carries "
                        f"{', '.join(f'{PACKAGE}=={v}' for v in RELEASES)}")
    return version.strip()


def release_defaults(release: str = RELEASE) -> dict[str, Any]:
    """Every knob's default in ``release``: the first release's, then each later move."""
    out = {knob.name: knob.default for knob in REGISTRY}
    for version, moved in RELEASES.items():
        out.update(moved)
        if version == release:
            return out
    raise KnobError(f"engine release {release!r}: this engine carries {', '.join(RELEASES)}")


@dataclass(frozen=True)
class EngineKnobs:
    """The knob values in effect for one engine process (read once at start-up)."""

    dtype: str = "auto"
    device: str = "auto"
    linear_backend: str = "auto"
    cpu_kernels: str = "auto"
    cpu_isa: str = "auto"
    decode_target_ctas: int = 0
    max_running_requests: int = 64
    page_size: int = 16
    num_pages: int = 2048
    prefill_chunk_tokens: int = 512
    num_threads: int = 0
    inflight_timeout_s: float = 30.0
    transfer_drop_prob: float = 0.0
    seed: int = 0
    release: str = RELEASE  # the engine release whose defaults the unset knobs took

    def as_env(self) -> dict[str, Any]:
        """Values keyed by knob name (what a bench JSON reports under ``knobs``)."""
        return {_env_name(f.name): getattr(self, f.name) for f in _knob_fields()}

    def replace(self, **changes: Any) -> EngineKnobs:
        return dataclasses.replace(self, **changes)


def _env_name(field_name: str) -> str:
    return "ENGINE_" + field_name.upper()


def _knob_fields() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(EngineKnobs) if f.name != "release"]


def load_knobs(environ: Mapping[str, str] | None = None, release: str | None = None
               ) -> EngineKnobs:
    """Read every engine knob from ``environ`` (default ``os.environ``); a knob unset
    there takes its default in engine ``release`` (a pin, :func:`parse_release`).

    Raises :class:`envknobs.registry.KnobError` naming the knob and the bad value.
    """
    env = os.environ if environ is None else environ
    version = parse_release(release)
    defaults = release_defaults(version)
    values = {}
    for f in _knob_fields():
        knob = REGISTRY[_env_name(f.name)]
        values[f.name] = dataclasses.replace(knob, default=defaults[knob.name]).read(env)
    return EngineKnobs(**values, release=version)


__all__ = ["PACKAGE", "REGISTRY", "RELEASE", "RELEASES", "EngineKnobs", "KnobError",
           "load_knobs", "parse_release", "release_defaults"]
