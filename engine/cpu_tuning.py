"""Process-level CPU settings that the decode loop's speed depends on.

glibc serves every allocation above its mmap threshold (128 KiB at start, raised only
when such a block is freed) with a fresh ``mmap``, and returns heap tops above the trim
threshold to the kernel.  A decode step allocates many short-lived tensors of a few
hundred KiB to a few MiB (MLP activations, logits), so each step paid a page fault per
4 KiB page of them: measured on this 2-core VM, the bf16 ``logits.float()`` of a
[16, 32000] batch took 0.55 ms in the engine against 0.08 ms with the thresholds raised.
Raising both thresholds keeps those pages mapped and reused across steps (what the
jemalloc/tcmalloc preloads recommended for CPU inference achieve).  It must run before
the model is built (set afterwards it measured no gain).  The cost is memory the process
does not give back, bounded by its own peak: fine for an inference server.

The intra-op thread count is chosen here too (:func:`choose_num_threads`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time

# mallopt parameter numbers from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Measured (bf16 small preset, c=32): with 32 MiB / 256 MiB the logits cast still took
# 5-6 ms a step, with these 0.14 ms.  mallopt refuses what it cannot honour (returns 0).
MMAP_THRESHOLD = 256 << 20
TRIM_THRESHOLD = 1 << 30

_done = False


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where not glibc."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt: nothing to do
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error.
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done


PROBE_SECONDS = 0.3


def _cpu_times() -> dict[int, tuple[int, int]]:
    """Per-CPU (busy, total) jiffies from /proc/stat; empty where there is none."""
    times: dict[int, tuple[int, int]] = {}
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.readlines()
    except OSError:
        return times
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        fields = [int(x) for x in rest.split()]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        total = sum(fields[:8])  # user..steal; guest time is already counted in user
        times[int(name[3:])] = (total - idle, total)
    return times


def free_cores(window_s: float = PROBE_SECONDS) -> int:
    """How many of the CPUs this process may use other work left free over ``window_s``.

    The busy fractions of the allowed CPUs are summed (a busy process that migrates
    between cores shows as two half-busy ones) and taken off their count, rounded to
    the nearest core.  Without /proc/stat (not Linux) every allowed CPU counts as free.
    """
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else list(range(os.cpu_count() or 1))
    before = _cpu_times()
    if not before:
        return len(allowed)
    time.sleep(window_s)
    after = _cpu_times()
    busy = 0.0
    for cpu in allowed:
        if cpu in before and cpu in after:
            total = after[cpu][1] - before[cpu][1]
            if total > 0:
                busy += (after[cpu][0] - before[cpu][0]) / total
    return int(len(allowed) - busy + 0.5)


def choose_num_threads(requested: int) -> int:
    """``ENGINE_NUM_THREADS``: a positive value is used as is; 0 = one per free core.

    Why not always every core: torch splits each op evenly over its threads and joins
    them at the op's end, so a thread sharing its core with another busy process makes
    every op wait for that core's time slice.  Measured on this 2-core VM (bf16, 30M
    Llama, c16), with a spin loop pinned on one core: 2 threads 276 tok/s, 1 thread
    857 tok/s (quiet machine, 2 threads: 1120).  The probe is a 0.3 s look at /proc/stat
    at start-up (:func:`free_cores`); the choice stays for the process's life (no affinity is set, so the
    kernel keeps the one thread on whichever core is free).
    """
    if requested > 0:
        return requested
    return max(1, free_cores())
