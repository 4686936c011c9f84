"""An env list of ``- K=V`` items: docker-compose ``environment:`` in its list form.

Compose takes a service's ``environment:`` as a map (``K: V``, the yaml-map format's
usual shape) or, as often in real files, as a list of ``K=V`` strings.  A yaml-map target
whose key path (``services.vllm.environment``) holds such a list is read and edited here:

* ``K=V`` is the knob K with the value V (everything after the first ``=``); ``K`` alone
  passes the shell's K through and has no value in the file: it is not reported, and a
  ``set`` of it is refused (the value is not in this file);
* compose interpolates ``$VAR`` / ``${VAR}`` in values and reads ``$$`` as ``$``: a value
  with a reference has no static value (left out, edits refused), ``$$`` reads as ``$``,
  and a written ``$`` is doubled;
* a name written twice is refused, naming both lines (which one wins is compose's
  business, not a guess of ours).

Edits replace the one item (keeping its quoting where it can carry the text), add a new
item after the last one in its neighbours' style, or remove the item's line; the list
helpers are the k8s argv ones (:mod:`envknobs.formats.yaml.argv`).
"""

from __future__ import annotations

import re

from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.nodes import SequenceNode

from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_of
from envknobs.formats.yaml.argv import Token
from envknobs.formats.yaml.argv import insert_after
from envknobs.formats.yaml.argv import remove_items
from envknobs.formats.yaml.scalar import node_style
from envknobs.formats.yaml.scalar import render

_REFERENCE = re.compile(r"\$(?:\{|[A-Za-z_])")


def _items(seq: SequenceNode) -> list[tuple[str, str | None, Token]]:
    out, seen = [], {}
    for node in seq.value:
        if not isinstance(node, ScalarNode):
            raise FormatError(f"line {node.start_mark.line + 1}: an environment item that "
                              "is not a K=V string")
        name, eq, raw = node.value.partition("=")
        if name in seen:
            raise FormatError(f"line {node.start_mark.line + 1}: {name} is listed twice "
                              f"(lines {seen[name]} and {node.start_mark.line + 1})")
        seen[name] = node.start_mark.line + 1
        out.append((name, raw if eq else None, Token(node, seq)))
    return out


def _static(raw: str | None) -> str | None:
    if raw is None or _REFERENCE.search(raw.replace("$$", "")):
        return None
    return raw.replace("$$", "$")


def list_values(seq: SequenceNode) -> dict[str, str]:
    """Name -> value of every item with a static value."""
    return {n: v for n, raw, _ in _items(seq) if (v := _static(raw)) is not None}


def set_in_list(text: str, seq: SequenceNode, knob: str, value: str) -> str:
    """``text`` with ``knob=value`` in the list (replacing its item, or appended)."""
    item = f"{knob}={value.replace('$', '$$')}"
    for name, raw, tok in _items(seq):
        if name != knob:
            continue
        line = line_of(text, tok.node.start_mark.index)
        if raw is None or _static(raw) is None:
            raise FormatError(f"line {line}: {knob} takes its value from the shell "
                              f"({tok.value!r}), not from this file; edit it by hand")
        end = tok.node.end_mark.index
        return text[: tok.node.start_mark.index] + render(item, node_style(tok.node)) + text[end:]
    if not seq.value:
        raise FormatError(f"line {line_of(text, seq.start_mark.index)}: the environment "
                          "list is empty; add the first item by hand")
    return insert_after(text, Token(seq.value[-1], seq), [item])


def unset_in_list(text: str, seq: SequenceNode, knob: str) -> str:
    """``text`` without the item of ``knob`` (the same text where it has none)."""
    doomed = [tok for name, _, tok in _items(seq) if name == knob]
    if doomed and len(doomed) == len(seq.value) and not seq.flow_style:
        raise FormatError(f"line {line_of(text, seq.start_mark.index)}: {knob} is the "
                          "list's only item; removing it would leave `environment:` empty")
    return remove_items(text, doomed) if doomed else text
