"""Greedy output is the same whatever the knobs, batch composition and CLI path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from engine.config import EngineError
from engine.core.llm import LLMEngine
from engine.core.scheduler import ScheduledBatch
from engine.core.sequence import SamplingParams
from engine.knobs import EngineKnobs
from engine.tools.bench import make_prompts
from tests.engine.conftest import error_on_rows_fed_alike
from tests.engine.conftest import step_logits

PARAMS = SamplingParams(max_new_tokens=12, ignore_eos=True)


@pytest.fixture(scope="module")
def prompts():
    return [p[: 3 + 5 * i] for i, p in enumerate(make_prompts(5, 40, 258, seed=3))]


@pytest.fixture(scope="module")
def reference(prompts):
    from engine.knobs import EngineKnobs

    eng = LLMEngine(EngineKnobs(num_pages=64), preset="tiny")
    return [eng.generate([p], PARAMS)[0].output_ids for p in prompts]


@pytest.mark.parametrize("changes", [
    {"decode_target_ctas": 1}, {"decode_target_ctas": 4096}, {"page_size": 1},
    {"page_size": 5, "prefill_chunk_tokens": 7}, {"max_running_requests": 2},
    # 16 pages of 4 tokens cannot hold all five sequences: forces preemption by recompute.
    {"num_pages": 16, "page_size": 4},
])
def test_greedy_output_is_independent_of_knobs_and_batching(knobs, prompts, reference, changes):
    eng = LLMEngine(knobs.replace(**changes), preset="tiny")
    seqs = eng.generate(prompts, PARAMS)  # all five batched together
    assert [s.output_ids for s in seqs] == reference
    assert eng.blocks.num_free == eng.blocks.num_pages
    if "num_pages" in changes:
        assert sum(s.num_preemptions for s in seqs) > 0


def test_bfloat16_bench_runs_and_really_computes_in_bfloat16(tmp_path):
    outs = {}
    for dtype in ("float32", "bfloat16"):
        out = tmp_path / f"{dtype}.jsonl"
        subprocess.run([sys.executable, "-m", "engine", "bench", "--mode", "offline",
                        "--preset", "tiny", "--concurrency", "1,4", "--num-prompts", "4",
                        "--input-len", "8", "--output-len", "24", "--json", str(out)],
                       env={"ENGINE_DTYPE": dtype, "ENGINE_NUM_THREADS": "1",
                            "PATH": "/usr/bin:/bin"}, check=True, capture_output=True)
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["max_concurrency"] for r in rows] == [1, 4]
        for key in ("completed", "duration", "request_throughput", "input_throughput",
                    "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
                    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
                    "p99_itl_ms", "mean_e2e_latency_ms"):
            assert isinstance(rows[0][key], (int, float)), key
        assert rows[0]["knobs"]["ENGINE_DTYPE"] == dtype and rows[0]["dtype"] == dtype
        assert all(r["device"] == "cpu" for r in rows)  # ENGINE_DEVICE unset, no GPU in env
        # the tiny preset's head_dim 16 keeps the eager ops, and the result says why
        assert rows[0]["ops"].startswith("torch (") and "head_dim 16" in rows[0]["ops"]
        assert rows[0]["output_digest"] == rows[1]["output_digest"]  # batching-invariant
        assert rows[0]["total_output_tokens"] == 4 * 24
        # One sequence's decode speed, what the demo's perf A/B judges: 1000 / median TPOT.
        for r in rows:
            assert r["decode_throughput"] == pytest.approx(1e3 / r["median_tpot_ms"])
            # Its fastest step (what the demo's A/B judges on a shared machine): no slower
            # than the median token interval, which holds a whole step and more.
            assert r["peak_decode_throughput"] == pytest.approx(1e3 / r["min_decode_step_ms"])
            assert r["peak_decode_throughput"] >= r["decode_throughput"]
        outs[dtype] = rows[0]["output_digest"]
    # Whether bf16 rounding flips a greedy token of this tiny model is chance (its top-2
    # logit gaps go down to 1e-5), so the dtype's effect is checked on the logits: really
    # computed in bf16 (they differ) and still close to the fp32 ones.
    logits = {}
    prompt = list(range(3, 40))
    for dtype in ("float32", "bfloat16"):
        eng = LLMEngine(EngineKnobs(dtype=dtype, num_threads=1, num_pages=64), preset="tiny")
        seq = eng.make_sequence(prompt, SamplingParams(1))
        eng.blocks.grow(seq.block_table, len(prompt))
        batch = ScheduledBatch(True, [seq], [len(prompt)])
        with torch.inference_mode():
            logits[dtype] = eng.model(*eng.runner._prepare_prefill(batch))  # [T, vocab]
    diff = (logits["float32"] - logits["bfloat16"]).abs().max().item()
    assert 0 < diff < 0.05 * logits["float32"].abs().max().item()


def test_cli_generate_prints_greedy_ids(knobs, tmp_path):
    r = subprocess.run([sys.executable, "-m", "engine", "generate", "--preset", "tiny",
                        "--prompt-ids", "1,2,3", "--max-new-tokens", "5", "--ignore-eos",
                        "--json"], capture_output=True, text=True, check=True,
                       env={"PATH": "/usr/bin:/bin", "ENGINE_NUM_THREADS": "1"})
    ids = json.loads(r.stdout)["output_ids"]
    eng = LLMEngine(knobs, preset="tiny")
    assert ids == eng.generate([[1, 2, 3]], SamplingParams(5, ignore_eos=True))[0].output_ids


def test_onednn_prepacked_linears_match_aten(knobs, prompts):
    import torch

    from engine.cpu_isa import probe_cpu

    outs = {}
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    # oneDNN's bf16 runs where torch's probe says so (AVX-512 BW/VL/DQ or AVX-NE-CONVERT);
    # elsewhere (an AVX2-only Zen 3) ENGINE_LINEAR_BACKEND=onednn is refused in bf16.
    bf16_runs = probe_cpu().onednn_bf16
    if bf16_runs:
        for backend in ("aten", "onednn"):
            eng = LLMEngine(knobs.replace(dtype="bfloat16", linear_backend=backend),
                            preset="tiny")
            assert (eng.model.lm_head.packed is not None) == (backend == "onednn")
            outs[backend] = [s.output_ids for s in eng.generate(prompts, PARAMS)]
            with torch.inference_mode():
                outs[backend + "_logits"] = eng.model.lm_head(x)  # tiny: hidden size 64
        assert outs["aten"] == outs["onednn"]  # bf16: the packed kernel is bit-identical here
        assert torch.equal(outs["aten_logits"], outs["onednn_logits"])
    else:
        with pytest.raises(EngineError, match="oneDNN cannot run torch.bfloat16"):
            LLMEngine(knobs.replace(dtype="bfloat16", linear_backend="onednn"), preset="tiny")
    for dtype in ("float32", "bfloat16"):  # auto packs both where oneDNN runs them
        auto = LLMEngine(knobs.replace(dtype=dtype), preset="tiny")
        assert (auto.model.lm_head.packed is not None) == (dtype == "float32" or bf16_runs)
    fp32 = {b: LLMEngine(knobs.replace(linear_backend=b), preset="tiny") for b in
            ("aten", "onednn")}
    with torch.inference_mode():
        xf = x.float()
        diff = (fp32["aten"].model.lm_head(xf) - fp32["onednn"].model.lm_head(xf)).abs().max()
    assert diff.item() < 1e-5


@pytest.mark.parametrize("changes", [{}, {"max_running_requests": 2},
                                     {"page_size": 5, "prefill_chunk_tokens": 7}])
def test_dense_decode_blocks_give_the_tokens_of_the_gather_path(knobs, prompts, changes):
    """engine.core.dense_kv: append-a-token blocks against a full gather every step."""
    long = PARAMS.__class__(max_new_tokens=40, ignore_eos=True)  # past the block headroom
    outs = {}
    for dense in (False, True):
        eng = LLMEngine(knobs.replace(decode_target_ctas=1, **changes), preset="tiny")
        eng.runner.dense.enabled = dense
        outs[dense] = [s.output_ids for s in eng.generate(prompts, long)]
        assert eng.blocks.num_free == eng.blocks.num_pages
        assert (eng.runner.dense.appended > 0) == dense
    assert outs[True] == outs[False]


def test_dense_decode_in_bfloat16_is_as_close_to_float32_as_the_gather_path(knobs, prompts):
    """bf16 rounds the two paths differently (the own token is a separate product), so
    their greedy tokens may part where the tiny model's top-2 gap is below bf16's error
    (gaps go down to 3e-4 here); what must hold is that neither is further from the fp32
    logits than bf16 allows.  Compared on the first decode steps, where both are still fed
    the fp32 run's tokens."""
    logits = {}
    for dtype, dense in (("float32", True), ("bfloat16", False), ("bfloat16", True)):
        eng = LLMEngine(knobs.replace(dtype=dtype, decode_target_ctas=1), preset="tiny")
        eng.runner.dense.enabled = dense
        logits[dtype, dense] = step_logits(eng, prompts, 3)
    ref = logits["float32", True]
    scale = max(x.abs().max().item() for x in ref[0])
    for dense in (False, True):
        error = error_on_rows_fed_alike(logits["bfloat16", dense], ref)
        assert 0 < error < 0.05 * scale, (dense, error)


def test_the_step_clock_times_decode_steps_only_and_gives_the_hook_back():
    from engine.tools.bench import bench_offline

    eng = LLMEngine(EngineKnobs(num_threads=1, num_pages=64), preset="tiny")
    def hook(batch, seconds):  # someone else's (benchmarks/roofline.py sets one)
        pass

    eng.on_step = hook
    rows = bench_offline(eng, [1], [list(range(3, 40))], 12, progress=lambda _: None)
    assert eng.on_step is hook
    # The fastest decode step is at most the median interval between tokens (each holds a
    # whole step), and the prefill step (longer than any) is not among them.
    assert rows[0]["min_decode_step_ms"] <= rows[0]["median_itl_ms"]
    assert rows[0]["peak_decode_throughput"] == pytest.approx(1e3 / rows[0]["min_decode_step_ms"])
