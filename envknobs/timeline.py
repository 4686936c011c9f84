"""Every catalogued release of an engine, one timeline per engine: which releases declare
each env var, flag and config-object field, and its type, default and choices by range.

The timeline (``envknobs/catalogs/timeline/<engine>.json``, written by
``python -m envknobs.catalogs.generate``) holds, per name, the releases it exists in as
ranges (``"in": [["0.6.0", "0.8.5"], ...]``) and, per attribute, the release each value
starts from (``"default": [["0.6.0", false], ["0.14.0", true]]``): a value holds from its
release on, in the releases the name exists in, until the next one.  Sections: ``knobs``
(env vars), ``flags`` (server flags), ``removed`` (names a release's own tables mark
removed / renamed / deprecated, with the replacement) and ``fields`` (the keys of
config-object flags such as ``--compilation-config``, named ``--compilation-config.key``).

Loaded lazily, on first use, and parsed once per process; nothing of the engines is
imported and nothing is fetched.  :func:`release_catalog` gives back one release's catalog
exactly as the generator read it, so :mod:`envknobs.catalog_release` builds its registries
from it.

An unknown release is never refused here: :func:`nearest_releases` names the catalogued
ones around it, for the caller's warning.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

TIMELINES = Path(__file__).resolve().parent / "catalogs" / "timeline"
SECTIONS = ("knobs", "flags", "removed", "fields")
# whole-release facts, by release range: the bool words of SGLang's EnvBool; the env-var
# prefixes a release rewrites at startup ({"SGL_": "SGLANG_"}: SGL_X is read as SGLANG_X)
RELEASE_KEYS = ("bool_words", "prefix_renames")
# The engines with a committed timeline: SGLang's and vLLM's releases, and the bundled
# engine's own (envknobs/catalogs/bundled_engine.py writes knob-ledger-engine.json).
ENGINES = ("sglang", "vllm", "knob-ledger-engine")


def version_key(version: str) -> tuple:
    """Release order: ``0.4.1.post7`` after ``0.4.1``, ``0.9.0.1`` after ``0.9.0``, a
    pre-release (``0.5.0rc1``, ``a``/``b``/``dev``) before its release; anything unreadable
    sorts by its leading numbers."""
    text = str(version).lstrip("v")
    main, _, post = text.partition("post")
    pre = re.search(r"(rc|a|b|dev)(\d*)$", main)
    if pre:
        main = main[:pre.start()]
    nums = [int(p) for p in re.findall(r"\d+", main)]
    nums += [0] * (4 - len(nums))
    stage = (-1, int(pre.group(2) or 0)) if pre else (0, 0)
    return (*nums[:4], *stage, int(post) if post.isdigit() else 0)


@functools.lru_cache(maxsize=4)
def timeline(engine: str) -> dict:
    """The engine's timeline as stored; an empty one when none is committed."""
    path = TIMELINES / f"{engine}.json"
    if not path.is_file():
        return {"engine": engine, "releases": [], **{s: {} for s in SECTIONS}}
    return json.loads(path.read_text(encoding="utf-8"))


def releases(engine: str) -> list[str]:
    """Catalogued releases of ``engine``, oldest first."""
    return list(timeline(engine)["releases"])


def nearest_releases(engine: str, version: str) -> list[str]:
    """The catalogued release itself, or for an unknown one the nearest catalogued ones:
    the newest before it and the oldest after it (one of them at either end)."""
    known = releases(engine)
    if version in known:
        return [version]
    keys = [version_key(v) for v in known]
    i = bisect.bisect_left(keys, version_key(version))
    return [v for v in (known[i - 1] if i > 0 else None, known[i] if i < len(known) else None) if v]


def _at(runs: list, index: int, order: dict[str, int]) -> object:
    """The value of ``runs`` (``[[from_release, value], ...]``) at release ``index``."""
    value = None
    for start, v in runs:
        if order[start] > index:
            break
        value = v
    return value


def _present(spans: list, index: int, order: dict[str, int]) -> bool:
    return any(order[a] <= index <= order[b] for a, b in spans)


@functools.lru_cache(maxsize=16)
def release_catalog(engine: str, version: str) -> dict:
    """One release's catalog (``knobs``, ``flags``, ``removed``, ``fields``, ``bool_words``)
    as the generator read it; KeyError when the timeline does not hold the release."""
    return expand(timeline(engine), version)


