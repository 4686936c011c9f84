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


def negated_pair(knob: str) -> tuple[str, str]:
    """(the argument, its negation) a ``--config`` key belongs to:
    ``enable-prefix-caching`` and ``no-enable-prefix-caching`` are one argument."""
    base = knob[3:] if knob.startswith("no-") else knob
    return base, f"no-{base}"


def negation_conflict(knob: str, lines: dict[str, int]) -> str | None:
    """Why an edit of ``knob`` in a ``--config`` map (``lines``: key -> line) must not go
    ahead, or None: the file spells the same argument the other way
    (``no-enable-prefix-caching: true`` beside a change of ``enable-prefix-caching``).

    Decisions: both spellings written is refused (the engine reads them as two flags and the
    later one wins: a ledger edit of either could take no effect); one spelling written and
    the other asked for is refused naming its line, since adding the second key would
    contradict the first while the entry says the knob was unset before.
    """
    base, negated = negated_pair(knob)
    if base in lines and negated in lines:
        return (f"lines {lines[base]} and {lines[negated]}: {base} and {negated} are one "
                f"argument (--{base} / --{negated}) written both ways, and the one the "
                "engine reads last wins; remove one of them by hand")
    other = negated if knob == base else base
    if other in lines:
        return (f"line {lines[other]}: {other} is the same argument as {knob} (--{negated} "
                f"negates --{base}): record {other} instead")
    return None


__all__ = ["KEY_RE", "check_key_name", "negated_pair", "negation_conflict"]
