"""The ledger's smallest vocabulary: how a knob value is written in messages (``unset``
for an absent knob), the formats a target can have, the engines whose flags are known.

Below every other ledger module and free of imports: errors build their messages with
it, :mod:`ledger.core.display` shares it with the CLI and the rendered docs, and the
CLI's option choices come from here without loading the model (``ledger --help``)."""

from __future__ import annotations

UNSET = "unset"
FORMATS = ("bash", "dotenv", "k8s", "yaml-map")
FLAG_ENGINES = ("sglang", "vllm")


def value_text(value: str | None, *, quote: bool = False) -> str:
    """A knob value for a message: ``unset`` for None, else the value (``repr`` if ``quote``)."""
    if value is None:
        return UNSET
    return repr(value) if quote else value
