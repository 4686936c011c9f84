"""The engine's model against Hugging Face transformers on the same weights."""

from __future__ import annotations

import pytest
import torch

from engine.core.llm import LLMEngine
from engine.core.scheduler import ScheduledBatch
from engine.core.sequence import SamplingParams
from tests.engine.conftest import write_hf_checkpoint

transformers = pytest.importorskip("transformers")


def _write_checkpoint(tmp_path, arch: str):
    return write_hf_checkpoint(
        tmp_path, arch, seed=1234, std=0.08, vocab_size=300, hidden_size=64,
        intermediate_size=160, num_hidden_layers=3, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=256, rope_theta=5000.0)


@pytest.mark.parametrize("arch,backend", [("llama", "auto"), ("llama", "aten"),
                                          ("qwen2", "auto")])
def test_logits_and_greedy_match_transformers(tmp_path, knobs, arch, backend):
    hf = _write_checkpoint(tmp_path, arch)
    eng = LLMEngine(knobs.replace(dtype="float32", linear_backend=backend),
                    model_dir=str(tmp_path))
    prompt = [5, 17, 42, 99, 3, 250, 7, 64, 128, 11, 0, 299]

    seq = eng.make_sequence(prompt, SamplingParams(1))
    eng.blocks.grow(seq.block_table, len(prompt))
    ids, pos, ctx = eng.runner._prepare_prefill(ScheduledBatch(True, [seq], [len(prompt)]))
    with torch.inference_mode():
        ours = eng.model(ids, pos, ctx)  # [T, vocab]
        theirs = hf(torch.tensor([prompt])).logits[0].float()
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() < 1e-4
    eng.blocks.free(seq.block_table)

    with torch.inference_mode():
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False,
                          min_new_tokens=32)[0, len(prompt):].tolist()
    out = eng.generate([prompt], SamplingParams(32, ignore_eos=True))[0].output_ids
    assert out == ref
