"""Rotary position embedding (rotate-half form, as in Hugging Face Llama).

The cos/sin rows of a step are looked up once per forward (:meth:`tables`) and shared by
every layer; q and k are rotated together in one pass (:func:`rotate`, or the fused
kernel engine.model.kernels runs in place).
"""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, max_positions: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float()
                                    / head_dim))
        pos = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(pos, inv_freq)  # [P, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [P, D]
        sin = emb.sin()
        half = head_dim // 2
        # rotate_half(x) * sin == swap_halves(x) * [-sin_lo, sin_hi]: the sign is folded into
        # the table (exact in IEEE arithmetic), saving a negation per call.
        signed_sin = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)
        # Tables in float32 (as HF keeps them); see _tables_in for the activation dtype.
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("signed_sin", signed_sin, persistent=False)
        # (the float32 cos it was made from, cos, signed sin) in the activation dtype
        self._cast: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def tables(self, positions: torch.Tensor, dtype: torch.dtype
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, signed sin for ``positions`` [N] -> two [N, 1, D] tensors in ``dtype``."""
        cos, sin = self._tables_in(dtype)
        return cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)

    def _tables_in(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole tables in ``dtype``, cast once and kept: the same values as casting
        the looked-up rows each step (as HF does) without two casts a step, for a copy
        of the tables in ``dtype`` (half their float32 size in bf16); remade whenever the
        float32 tables are replaced (``.to``, ``.float``)."""
        if self.cos.dtype == dtype:
            return self.cos, self.signed_sin
        cast = self._cast
        if cast is None or cast[0] is not self.cos or cast[1].dtype != dtype:
            cast = self._cast = (self.cos, self.cos.to(dtype), self.signed_sin.to(dtype))
        return cast[1], cast[2]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + swap_halves(x) * sin: x [N, heads, D], cos and signed sin [N, 1, D]."""
    half = x.shape[-1] // 2
    swapped = torch.cat((x[..., half:], x[..., :half]), dim=-1)
    return x * cos + swapped * sin
