"""Building an engine's timeline out of per-release catalogs, and writing it byte-stable.

:func:`build` takes ``{version: catalog}`` (what ``generate.release_catalog`` reads from
one release's sources) and keeps, per name, the releases it exists in as ranges and, per
attribute, the release each value starts from; :func:`envknobs.timeline.expand` gives each
release's catalog back unchanged (the round trip is tested).  An item keeps the keys the
per-release YAML kept: empty values (None, False, [], "") are dropped, except a ``default``
(None: computed or unset) and a ``deprecated`` of "" (deprecated, no replacement named).

:func:`dump` writes one name per line, keys sorted, ASCII only: the same catalogs give the
same bytes, and a new release shows in ``git diff`` as the lines of the names it moved.
"""

from __future__ import annotations

import json

from envknobs.timeline import RELEASE_KEYS
from envknobs.timeline import SECTIONS
from envknobs.timeline import expand
from envknobs.timeline import version_key


def _canonical(item: dict) -> dict:
    out = {}
    for key, value in item.items():
        if key == "name":
            continue
        if key == "default" or (key == "deprecated" and value is not None):
            out[key] = value
        elif not (value is None or value is False or value == [] or value == ""):
            out[key] = value
    return out


def _same(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _runs(values: list[tuple[str, object]]) -> list[list]:
    """``[[release, value]]`` at each change of value (the first release included)."""
    out: list[list] = []
    for version, value in values:
        if not out or not _same(out[-1][1], value):
            out.append([version, value])
    return out


def _spans(present: list[str], releases: list[str]) -> list[list[str]]:
    index = {v: i for i, v in enumerate(releases)}
    spans: list[list[str]] = []
    for version in present:
        if spans and index[spans[-1][1]] == index[version] - 1:
            spans[-1][1] = version
        else:
            spans.append([version, version])
    return spans


def build(engine: str, catalogs: dict[str, dict]) -> dict:
    """The timeline of ``engine`` from its per-release ``catalogs``."""
    releases = sorted(catalogs, key=version_key)
    data: dict = {"engine": engine, "releases": releases,
                  **{key: _runs([(v, catalogs[v].get(key)) for v in releases]) for key in RELEASE_KEYS}}
    for section in SECTIONS:
        per_name: dict[str, list[tuple[str, dict]]] = {}
        for version in releases:
            for item in catalogs[version].get(section, []):
                per_name.setdefault(item["name"], []).append((version, _canonical(item)))
        entries = {}
        for name in sorted(per_name):
            seen = per_name[name]
            keys = sorted({k for _, item in seen for k in item})
            entries[name] = {"in": _spans([v for v, _ in seen], releases),
                             "attrs": {k: _runs([(v, item.get(k)) for v, item in seen]) for k in keys}}
        data[section] = entries
    return data


def _line(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def dump(data: dict) -> str:
    """The timeline as text: a header, then one ``"name": {...}`` line per name."""
    out = ["{", f'"engine":{_line(data["engine"])},', f'"releases":{_line(data["releases"])},',
           *(f'"{key}":{_line(data.get(key, []))},' for key in RELEASE_KEYS)]
    for i, section in enumerate(SECTIONS):
        entries = data[section]
        out.append(f'"{section}":{{')
        out += [f"{_line(name)}:{_line(entries[name])}{',' if j < len(entries) - 1 else ''}"
                for j, name in enumerate(sorted(entries))]
        out.append("}" + ("," if i < len(SECTIONS) - 1 else ""))
    return "\n".join(out) + "\n}\n"


def catalogs_of(data: dict) -> dict[str, dict]:
    """Every release's catalog out of a timeline (to add or replace one and build again)."""
    return {v: expand(data, v) for v in data["releases"]}
