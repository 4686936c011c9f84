"""The checkpoints the engine benchmarks run on, written fresh into a directory.

Shared by benchmarks/engine_vs_hf.py, roofline.py and ctas_sweep.py (each imports it by
its bare name, with this directory on ``sys.path``): one writer, so the three measure the
same model, and no benchmark imports another's script.
"""

from __future__ import annotations

from pathlib import Path

import torch


def write_unseen_llama(directory: Path, kv_heads: int = 4) -> Path:
    """The issue's test checkpoint: a ~30M-parameter Llama with random weights (GQA 8/4;
    ``kv_heads=1`` makes it MQA)."""
    import transformers

    torch.manual_seed(1)
    cfg = transformers.LlamaConfig(
        vocab_size=4096, hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
        num_attention_heads=8, num_key_value_heads=kv_heads, max_position_embeddings=4096,
        tie_word_embeddings=False, torch_dtype="float32")
    transformers.LlamaForCausalLM(cfg).save_pretrained(directory)
    return directory
