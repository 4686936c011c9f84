"""The type a new key's value takes in a YAML map (engine ``--config`` files, Helm values).

An engine reads ``max-num-seqs: 32`` as an int and ``"32"`` as a string (vLLM's config
loader, a Helm template's ``{{ .Values.vllmConfig.maxNumSeqs }}``): a new value must be
written as the type the argument has.  The rule, in order:

1. an env var name (``VLLM_X``) in an env map: a string -- the process gets strings;
2. the engine's flag catalog, where it knows the key (``max-num-seqs``, or a Helm values
   key in camelCase, ``maxNumSeqs``, read as ``--max-num-seqs``): an int, float or bool
   flag's value is written plain when YAML reads it as that type, a str flag's as a string
   (``dtype: "16"`` would be wrong plain);
3. the neighbours: a number or bool is written plain unless the map quotes its numbers and
   bools (more quoted ones such as ``'8192'`` than plain ones), a string in the quoting most
   neighbours use;
4. a text that YAML 1.1 and 1.2 read differently (``no``, ``0777``) is always quoted.

``--string`` on ``record`` writes the value as a string whatever the rule says.  An
existing scalar keeps its own type (see :mod:`envknobs.formats.yaml.map`).
"""

from __future__ import annotations

import re
from typing import Iterable

from ruamel.yaml.nodes import ScalarNode

from envknobs.formats.yaml.scalar import DOUBLE
from envknobs.formats.yaml.scalar import NULL_TAG
from envknobs.formats.yaml.scalar import STR_TAG
from envknobs.formats.yaml.scalar import check_yaml_text
from envknobs.formats.yaml.scalar import plain_tag
from envknobs.formats.yaml.scalar import quoted
from envknobs.formats.yaml.scalar import render

_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_TYPE_TAGS = {"int": ("int",), "float": ("int", "float"), "bool": ("bool",)}


def is_env_name(key: str) -> bool:
    return bool(_ENV_NAME.match(key))


def catalog_type(key: str, engine: str | None) -> str | None:
    """The catalog type of the server argument ``key`` spells (None: not a known one)."""
    from envknobs.formats.common.launch import flag_lookup

    if is_env_name(key):
        return None
    name = "--" + _CAMEL.sub(r"-\1", key).lower().replace("_", "-")
    flag = flag_lookup(engine)(name)
    return getattr(flag, "type", None)


def _kind(tag: str | None) -> str | None:
    return tag.rsplit(":", 1)[-1] if tag else None


def _quotes_its_numbers(neighbours: Iterable[ScalarNode]) -> bool:
    plain = quoted_ = 0
    for n in neighbours:
        kind = _kind(plain_tag(n.value))
        if kind in ("int", "float", "bool"):
            if n.style in ("'", '"'):
                quoted_ += 1
            elif n.style is None:
                plain += 1
    return quoted_ > plain


def new_scalar(value: str, key: str, neighbours: list[ScalarNode], style: str | None,
               quote: str | None, strings: bool, engine: str | None) -> str:
    """``value`` rendered for a new ``key`` of a map (the module docstring's rule)."""
    check_yaml_text(value)
    tag = plain_tag(value)
    if tag == NULL_TAG:  # `~` asked for as text: plain, it would read back as ""
        tag = None
    if strings and is_env_name(key):
        return render(value, style, quote)
    wanted = catalog_type(key, engine)
    if wanted == "str" or tag is None:
        return render(value, style, quote)
    if wanted in _TYPE_TAGS:
        return value if _kind(tag) in _TYPE_TAGS[wanted] else quoted(value, quote or DOUBLE)
    if tag == STR_TAG:
        return render(value, style, quote)
    return quoted(value, quote or DOUBLE) if _quotes_its_numbers(neighbours) else value


__all__ = ["catalog_type", "is_env_name", "new_scalar"]
