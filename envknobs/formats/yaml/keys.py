"""Names of knobs that are YAML map keys (engine ``--config`` files, env maps): a light module,
so that validating a name does not import a YAML library."""

from __future__ import annotations

import re

from envknobs.registry import KnobError

KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")


def check_key_name(key: str) -> str:
    """``key`` if it can name a knob in a YAML map, else KnobError.

    Letters, digits, ``_``, ``-`` and ``.``, starting with a letter or ``_``: every env
    variable name, and server arguments as config files spell them (``mem-fraction-static``).
    """
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise KnobError(
            f"invalid key {key!r}: a key is letters, digits, '_', '-' and '.', "
            "starting with a letter or '_'"
        )
    return key


__all__ = ["KEY_RE", "check_key_name"]
