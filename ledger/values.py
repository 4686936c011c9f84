"""How a knob value is written in messages: ``unset`` for an absent knob.

Below every other ledger module (errors build their messages with it, and
:mod:`ledger.core.display` shares it with the CLI and the rendered docs)."""

from __future__ import annotations

UNSET = "unset"


def value_text(value: str | None, *, quote: bool = False) -> str:
    """A knob value for a message: ``unset`` for None, else the value (``repr`` if ``quote``)."""
    if value is None:
        return UNSET
    return repr(value) if quote else value
