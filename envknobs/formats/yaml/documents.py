"""Which YAML document of a file a ``yaml-map`` target is (issue 50 item 4).

A manifest often holds several documents (a ConfigMap with the engine's config and the
Deployment that mounts it; a Helm-rendered bundle).  A key path names a place in one of
them; ``DOC:PATH`` (the 1-based document index, as in k8s container addresses, or the
document's ``KIND/NAME``: ``ConfigMap/kaito-config:data``; ``target add --doc``) names the
document outright.  Without an index the document is the one where the key path's first
path is found (else its parent, for a key to be added): one such document is picked; several are refused, naming each document's
line and kind/name and the ``DOC:`` address that selects it, never one picked silently.
A whole-file map (no key path) in a file of several documents is refused the same way.
"""

from __future__ import annotations

import re
from typing import Sequence

from ruamel.yaml.nodes import MappingNode
from ruamel.yaml.nodes import Node

from envknobs.formats.common import FormatError
from envknobs.formats.yaml.edit import format_path
from envknobs.formats.yaml.edit import scalar_text
from envknobs.formats.yaml.edit import walk_path

_DOC = re.compile(r"(\d+|[A-Za-z][A-Za-z0-9]*/[a-z0-9][a-z0-9.-]*):(.*)\Z", re.S)


def split_doc(key_path: str | None) -> tuple[int | str | None, str | None]:
    """``(2, "data")`` from ``"2:data"``, ``("ConfigMap/kaito", "data")`` from
    ``"ConfigMap/kaito:data"``; ``(None, key_path)`` without a ``DOC:`` part."""
    m = _DOC.match(key_path or "")
    if m is None:
        return None, key_path
    if not m.group(1).isdigit():
        return m.group(1), m.group(2) or None
    if int(m.group(1)) < 1:
        raise FormatError(f"key path {key_path!r}: documents are numbered from 1")
    return int(m.group(1)), m.group(2) or None


def _by_label(numbered: list[tuple[int, Node]], label: str) -> Node:
    """The one document whose kind/name is ``label``; FormatError naming each document
    where none or several are."""
    found = [(n, d) for n, d in numbered if _label(d) == label]
    if len(found) == 1:
        return found[0][1]
    listed = _listed(found or numbered)
    why = f"{len(found)} YAML documents are {label}" if found else f"no YAML document is {label}"
    raise FormatError(f"{why}: {listed}; pick one with --doc N")


def _listed(docs: list[tuple[int, Node]]) -> str:
    return "; ".join(f"document {n} at line {d.start_mark.line + 1} ({_label(d)})"
                     for n, d in docs)


def _label(doc: Node) -> str:
    """``ConfigMap/kaito-config`` for a document that says its kind and name."""
    if not isinstance(doc, MappingNode):
        return "a document"
    top = {scalar_text(k): v for k, v in doc.value}
    kind = scalar_text(top["kind"]) if "kind" in top else None
    meta = top.get("metadata")
    name = next((scalar_text(v) for k, v in meta.value if scalar_text(k) == "name"), None) \
        if isinstance(meta, MappingNode) else None
    return "/".join(x for x in (kind, name) if x) or "a document"


def pick_document(docs: Sequence[Node | None], index: int | str | None,
                  steps: tuple) -> Node | None:
    """The document a key path is in (see the module docstring); FormatError naming every
    candidate where that is not one document."""
    numbered = [(n, d) for n, d in enumerate(docs, 1) if d is not None]
    if isinstance(index, str):
        return _by_label(numbered, index)
    if index is not None:
        found = next((d for n, d in numbered if n == index), None)
        if found is None:
            raise FormatError(f"the file has no YAML document {index} "
                              f"(it holds {len(docs)})")
        return found
    if len(numbered) <= 1:
        return numbered[0][1] if numbered else None
    having = [(n, d) for n, d in numbered if steps and walk_path(d, steps) is not None] or \
        [(n, d) for n, d in numbered if len(steps) > 1 and walk_path(d, steps[:-1]) is not None]
    if len(having) == 1:
        return having[0][1]
    listed = _listed(having or numbered)
    path = format_path(steps) or "PATH"
    why = (f"the key path is in {len(having)} YAML documents" if having else
           f"the file holds {len(numbered)} YAML documents" if not steps else
           f"no YAML document has {path!r}")
    first = (having or numbered)[0]
    raise FormatError(f"{why}: {listed}; pick one with --doc N or --doc KIND/NAME "
                      f"(target add), or --key-path DOC:{path} (e.g. {first[0]}:{path})")
