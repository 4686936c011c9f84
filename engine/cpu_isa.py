"""Which CPU code paths this machine and this torch build can run, decided once.

Two things decide them, both read here and nowhere else:

- the CPU's flags (``/proc/cpuinfo``; absent elsewhere, then torch's answer stands alone);
- torch's own probes: ``torch.backends.cpu.get_cpu_capability()`` (the vector ISA its own
  kernels dispatch to, ``ATEN_CPU_CAPABILITY`` included), ``torch.backends.mkldnn.
  is_available()``, ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` (whether its oneDNN
  runs bfloat16: AVX-512 BW/VL/DQ or AVX-NE-CONVERT; without it prepacking a bf16 weight
  raises "mkldnn_reorder_linear_weight: bf16 path needs the cpu support ...") and its AMX
  tile check.

:func:`plan_cpu_paths` is the pure decision from those (a :class:`CpuProbe`) and the
``ENGINE_CPU_ISA`` override: tests feed it any CPU (an AVX2-only Zen 3, an aarch64, an
AMX Xeon) without touching this one.  :func:`probe_cpu` is the only impure part.

The path table (the kernels' variant, the GEMMs of the projections):

==========  ==========================================  ===============================
ISA         runs where                                  GEMMs (auto)
==========  ==========================================  ===============================
amx         avx512 + amx_bf16/amx_tile + torch's AMX    bf16: kernels' GEMM up to 3 rows,
            tile check                                  oneDNN (AMX tiles) above; fp32: oneDNN
avx512      avx512f/bw/vl/dq + torch capability         bf16: kernels' GEMM up to 64 rows
            AVX512 or AMX                               (vdpbf16ps with avx512_bf16, widened
                                                        bf16 + FMA without), oneDNN above;
                                                        fp32: oneDNN
avx2        avx2/fma/f16c + torch capability >= AVX2    bf16: kernels' GEMM at every batch
                                                        (widened bf16 + FMA), oneDNN bf16
                                                        only with avx_ne_convert; fp32: oneDNN
portable    any CPU (plain C++ loops, aarch64 too)      bf16: F.linear (the loops' GEMM
                                                        only with ENGINE_LINEAR_BACKEND=
                                                        kernels); fp32: oneDNN on x86,
                                                        else F.linear
==========  ==========================================  ===============================

``auto`` takes the first row this machine can run.  ``ENGINE_CPU_ISA=avx2`` (or another)
on a CPU that can run more makes the engine behave as on a CPU with only that: the
kernels' variant, and no oneDNN bf16 packing that such a CPU could not run, so the
AVX2 code path really runs.  Torch's own ops and oneDNN pick their vectors themselves at
start-up: ``python -m engine`` caps them too (:func:`torch_caps`); a process that loaded
torch already (the tests) caps only the engine's own paths.
An ISA the CPU cannot run is refused, naming what is missing.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

from engine.config import EngineError

ISAS = ("amx", "avx512", "avx2", "portable")  # fastest first
CHOICES = ("auto", *ISAS)
_X86 = ("x86_64", "amd64", "i386", "i686", "x86")
_AVX512 = ("avx512f", "avx512bw", "avx512vl", "avx512dq")
_CAPABILITY_RANK = {"DEFAULT": 0, "AVX2": 2, "AVX512": 3, "AMX": 4}
# The kernels' own GEMM without oneDNN bf16 to take the large batches: every batch.
ALL_ROWS = 1 << 30


class IsaError(EngineError):
    """ENGINE_CPU_ISA names a path this CPU cannot run (or no path at all)."""


@dataclass(frozen=True)
class CpuProbe:
    """What decides the paths: CPU flags (None where unknown) and torch's answers."""

    flags: frozenset[str] | None
    torch_capability: str  # torch.backends.cpu.get_cpu_capability()
    onednn: bool  # torch.backends.mkldnn.is_available()
    onednn_bf16: bool  # torch.ops.mkldnn._is_mkldnn_bf16_supported()
    amx: bool  # torch's AMX tile check (cpu_has_amx)
    machine: str = "x86_64"  # platform.machine()


@dataclass(frozen=True)
class CpuPaths:
    """The paths chosen: the kernels' variant and what the projections' GEMMs may use."""

    isa: str
    why: str  # how the ISA was chosen (auto / the override), for reports
    onednn_fp32: bool  # prepack float32 weights for oneDNN
    onednn_bf16: bool  # prepack bfloat16 weights for oneDNN
    vdpbf16: bool  # the kernels' bf16 GEMM has AVX512-BF16 dot products
    kernel_gemm_rows: int  # auto: up to this many rows a bf16 batch runs the kernels' GEMM

    def as_report(self) -> dict[str, object]:
        return {"cpu_isa": self.isa, "cpu_isa_why": self.why, "onednn_fp32": self.onednn_fp32,
                "onednn_bf16": self.onednn_bf16, "kernel_gemm_rows": self.kernel_gemm_rows}


def _has(probe: CpuProbe, *flags: str) -> bool | None:
    """Whether the CPU flags include all of ``flags``; None where the flags are unknown."""
    return None if probe.flags is None else all(f in probe.flags for f in flags)


