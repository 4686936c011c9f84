"""RMSNorm, computed in float32 like Hugging Face's LlamaRMSNorm."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """A norm's weight and eps; the model applies it through its ops (``rmsnorm``, or
    ``add_rmsnorm_`` with the residual add fused in: engine.model.kernels), whose eager
    form is :func:`rms_norm`."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x: [N, dim]; the variance in float32 keeps bf16 runs close to the reference.

    Same arithmetic as Hugging Face's LlamaRMSNorm, with the temporaries updated in place
    (a decode step runs 2 norms per layer; each saved allocation counts).
    """
    dtype = x.dtype
    xf = x.float()
    inv = xf.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()  # [N, 1]
    xf = xf.mul_(inv) if xf is not x else xf * inv  # never scale the caller's x
    return weight * xf.to(dtype)