def expand(data: dict, version: str) -> dict:
    """Release ``version``'s catalog out of the timeline ``data`` (KeyError if not in it)."""
    order = {v: i for i, v in enumerate(data["releases"])}
    index = order[version]
    out: dict = {"engine": data["engine"]}
    for key in RELEASE_KEYS:
        value = _at(data.get(key, []), index, order)
        if value:
            out[key] = value
    for section in SECTIONS:
        items = []
        for name, entry in data.get(section, {}).items():
            if _present(entry["in"], index, order):
                item = {"name": name}
                for key, runs in entry["attrs"].items():
                    value = _at(runs, index, order)
                    if value is not None or (key == "default" and section != "removed"):
                        item[key] = value
                items.append(item)
        out[section] = items
    return out


_SHOWN = ("type", "default", "choices", "min", "max", "nargs", "true_words")


@dataclass(frozen=True)
class KnobHistory:
    """One name's history in one engine.

    ``spans``: the release ranges it exists in, ``(first, last)``; ``changes``: per
    attribute, ``[(release, value)]`` at each release its value changed (from that release
    on, while the name exists); ``removed``: the releases' own removal / rename /
    deprecation marks, ``(first, last, status, replacement, note)``; ``replacement`` the
    name to use instead (from those marks, else the flag's own deprecation), ``inverts``
    whether it means the opposite; ``releases`` every catalogued release of the engine."""

    engine: str
    name: str
    section: str
    spans: list[tuple[str, str]]
    changes: dict[str, list[tuple[str, object]]] = field(default_factory=dict)
    removed: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    replacement: str = ""
    inverts: bool = False
    releases: tuple[str, ...] = ()

    def first(self) -> str | None:
        return self.spans[0][0] if self.spans else None

    def last(self) -> str | None:
        return self.spans[-1][1] if self.spans else None

    def value_at(self, key: str, version: str) -> object:
        """The attribute's value in ``version`` (None where unset or the name is absent)."""
        if not any(version_key(a) <= version_key(version) <= version_key(b) for a, b in self.spans):
            return None
        value = None
        for start, v in self.changes.get(key, []):
            if version_key(start) > version_key(version):
                break
            value = v
        return value

    def deprecated_from(self) -> str | None:
        """The first release that marks the name deprecated (still taking it)."""
        return next((start for start, v in self.changes.get("deprecated", []) if v is not None), None)

    def _before(self, release: str) -> str:
        """The last release before ``release`` that declares the name."""
        key = version_key(release)
        found = [v for v in self.releases if version_key(v) < key
                 and any(version_key(a) <= version_key(v) <= version_key(b) for a, b in self.spans)]
        return found[-1] if found else release

    def describe(self, key: str) -> str:
        """``default False until 0.13.0, True from 0.14.0`` (a single value: ``default 8``)."""
        runs = self.changes.get(key, [])
        if not runs:
            return ""
        parts = [_shown(runs[0][1], key)]
        if len(runs) > 1:
            parts[0] += f" until {self._before(runs[1][0])}"
        parts += [f"{_shown(v, key)} from {start}" for start, v in runs[1:]]
        return f"{key} " + ", ".join(parts)

    def lines(self) -> list[str]:
        """What ``ledger knob`` prints for this engine, one fact a line."""
        spans = ", ".join(a if a == b else f"{a}..{b}" for a, b in self.spans) or "none"
        every = self.releases and [list(s) for s in self.spans] == [[self.releases[0], self.releases[-1]]]
        out = [f"releases: every one catalogued, {spans}" if every else
               f"releases: {spans} (of {self.releases[0]}..{self.releases[-1]} catalogued)"
               if self.releases else f"releases: {spans}"]
        if self.spans and self.last() != self.releases[-1]:
            out.append(f"gone after {self.last()}")
        out += [d for d in (self.describe(k) for k in _SHOWN) if d]
        since = self.deprecated_from()
        if since is not None:
            use = self.value_at("deprecated", self.last() or since) or self.replacement
            out.append(f"deprecated {since}" + (f" (use {use})" if use else ""))
        for a, b, status, repl, note in self.removed:
            where = a if a == b else f"{a}..{b}"
            flip = self.inverts and repl == self.replacement or inverts(self.name, repl)
            use = f" (use {repl}{'; meaning inverts' if flip else ''})" if repl else ""
            out.append(f"{status or 'removed'} in {where}{use}" + (f": {note}" if note and not repl else ""))
        doc = self.value_at("doc", self.last()) if self.spans else None
        if doc:
            out.append(f"doc: {doc}")
        return out

    def to_dict(self) -> dict:
        return {"engine": self.engine, "name": self.name, "section": self.section,
                "releases": [list(s) for s in self.spans],
                "changes": {k: [list(r) for r in v] for k, v in self.changes.items()},
                "removed": [dict(zip(("first", "last", "status", "replacement", "note"), r))
                            for r in self.removed],
                "replacement": self.replacement or None, "inverts": self.inverts}


