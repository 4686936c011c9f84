"""A tiny Llama checkpoint with a real Hugging Face tokenizer, for driving the engine with
clients that count tokens themselves (AIPerf loads the tokenizer with transformers).

``make_checkpoint(DIR)`` writes ``config.json`` + ``model.safetensors`` (random weights,
``transformers.LlamaForCausalLM.save_pretrained``) and ``tokenizer.json`` +
``tokenizer_config.json`` (a byte-level BPE trained here with ``tokenizers`` and saved
with ``PreTrainedTokenizerFast``): ``python -m engine serve --model DIR`` serves it, and
``aiperf profile --tokenizer DIR`` tokenizes with it, no network needed.

Run as a script: ``python tests/evidence/engine_checkpoint.py DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

VOCAB = 512
CORPUS = [
    "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun",
    "serving engines batch requests, page the kv cache and split decode attention",
    "a change ledger records every knob and patch so that a revert is always safe",
    "prefill and decode workers exchange kv blocks through a bootstrap room id",
] * 50


def make_checkpoint(directory: Path) -> Path:
    """Write the checkpoint and tokenizer into ``directory``; return it."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    from tokenizers import decoders
    from tokenizers import models
    from tokenizers import pre_tokenizers
    from tokenizers import trainers

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok,
                                                eos_token="<|endoftext|>")
    fast.save_pretrained(directory)
    torch.manual_seed(1234)
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
        rope_theta=5000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
        eos_token_id=None, bos_token_id=None, pad_token_id=None)
    transformers.LlamaForCausalLM(cfg).float().save_pretrained(directory,
                                                               safe_serialization=True)
    return directory


if __name__ == "__main__":
    print(make_checkpoint(Path(sys.argv[1])))
