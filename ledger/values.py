"""The ledger's smallest vocabulary: how a knob value is written in messages (``unset``
for an absent knob), the formats a target can have, the engines whose flags are known.

Below every other ledger module and free of imports: errors build their messages with
it, :mod:`ledger.core.display` shares it with the CLI and the rendered docs, and the
CLI's option choices come from here without loading the model (``ledger --help``)."""

from __future__ import annotations

UNSET = "unset"
FORMATS = ("bash", "dotenv", "k8s", "yaml-map", "systemd")
FLAG_ENGINES = ("sglang", "vllm")


def value_text(value: str | None, *, quote: bool = False, default: object = None) -> str:
    """A knob value for a message: ``unset`` for None (``unset (default 256)`` when the
    engine's default is known), else the value (``repr`` if ``quote``)."""
    if value is None:
        if getattr(default, "computed", False):  # envknobs.catalog_release.ComputedDefault
            return f"{UNSET} (default: {default})"
        return UNSET if default is None else f"{UNSET} (default {default_text(default)})"
    return repr(value) if quote else value


def default_text(default: object) -> str:
    """A catalog default as the operator would write it (``true``, ``1 2 4``, ``0.9``)."""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, (list, tuple)):
        return " ".join(default_text(d) for d in default)
    return str(default)