def _shown(value: object, key: str) -> str:
    if value is None:
        return "none (computed or unset)" if key == "default" else "none"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def inverts(old: str, new: str) -> bool:
    """Whether renaming ``old`` to ``new`` turns the meaning over: one says DISABLE (or
    NO/SKIP) where the other says ENABLE/USE/ALLOW (``SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK``
    -> ``SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK``): a value set for the old name must be
    negated for the new one.  Told from the names, as an operator reads them."""
    def polarity(name: str) -> int:
        words = set(re.split(r"[_\-.]+", name.upper()))
        return (1 if words & {"ENABLE", "USE", "ALLOW"} else 0) - (
            1 if words & {"DISABLE", "NO", "SKIP"} else 0)

    a, b = polarity(old or ""), polarity(new or "")
    return a != 0 and b != 0 and a != b


def knob_history(engine: str, name: str) -> KnobHistory | None:
    """``name``'s history in ``engine``'s timeline (env var, flag, config field, or a name
    only the removal tables know); None when the engine never declared it."""
    data = timeline(engine)
    found = [(s, data[s][name]) for s in ("knobs", "flags", "fields") if name in data[s]]
    gone = data["removed"].get(name)
    if not found and gone is None:
        return None
    section, entry = found[0] if found else ("removed", {"in": [], "attrs": {}})
    removed = []
    if gone is not None:
        order = {v: i for i, v in enumerate(data["releases"])}
        for a, b in gone["in"]:
            removed.append((a, b, *(str(_at(gone["attrs"].get(k, []), order[a], order) or "")
                                    for k in ("status", "replacement", "note"))))
    renamed = _prefix_renamed(data, name, entry["in"])
    if renamed is not None:
        removed = sorted([*removed, renamed], key=lambda r: version_key(r[0]))
    repl = next((r[3] for r in reversed(removed) if r[3]), "")
    if not repl:
        marked = [v for _, v in entry["attrs"].get("deprecated", []) if v]
        repl = str(marked[-1]) if marked else ""
    declared = gone is not None and any(v for _, v in gone["attrs"].get("inverts", []))
    return KnobHistory(engine, name, section, [tuple(s) for s in entry["in"]],
                       {k: [tuple(r) for r in v] for k, v in entry["attrs"].items()},
                       removed, repl, declared or inverts(name, repl), tuple(data["releases"]))


def renamed_by_prefix(name: str, renames: dict[str, str] | None) -> str | None:
    """What a release that rewrites env-var prefixes (``{"SGL_": "SGLANG_"}``) reads ``name`` as."""
    for old, new in (renames or {}).items():
        if name.startswith(old):
            return new + name[len(old):]
    return None


def _prefix_renamed(data: dict, name: str, spans: list) -> tuple | None:
    """``(first, last, "renamed", new, note)`` when the releases after ``name``'s last one
    rewrite its prefix to a name they declare (``SGL_X`` -> ``SGLANG_X``)."""
    releases = data["releases"]
    order = {v: i for i, v in enumerate(releases)}
    after = order[spans[-1][1]] + 1 if spans else None
    if after is None or after >= len(releases):
        return None
    new = renamed_by_prefix(name, _at(data.get("prefix_renames", []), after, order))
    entry = data["knobs"].get(new or "")
    if entry is None or not _present(entry["in"], after, order):
        return None
    return (releases[after], releases[-1], "renamed", new, f"read as {new}: the release rewrites the prefix")


def all_names(engine: str) -> list[str]:
    """Every name the engine's timeline holds, in any section."""
    data = timeline(engine)
    return sorted({n for s in SECTIONS for n in data[s]})
