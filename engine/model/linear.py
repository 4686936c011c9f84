"""A Linear layer that can run on a oneDNN-prepacked weight (or the fused kernels' GEMM).

``F.linear`` hands oneDNN a plain ``[out, in]`` weight, which it re-lays-out on every call;
for decode-sized batches that reorder costs as much as the GEMM itself.  Prepacking once
at load time (what torch.compile's freezing does) measured on this 2-core AMD EPYC, one
thread, 768 -> 4096: bf16 2.4x faster at 1 row, 1.3-1.5x at 16-32 rows; fp32 2.7x at 16-32
rows.  bf16 results are bit-identical to ``F.linear``; fp32 ones differ in the last bits
(another summation order) yet stay within the 1e-4 logits bound against transformers and
batch-invariant (tests/engine); ``ENGINE_LINEAR_BACKEND=aten`` turns packing off.

Where the fused CPU kernels are in use (engine.model.kernels), bf16 batches of up to
:data:`SMALL_BATCH_ROWS` rows run their GEMM instead (AVX512-BF16 dot products, float32
accumulation): measured against oneDNN's packed GEMM on the 30M Llama's projections,
17% less time at 16 rows and 5% at 32 (36% at 1 row); oneDNN stays for prefill-sized
batches, where it is 12% faster.  A row's result there does not depend on the other rows
(one summation order for every batch of up to 64 rows).

A CPU with AMX (Intel Sapphire Rapids and later) changes the answer: torch's oneDNN runs
bf16 GEMMs on AMX tiles, whose time barely grows with the rows, while the kernels' AVX-512
dot products grow linearly.  Measured on such a 2-core Xeon over the 30M Llama's five
projection shapes (kernels / oneDNN): 1 row 131/256 us, 2 rows 180/225, 4 rows 277/224,
16 rows 1103/436, 64 rows 4159/600.  There ``auto`` keeps the kernels' GEMM for up to
:data:`AMX_SMALL_BATCH_ROWS` rows only (``ENGINE_LINEAR_BACKEND=kernels`` keeps it up to 64
rows anyway).  oneDNN's AMX path gives ``F.linear``'s bits, which are not batch-invariant
themselves (a row's bits depend on the row count), so neither is a bf16 decode there.

A CPU whose oneDNN cannot run bf16 at all (AVX2 without AVX-NE-CONVERT: AMD Zen 2/3, most
laptops; torch's ``_is_mkldnn_bf16_supported`` says so) gets no bf16 packing (packing there
raised); the kernels' GEMM (widened bf16 + FMA on AVX2) then takes every batch, else
``F.linear``.  engine.cpu_isa decides which, from the CPU and ``ENGINE_CPU_ISA``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.cpu_isa import probe_cpu

# oneDNN picks its blocking for this many rows; any row count still works.
PACK_BATCH_HINT = 32
# Up to this many rows a bf16 projection runs the fused kernels' GEMM when packed for it
# (engine.model.kernels: faster than oneDNN at decode batch sizes, slower at prefill ones).
SMALL_BATCH_ROWS = 64
# ... and on a CPU with AMX, where oneDNN's tiles are faster from 3-4 rows on (see above).
AMX_SMALL_BATCH_ROWS = 3


class Linear(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.packed: torch.Tensor | None = None
        self.vnni: torch.Tensor | None = None  # the kernels' bf16 layout, see pack_vnni
        self.vnni_bias: torch.Tensor | None = None  # the bias as the kernel adds it (fp32)
        self.vnni_rows = 0  # up to this many rows x runs the kernels' GEMM (see pack_vnni)
        self.kernel_lib = None  # the kernels' ops namespace that GEMM is in

    def pack_vnni(self, lib, max_rows: int = SMALL_BATCH_ROWS) -> bool:
        """Also pack a bf16 weight for the fused kernels' small-batch GEMM (``lib``: the
        built variant's ``torch.ops`` namespace, engine.model.kernels.FusedCpuOps.lib);
        False where its shape does not allow it (out % 16, in % 2).  A third copy of the
        weight: the price of the fastest GEMM at both batch sizes.  Batches of up to
        ``max_rows`` rows run it, larger ones oneDNN or ``F.linear`` (where oneDNN cannot
        run bf16, engine.cpu_isa gives every batch to it)."""
        out_f, in_f = self.weight.shape
        if self.weight.dtype != torch.bfloat16 or out_f % 16 or in_f % 2:
            return False
        with torch.no_grad():
            self.vnni = lib.pack_bf16_vnni(self.weight.detach())
            if self.bias is not None:
                self.vnni_bias = self.bias.detach().float().contiguous()
        self.kernel_lib = lib
        self.vnni_rows = max_rows
        return True

    def prepack(self) -> bool:
        """Pack the current weight for oneDNN (call after loading and dtype changes); False
        (nothing packed) for a bf16 weight where this CPU's oneDNN cannot run bf16 (torch's
        own probe: packing there raises "bf16 path needs the cpu support ...")."""
        if self.weight.dtype == torch.bfloat16 and not probe_cpu().onednn_bf16:
            self.packed = None
            return False
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(
                self.weight.detach(), PACK_BATCH_HINT)
        return True

    def small_batch(self, x: torch.Tensor) -> bool:
        """Whether x runs the fused kernels' GEMM (packed, bf16 rows, few enough of them)."""
        return (self.vnni is not None and x.dim() == 2 and x.shape[0] <= self.vnni_rows
                and x.dtype == torch.bfloat16 and x.stride(1) == 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.small_batch(x):
            return self.kernel_lib.linear_bf16(x, self.vnni, self.vnni_bias)
        if self.packed is not None and x.dim() == 2 and x.dtype == self.packed.dtype:
            # x: [N, in] -> [N, out]
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)
