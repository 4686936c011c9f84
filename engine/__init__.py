"""The bundled prefill/decode-disaggregated LLM engine (see docs/ARCHITECTURE.md §6).

Public API: :class:`LLMEngine` and :class:`SamplingParams` (offline generation),
``python -m engine generate|bench|serve`` (engine.tools.cli), and the knobs in engine.knobs.
Importing this package is cheap: torch loads only when the engine itself is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LLMEngine", "SamplingParams"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import engine.knobs` (the ledger's catalog) never pulls in torch.
    if name == "LLMEngine":
        from engine.core.llm import LLMEngine

        return LLMEngine
    if name == "SamplingParams":
        from engine.core.sequence import SamplingParams

        return SamplingParams
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
