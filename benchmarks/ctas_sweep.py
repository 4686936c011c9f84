"""Decode throughput vs concurrency for several ``ENGINE_DECODE_TARGET_CTAS`` values.

    python benchmarks/ctas_sweep.py [--model DIR | --preset small] [--dtype float32]
                                    [--context 1536] [--concurrency 1,2,4,8]
                                    [--ctas 0,1,4,16,64] [--steps 20] [--repeats 3]
                                    [--kv-heads 4]

Long contexts at low batch are where split-K could pay: one sequence's attention is the
only work there.  Each cell times ``--steps`` decode steps of ``c`` sequences at
``--context`` tokens of context (the KV pages hold random values: the speed of a step
does not depend on them), the CTAS values interleaved within each repeat; the median of
``--repeats`` is printed with its change against the first CTAS value (the baseline,
default 0 = auto) and the split count each value chose, then a line per value like the
seed's ``+12.8% @c64`` (marked ``same split`` where a value chose the baseline's split
count: the same code ran, so that difference is the machine's noise).  Not a timed test:
run it by hand.

Measured on this 2-core VM (2 threads), with the fused CPU kernels (engine.model.kernels:
split-K runs inside the dense decode kernel, over the same blocks): the 30M Llama (4 KV
heads) at 1536 tokens, every CTAS value within the machine's noise of the default (c1
CTAS=16 +6.5%, CTAS=64 +9.4%; cells with the default's own split count moved up to 21%);
MQA (``--kv-heads 1``) at 2048 tokens, c1: no split 140.9, 2 splits (the default) 140.8,
4 splits 152.9 tok/s.  Before the kernels, split-K took the gather path and every split
cell was 28-60% slower.  On 2 cores a 30M model's decode at c1 is bound by streaming its
weights; attention over 2k tokens is too small a share for partitioning it to show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import write_unseen_llama  # noqa: E402

from engine.core.llm import LLMEngine  # noqa: E402
from engine.core.scheduler import ScheduledBatch  # noqa: E402
from engine.core.sequence import SamplingParams  # noqa: E402
from engine.knobs import EngineKnobs  # noqa: E402


def decode_batch(eng: LLMEngine, c: int, context: int) -> ScheduledBatch:
    """``c`` sequences with ``context`` tokens each, their pages allocated (never freed)."""
    seqs = []
    for i in range(c):
        seq = eng.make_sequence([(i + j) % 200 for j in range(context - 1)],
                                SamplingParams(8, ignore_eos=True))
        seq.output_ids.append(1)
        eng.blocks.grow(seq.block_table, seq.num_tokens)
        seq.num_computed = seq.num_tokens - 1
        seqs.append(seq)
    return ScheduledBatch(False, seqs, [1] * c)


def step_tok_s(eng: LLMEngine, batch: ScheduledBatch, ctas: int, steps: int) -> float:
    """Decode tok/s of ``steps`` steps, each sequence a token longer after each (as in real
    decoding: the unsplit path appends to its dense blocks, see engine.core.dense_kv);
    the batch is put back to its context afterwards."""
    eng.runner.knobs = eng.knobs.replace(decode_target_ctas=ctas)
    eng.runner.run(batch)  # warm-up (gather workspace sized, dense blocks gathered)
    advance(eng, batch)
    t = time.perf_counter()
    for _ in range(steps):
        eng.runner.run(batch)
        advance(eng, batch)
    tok_s = len(batch.seqs) * steps / (time.perf_counter() - t)
    for seq in batch.seqs:
        del seq.output_ids[1:]
        seq.num_computed = seq.num_tokens - 1
    return tok_s


def advance(eng: LLMEngine, batch: ScheduledBatch) -> None:
    """One more token for each sequence (its KV slot allocated), as a decode step ends."""
    for seq in batch.seqs:
        seq.output_ids.append(1)
        seq.num_computed += 1
        eng.blocks.grow(seq.block_table, seq.num_tokens)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--kv-heads", type=int, default=4,
                    help="KV heads of the generated checkpoint (1 = MQA: one sequence is "
                         "one work item of unsplit attention)")
    ap.add_argument("--preset")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--context", type=int, default=1536)
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--ctas", default="0,1,4,16,64", help="first = baseline; 0 = auto")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    concs = [int(x) for x in args.concurrency.split(",")]
    ctas = [int(x) for x in args.ctas.split(",")]
    with tempfile.TemporaryDirectory(prefix="unseen-llama-") as tmp:
        if not args.model and not args.preset:
            args.model = str(write_unseen_llama(Path(tmp), args.kv_heads))
        pages = (max(concs) * (args.context + args.steps + 32)) // 16 + 8
        knobs = EngineKnobs(dtype=args.dtype, num_pages=pages, num_threads=args.threads)
        eng = LLMEngine(knobs, preset=args.preset, model_dir=args.model)
        print(f"{args.model or args.preset}, {args.dtype}, {eng.num_threads} threads, context "
              f"{args.context}, {args.steps} steps x {args.repeats} repeats; decode tok/s "
              f"(splits); load average {os.getloadavg()[0]:.2f}")
        print(f"{'conc':>5} " + " ".join(f"{'CTAS=' + str(t):>16}" for t in ctas) + "   load1")
        gains: dict[int, list[str]] = {t: [] for t in ctas[1:]}
        for c in concs:
            batch = decode_batch(eng, c, args.context)
            runs: dict[int, list[float]] = {t: [] for t in ctas}
            splits: dict[int, int] = {}
            for _ in range(args.repeats):
                for t in ctas:
                    runs[t].append(step_tok_s(eng, batch, t, args.steps))
                    splits[t] = eng.runner.last_num_splits
            med = {t: statistics.median(v) for t, v in runs.items()}
            base = med[ctas[0]]
            cells = []
            for t in ctas:
                pct = "" if t == ctas[0] else f" {100 * (med[t] / base - 1):+.1f}%"
                cells.append(f"{med[t]:.1f}({splits[t]}){pct}")
                if t != ctas[0]:
                    # The same split count runs the same code: its difference is noise.
                    same = " (same split)" if splits[t] == splits[ctas[0]] else ""
                    gains[t].append(f"{100 * (med[t] / base - 1):+.1f}% @c{c}{same}")
            print(f"{c:>5} " + " ".join(f"{x:>16}" for x in cells)
                  + f"   {os.getloadavg()[0]:.2f}", flush=True)
            for seq in batch.seqs:
                eng.blocks.free(seq.block_table)
        for t, line in gains.items():
            print(f"CTAS={t} vs CTAS={ctas[0]}: " + ", ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
