"""Where a config file writes its engine release, and that release changed in place.  Pure.

A *spot* is the version text of one place that names an engine release:

* an image tag — ``vllm/vllm-openai:v0.13.0``, ``lmsysorg/sglang:v0.5.7-cu129`` (a k8s
  ``image:``, a compose ``image:``, ``docker run``, a Dockerfile ``FROM``);
* a pip pin — ``pip install vllm==0.13.0``, ``"sglang[all]==0.5.7"``;
* ``pip show`` output kept in the file (``Name: vllm`` / ``Version: 0.13.0``);
* a Helm values ``image:`` block: ``repository: vllm/vllm-openai`` and its sibling
  ``tag: v0.13.0`` (same indentation, same block).

The first three are :func:`envknobs.catalog_release.detect_engines`'s patterns (one
reading of a release, shared); the Helm block is read here.  :func:`with_release` rewrites
the version text of the spots and nothing else, so a tag's ``v`` and suffix (``-cu129``),
quotes, comments and every other byte stay: a revert (the old version written back the
same way) is byte-exact.

Decisions (the issue was silent): one file runs one release per engine — every spot
naming the engine moves together (a prefill and a decode image at the same tag both
move); spots that disagree (two tags naming two releases) are an ambiguity the caller
refuses, naming each place.  ``latest`` or a tag without a version is no spot: such a
file declares no release (``engine:`` in ledger.yaml, or ``--from``, says it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envknobs.catalog_release import RELEASE_PATTERNS  # the one reading of a release in a file

_ENGINE_WORD = {"sglang": "sglang", "vllm": "vllm", "vllm-openai": "vllm",
                "knob-ledger-engine": "knob-ledger-engine"}
_REPOSITORY = re.compile(
    r"^(?P<indent>[ \t]*)(?:-[ \t]+)?repository:[ \t]*[\"']?(?:[\w.:-]+/)*"
    r"(?P<engine>vllm-openai|sglang)[\"']?[ \t]*(?:#.*)?$", re.M)
_TAG = re.compile(r"tag:[ \t]*[\"']?v?(?P<version>\d+\.\d+\.\d+(?:\.?post\d+)?)")


@dataclass(frozen=True)
class ReleaseSpot:
    engine: str  # sglang | vllm
    version: str  # as written, without a tag's "v": 0.13.0
    line: int  # 1-based
    start: int  # the version text's offsets in the file's text
    end: int
    kind: str  # image / pin / pip show / helm tag
    text: str  # the line, stripped: what an error shows at file:line

    @property
    def spec(self) -> str:
        return f"{self.engine}=={self.version}"


def release_spots(text: str) -> list[ReleaseSpot]:
    """Every spot of ``text`` that names an engine release, in file order."""
    if not text or not any(w in text for w in ("sglang", "vllm", "knob-ledger-engine")):
        return []
    found: dict[int, ReleaseSpot] = {}
    kinds = ("image", "pin", "pip show")
    for kind, pattern in zip(kinds, RELEASE_PATTERNS):
        for m in pattern.finditer(text):
            found[m.start(2)] = _spot(text, _ENGINE_WORD[m.group(1)], m.start(2), m.end(2), kind)
    for m in _REPOSITORY.finditer(text):
        tag = _sibling_tag(text, m)
        if tag is not None:
            found[tag[0]] = _spot(text, _ENGINE_WORD[m.group("engine")], *tag, "helm tag")
    return [found[k] for k in sorted(found)]


def _spot(text: str, engine: str, start: int, end: int, kind: str) -> ReleaseSpot:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start: len(text) if line_end < 0 else line_end]
    return ReleaseSpot(engine, text[start:end], text.count("\n", 0, start) + 1, start, end,
                       kind, line.strip())


def _sibling_tag(text: str, repo: re.Match) -> tuple[int, int] | None:
    """The version span of the ``tag:`` that sits beside ``repository:`` in its block
    (same column; a ``- repository:`` list item has no siblings above it)."""
    line_start = repo.start()
    column = text.index("repository:", line_start) - line_start
    item = text[line_start:line_start + column].strip() == "-"
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    here = text.count("\n", 0, line_start)
    for step in ((1,) if item else (-1, 1)):
        i = here + step
        while 0 <= i < len(lines):
            body = lines[i].lstrip(" \t")
            lead = len(lines[i]) - len(body)
            if body.strip() and not body.startswith("#"):
                if lead < column:
                    break
                m = _TAG.match(body) if lead == column else None
                if m is not None:
                    return offsets[i] + lead + m.start("version"), offsets[i] + lead + m.end(
                        "version")
            i += step
    return None


def engine_spots(spots: list[ReleaseSpot], engine: str | None = None) -> list[ReleaseSpot]:
    """The spots naming ``engine`` (every spot without one)."""
    return [s for s in spots if engine is None or s.engine == engine]


def releases_named(spots: list[ReleaseSpot]) -> list[str]:
    """The distinct releases the spots name (``vllm==0.13.0``), in file order."""
    return list(dict.fromkeys(s.spec for s in spots))


def with_release(text: str, spots: list[ReleaseSpot], version: str) -> str:
    """``text`` with the version text of each of ``spots`` (found in this very text)
    replaced by ``version``; every other byte as it was."""
    for s in sorted(spots, key=lambda s: s.start, reverse=True):
        text = text[:s.start] + version + text[s.end:]
    return text


__all__ = ["ReleaseSpot", "engine_spots", "release_spots", "releases_named", "with_release"]
