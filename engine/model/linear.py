"""A Linear layer that can run on a oneDNN-prepacked weight.

``F.linear`` hands oneDNN a plain ``[out, in]`` weight, which it re-lays-out on every call;
for decode-sized batches that reorder costs as much as the GEMM itself.  Prepacking once
at load time (what torch.compile's freezing does) measured on this 2-core AMD EPYC, one
thread, 768 -> 4096: bf16 2.4x faster at 1 row, 1.3-1.5x at 16-32 rows; fp32 2.7x at 16-32
rows.  bf16 results are bit-identical to ``F.linear``; fp32 ones differ in the last bits
(another summation order) yet stay within the 1e-4 logits bound against transformers and
batch-invariant (tests/engine); ``ENGINE_LINEAR_BACKEND=aten`` turns packing off.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# oneDNN picks its blocking for this many rows; any row count still works.
PACK_BATCH_HINT = 32


class Linear(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.packed: torch.Tensor | None = None

    def prepack(self) -> None:
        """Pack the current weight for oneDNN (call after loading and dtype changes)."""
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(
                self.weight.detach(), PACK_BATCH_HINT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and x.dim() == 2 and x.dtype == self.packed.dtype:
            # x: [N, in] -> [N, out]
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)