def missing_for(isa: str, probe: CpuProbe) -> str | None:
    """Why this CPU and torch build cannot run ``isa``'s paths, or None where they can."""
    rank = _CAPABILITY_RANK.get(probe.torch_capability.upper(), 0)
    x86 = probe.machine.lower() in _X86
    if isa == "portable":
        return None
    if not x86:
        return f"a {probe.machine} CPU (not x86-64)"
    need = {"avx2": ("avx2", "fma", "f16c"), "avx512": _AVX512,
            "amx": (*_AVX512, "amx_bf16", "amx_tile")}
    need_rank = {"avx2": 2, "avx512": 3, "amx": 3}
    if isa not in need:
        raise IsaError(f"ENGINE_CPU_ISA={isa!r}: expected one of {', '.join(CHOICES)}")
    if _has(probe, *need[isa]) is False:
        lacking = [f for f in need[isa] if f not in (probe.flags or ())]
        return f"the CPU lacks {', '.join(lacking)}"
    if rank < need_rank[isa]:
        return f"torch's CPU capability is {probe.torch_capability}"
    if isa == "amx" and not probe.amx:
        return "torch's AMX check says no (or Linux denies this process the tiles)"
    return None


def plan_cpu_paths(probe: CpuProbe, override: str = "auto") -> CpuPaths:
    """The paths for ``ENGINE_CPU_ISA=override`` on the CPU ``probe`` describes (pure).

    ``auto``: the fastest ISA of :data:`ISAS` the CPU runs.  An explicit ISA the CPU
    cannot run raises :class:`IsaError` naming what is missing."""
    if override not in CHOICES:
        raise IsaError(f"ENGINE_CPU_ISA={override!r}: expected one of {', '.join(CHOICES)}")
    if override == "auto":
        isa = next(i for i in ISAS if missing_for(i, probe) is None)
        why = "auto"
    else:
        reason = missing_for(override, probe)
        if reason is not None:
            raise IsaError(f"ENGINE_CPU_ISA={override}: this CPU cannot run it: {reason}")
        isa, why = override, f"ENGINE_CPU_ISA={override}"
    x86 = probe.machine.lower() in _X86
    wide = isa in ("amx", "avx512")
    # oneDNN's bf16 needs AVX-512 BW/VL/DQ, or AVX-NE-CONVERT on an AVX2 CPU (torch's probe
    # says which; an override to avx2/portable means a CPU without AVX-512).
    ne_convert = isa == "avx2" and bool(_has(probe, "avx_ne_convert"))
    onednn_bf16 = probe.onednn and probe.onednn_bf16 and (wide or ne_convert)
    if isa == "portable":
        rows = 0  # plain loops: F.linear (torch's own GEMM) measured 15x faster at 16 rows
    elif not onednn_bf16:
        rows = ALL_ROWS  # nothing else runs bf16 as fast: the kernels' GEMM takes every batch
    elif isa == "amx":
        rows = 3  # engine.model.linear.AMX_SMALL_BATCH_ROWS: oneDNN's tiles win above
    else:
        rows = 64  # engine.model.linear.SMALL_BATCH_ROWS: oneDNN wins at prefill sizes
    return CpuPaths(isa=isa, why=why, onednn_fp32=probe.onednn and x86,
                    onednn_bf16=onednn_bf16,
                    vdpbf16=wide and bool(_has(probe, "avx512_bf16")),
                    kernel_gemm_rows=rows)


# What torch's own ops and oneDNN may use on a CPU with only that ISA: the environment
# variables torch (ATEN_CPU_CAPABILITY) and oneDNN (ONEDNN_MAX_CPU_ISA) read at start-up.
_TORCH_CAPS = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
               "portable": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}}


def torch_caps(override: str) -> dict[str, str]:
    """The environment that makes torch and oneDNN behave as on a CPU with only
    ``override`` (avx2, portable; nothing for the others): ``python -m engine`` sets what
    of it the caller did not, before torch loads, so ENGINE_CPU_ISA=avx2 there runs what a
    Zen 3 runs end to end (torch's vector ops AVX2, oneDNN without AVX-512 and without
    bf16: torch's ``_is_mkldnn_bf16_supported`` then says False).  In a process where
    torch is loaded already only the engine's own paths follow the override."""
    return dict(_TORCH_CAPS.get(override, {}))


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """The first CPU's flags (``flags`` on x86, ``Features`` on arm); None without them."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def cpu_has_amx() -> bool:
    """Whether this CPU runs oneDNN's bf16 GEMMs on AMX tiles (and Linux lets this process
    use them): torch's own check, which also asks the kernel for the tile state."""
    import torch

    init_amx = getattr(torch._C._cpu, "_init_amx", None)  # torch >= 2.3
    try:
        return bool(init_amx()) if init_amx is not None else False
    except RuntimeError:
        return False


@functools.lru_cache(maxsize=1)
def probe_cpu() -> CpuProbe:
    """This machine's :class:`CpuProbe` (asked once per process)."""
    import torch

    onednn = torch.backends.mkldnn.is_available()
    bf16_probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        onednn_bf16 = bool(bf16_probe()) if onednn and bf16_probe is not None else False
    except RuntimeError:
        onednn_bf16 = False
    return CpuProbe(flags=cpu_flags(), torch_capability=torch.backends.cpu.get_cpu_capability(),
                    onednn=onednn, onednn_bf16=onednn_bf16, amx=cpu_has_amx(),
                    machine=platform.machine())


def cpu_paths(override: str = "auto") -> CpuPaths:
    """This machine's paths under ``ENGINE_CPU_ISA=override``."""
    return plan_cpu_paths(probe_cpu(), override)
