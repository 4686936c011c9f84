"""engine.cpu_isa: which paths each CPU gets, as a pure function of its flags, torch's
probes and ENGINE_CPU_ISA; and the engine on this CPU under each override it can run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from engine.config import EngineError
from engine.core.llm import LLMEngine
from engine.cpu_isa import ALL_ROWS
from engine.cpu_isa import ISAS
from engine.cpu_isa import CpuProbe
from engine.cpu_isa import IsaError
from engine.cpu_isa import cpu_flags
from engine.cpu_isa import missing_for
from engine.cpu_isa import plan_cpu_paths
from engine.cpu_isa import probe_cpu
from engine.model.linear import Linear
from tests.engine.conftest import REPO

BASE = {"sse2", "sse4_1", "sse4_2", "avx", "f16c"}
# An AMD Zen 3 (EPYC 7003): AVX2 and FMA, no AVX-512; torch says AVX2, its oneDNN no bf16.
ZEN3 = CpuProbe(flags=frozenset(BASE | {"avx2", "fma"}), torch_capability="AVX2",
                onednn=True, onednn_bf16=False, amx=False)
# An AMD Zen 4 (this project's machines): AVX-512 with BF16, no AMX.
ZEN4 = CpuProbe(flags=frozenset(BASE | {"avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                                        "avx512dq", "avx512_bf16"}),
                torch_capability="AVX512", onednn=True, onednn_bf16=True, amx=False)
# An Intel Sapphire Rapids: AMX tiles, which torch may use.
SPR = CpuProbe(flags=ZEN4.flags | {"amx_bf16", "amx_tile"}, torch_capability="AMX",
               onednn=True, onednn_bf16=True, amx=True)
# A Graviton (aarch64): no x86 ISA at all, torch's capability DEFAULT.
GRAVITON = CpuProbe(flags=frozenset({"fp", "asimd", "sve"}), torch_capability="DEFAULT",
                    onednn=True, onednn_bf16=False, amx=False, machine="aarch64")


@pytest.mark.parametrize("probe,isa,onednn_bf16,rows", [
    (ZEN3, "avx2", False, ALL_ROWS), (ZEN4, "avx512", True, 64), (SPR, "amx", True, 3),
    (GRAVITON, "portable", False, 0)])
def test_auto_takes_the_fastest_path_each_cpu_runs(probe, isa, onednn_bf16, rows):
    paths = plan_cpu_paths(probe, "auto")
    assert (paths.isa, paths.onednn_bf16, paths.kernel_gemm_rows) == (isa, onednn_bf16, rows)
    assert paths.why == "auto"
    assert paths.onednn_fp32 == (probe.machine == "x86_64")  # no oneDNN packing on aarch64
    assert paths.vdpbf16 == (isa in ("avx512", "amx"))


def test_an_avx2_only_cpu_never_gets_avx512_or_onednn_bf16():
    """The crash of issue 45 (oneDNN bf16 packing on a Zen 3) cannot be chosen."""
    with pytest.raises(IsaError, match="ENGINE_CPU_ISA=avx512: this CPU cannot run it: the "
                                       "CPU lacks avx512f, avx512bw, avx512vl, avx512dq"):
        plan_cpu_paths(ZEN3, "avx512")
    with pytest.raises(IsaError, match="lacks amx_bf16, amx_tile"):
        plan_cpu_paths(ZEN4, "amx")
    assert plan_cpu_paths(ZEN3, "portable").isa == "portable"
    with pytest.raises(IsaError, match="not x86-64"):
        plan_cpu_paths(GRAVITON, "avx2")
    with pytest.raises(IsaError, match="expected one of auto, amx, avx512, avx2, portable"):
        plan_cpu_paths(ZEN4, "sse9")


def test_an_override_behaves_as_a_cpu_with_only_that_isa():
    """ENGINE_CPU_ISA=avx2 on a Zen 4 plans what a Zen 3 gets (oneDNN bf16 off, the
    kernels' GEMM at every batch), only the reason differs."""
    for override, like in (("avx2", ZEN3), ("avx512", ZEN4)):
        paths = plan_cpu_paths(SPR, override)
        assert paths.why == f"ENGINE_CPU_ISA={override}"
        assert paths.as_report() | {"cpu_isa_why": "auto"} == \
            plan_cpu_paths(like, "auto").as_report()


def test_torchs_capability_caps_the_flags():
    """ATEN_CPU_CAPABILITY=default (torch says DEFAULT) on an AVX2 CPU: portable; and an
    AVX2 CPU with AVX-NE-CONVERT keeps oneDNN's bf16 where torch's probe says it runs."""
    capped = CpuProbe(ZEN3.flags, "DEFAULT", True, False, False)
    assert plan_cpu_paths(capped).isa == "portable"
    assert "capability is DEFAULT" in missing_for("avx2", capped)
    arrow_lake = CpuProbe(ZEN3.flags | {"avx_ne_convert"}, "AVX2", True, True, False)
    paths = plan_cpu_paths(arrow_lake)
    assert (paths.isa, paths.onednn_bf16, paths.kernel_gemm_rows) == ("avx2", True, 64)
    unknown = CpuProbe(None, "AVX512", True, True, False)  # no /proc/cpuinfo: torch decides
    assert plan_cpu_paths(unknown).isa == "avx512"


X86_FLAGS = sorted({"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                    "avx512_bf16", "amx_bf16", "amx_tile", "avx_ne_convert"})


@given(flags=st.sets(st.sampled_from(X86_FLAGS)),
       capability=st.sampled_from(["DEFAULT", "AVX2", "AVX512", "AMX"]),
       onednn=st.booleans(), onednn_bf16=st.booleans(), amx=st.booleans(),
       machine=st.sampled_from(["x86_64", "aarch64"]),
       override=st.sampled_from(["auto", *ISAS]))
def test_no_plan_uses_a_path_the_cpu_cannot_run(flags, capability, onednn, onednn_bf16, amx,
                                                machine, override):
    probe = CpuProbe(frozenset(flags), capability, onednn, onednn_bf16, amx, machine)
    try:
        paths = plan_cpu_paths(probe, override)
    except IsaError as e:
        assert override != "auto" and missing_for(override, probe) is not None, e
        return
    assert missing_for(paths.isa, probe) is None
    assert not paths.onednn_bf16 or (onednn and onednn_bf16)
    assert not paths.onednn_fp32 or onednn
    assert not paths.vdpbf16 or "avx512_bf16" in flags
    # without oneDNN bf16 to take the large batches, the kernels' GEMM takes them all
    # (portable: torch's F.linear takes them all)
    assert paths.onednn_bf16 or paths.kernel_gemm_rows == (
        0 if paths.isa == "portable" else ALL_ROWS)


def test_this_machines_probe_is_torchs_answer():
    probe = probe_cpu()
    assert probe.torch_capability == torch.backends.cpu.get_cpu_capability()
    assert probe.onednn_bf16 == (probe.onednn and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert probe.flags == cpu_flags()
    assert missing_for(plan_cpu_paths(probe).isa, probe) is None


def _isa_params():
    return [pytest.param(isa, marks=pytest.mark.skipif(
        missing_for(isa, probe_cpu()) is not None,
        reason=f"this CPU cannot run {isa}: {missing_for(isa, probe_cpu())}"))
        for isa in ("avx512", "avx2", "portable")]


@pytest.mark.parametrize("isa", _isa_params())
def test_bf16_engine_packs_for_onednn_only_where_oneDNN_runs_bf16(knobs, isa):
    """The tiny preset (no kernels) in bf16: under an ISA without oneDNN bf16 no weight is
    packed for it (the crash was in that packing); the greedy tokens equal the plain
    F.linear path's, the logits too."""
    eng = LLMEngine(knobs.replace(dtype="bfloat16", cpu_isa=isa), preset="tiny")
    linears = [m for m in eng.model.modules() if isinstance(m, Linear)]
    packs = plan_cpu_paths(probe_cpu(), isa).onednn_bf16
    assert all((m.packed is not None) == packs for m in linears)
    assert eng.model.cpu_paths["cpu_isa"] == isa
    assert eng.model.cpu_paths["gemm"] == ("onednn" if packs else "aten")
    aten = LLMEngine(knobs.replace(dtype="bfloat16", linear_backend="aten"), preset="tiny")
    prompts = [[1, 2, 3, 4], [9, 8, 7]]
    from engine.core.sequence import SamplingParams

    params = SamplingParams(8, ignore_eos=True)
    assert [s.output_ids for s in eng.generate(prompts, params)] == \
        [s.output_ids for s in aten.generate(prompts, params)]


def test_an_isa_this_cpu_cannot_run_is_refused_by_name(knobs):
    lacking = next((isa for isa in ISAS if missing_for(isa, probe_cpu())), None)
    if lacking is None:
        pytest.skip("this CPU runs every ISA: none to refuse")
    with pytest.raises(EngineError, match=f"ENGINE_CPU_ISA={lacking}: this CPU cannot run it"):
        LLMEngine(knobs.replace(cpu_isa=lacking), preset="tiny")


def test_bench_json_reports_the_chosen_paths(tmp_path):
    """``engine bench`` under ENGINE_CPU_ISA=portable in bf16: the JSON says which ISA, why,
    which GEMM and which ops ran (the tiny preset: eager ops, and why)."""
    out = tmp_path / "bench.jsonl"
    subprocess.run([sys.executable, "-m", "engine", "bench", "--mode", "offline", "--preset",
                    "tiny", "--concurrency", "2", "--num-prompts", "2", "--input-len", "8",
                    "--output-len", "4", "--json", str(out)],
                   env={"ENGINE_DTYPE": "bfloat16", "ENGINE_NUM_THREADS": "1",
                        "ENGINE_CPU_ISA": "portable", "PATH": "/usr/bin:/bin"},
                   check=True, capture_output=True, cwd=str(REPO))
    row = json.loads(out.read_text().splitlines()[0])
    paths = row["cpu_paths"]
    assert (paths["cpu_isa"], paths["cpu_isa_why"]) == ("portable", "ENGINE_CPU_ISA=portable")
    assert paths["onednn_bf16"] is False and paths["gemm"] == "aten"
    assert paths["kernels"].startswith("torch (") and "head_dim 16" in paths["kernels"]
    assert row["knobs"]["ENGINE_CPU_ISA"] == "portable"
    # python -m engine capped torch too, as on a CPU with only that (engine.cpu_isa.torch_caps)
    assert paths["torch_capability"] == "DEFAULT"
