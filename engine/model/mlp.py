"""SwiGLU feed-forward with a fused gate/up projection (one GEMM instead of two)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.linear import Linear


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.intermediate = intermediate
        self.gate_up_proj = Linear(hidden, 2 * intermediate)
        self.down_proj = Linear(intermediate, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up_proj(x)  # [N, 2I], ours: activate the gate half in place
        gate, up = gate_up.split(self.intermediate, dim=-1)
        return self.down_proj(F.silu(gate, inplace=True).mul(up))  # [N, hidden]
