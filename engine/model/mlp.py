"""SwiGLU feed-forward with a fused gate/up projection (one GEMM instead of two)."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.kernels import TorchOps
from engine.model.linear import Linear


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.intermediate = intermediate
        self.gate_up_proj = Linear(hidden, 2 * intermediate)
        self.down_proj = Linear(intermediate, hidden)

    def forward(self, x: torch.Tensor, ops: TorchOps) -> torch.Tensor:
        # [N, hidden] -> [N, 2I] -> SwiGLU [N, I] -> [N, hidden]
        return self.down_proj(ops.gate_up_silu(self.gate_up_proj, x))
