"""The bundled engine's releases as catalogs, like the SGLang and vLLM ones.

    python -m envknobs.catalogs.bundled_engine [ENGINE_TREE] [--out DIR]

The bundled engine (``engine/``) declares its knobs once (``REGISTRY.declare`` in
``engine/knobs.py``) and, per later release, the defaults that release moved
(``RELEASES``).  This module reads those two tables with :mod:`ast` — never importing the
engine, so it reads an engine checkout at any commit as well as this tree — and writes the
releases as one timeline, ``catalogs/timeline/knob-ledger-engine.json``, like the SGLang
and vLLM ones (:mod:`envknobs.catalogs.timeline_build`): same input, same bytes; every
reader of release catalogs (:mod:`envknobs.catalog_release`, :mod:`envknobs.release_diff`)
then knows the bundled engine's releases as it knows theirs.  A deployment names its release as pip pins it,
``knob-ledger-engine==1.1.0`` (on the serve script's launch line: :func:`detect_pins`).
"""

from __future__ import annotations

import argparse
import ast
import operator
import sys
from pathlib import Path
from typing import Any

from envknobs.registry import Registry

PACKAGE = "knob-ledger-engine"
TIMELINE = Path(__file__).resolve().parent / "timeline" / f"{PACKAGE}.json"
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.Pow: operator.pow, ast.LShift: operator.lshift}
_DECLARE_KEYS = ("class_hint", "min", "max", "choices", "unit", "tags")


def _value(node: ast.AST) -> Any:
    """A literal, or integer arithmetic on literals (``1 << 22``, ``2**31 - 1``)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return _ARITH[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    value = ast.literal_eval(node)
    return list(value) if isinstance(value, tuple) else value


def _declared(call: ast.Call) -> dict[str, Any]:
    """One ``REGISTRY.declare(name, type, default, doc=..., **kw)`` as a catalog item."""
    names = ("name", "type", "default", "doc")
    item = {names[i]: _value(arg) for i, arg in enumerate(call.args[:4])}
    for kw in call.keywords:
        if kw.arg in names or kw.arg in _DECLARE_KEYS:
            item[kw.arg] = _value(kw.value)
    if item.get("choices") is not None:
        item["choices"] = [str(c) for c in item["choices"]]
    item["doc"] = " ".join((item.get("doc") or "").split())
    return item


def _knobs_py(source: str | Path) -> Path:
    path = Path(source)
    return path if path.is_file() else path / "engine" / "knobs.py"


def read_releases(source: str | Path) -> dict[str, dict]:
    """Release -> catalog data (``engine``, ``knobs``, ``flags``, ``removed``) of the
    bundled engine in ``source`` (a tree holding ``engine/knobs.py``, or that file); the
    flags are ``python -m engine``'s (``engine/tools/cli.py`` beside it, read by the SGLang
    generator's ``add_argument`` reader), the same in every release.  ValueError when the
    file has no such tables."""
    path = _knobs_py(source)
    cli = path.parent / "tools" / "cli.py"
    flags = engine_flags(cli.read_text(encoding="utf-8")) if cli.is_file() else []
    return releases_of_text(path.read_text(encoding="utf-8"), str(path), flags)


def engine_flags(cli_text: str) -> list[dict]:
    """The flags ``python -m engine``'s argparse declares (first declaration kept)."""
    from envknobs.catalogs._sglang import add_argument_flags

    seen, out = set(), []
    for flag in add_argument_flags(ast.parse(cli_text), {}, {}):
        if flag["name"] not in seen:
            seen.add(flag["name"])
            out.append({**flag, "type": flag["type"] or "str"})
    return sorted(out, key=lambda f: f["name"])


def releases_of_text(text: str, where: str = "engine/knobs.py",
                     flags: list[dict] | None = None) -> dict[str, dict]:
    """:func:`read_releases` of the text of an ``engine/knobs.py`` (and its ``flags``)."""
    tree = ast.parse(text, filename=where)
    declared: list[dict] = []
    moves: dict[str, dict] | None = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "declare" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "REGISTRY"):
            declared.append(_declared(node))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "RELEASES" and node.value is not None:
            moves = _value(node.value)
    if not declared:
        raise ValueError(f"{where}: no REGISTRY.declare(...) of the bundled engine")
    if moves is None:  # an engine from before releases were declared: one release
        moves = {_literal_assign(tree, "RELEASE") or "1.0.0": {}}
    out, defaults = {}, {k["name"]: k.get("default") for k in declared}
    for version, moved in moves.items():
        defaults.update(moved)
        knobs = [{**k, "default": defaults[k["name"]]} for k in declared]
        out[version] = {"engine": PACKAGE, "knobs": sorted(knobs, key=lambda k: k["name"]),
                        "flags": list(flags or []), "removed": []}
    return out


def _literal_assign(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            return _value(node.value)
    return None


def write_catalogs(source: str | Path, out: Path = TIMELINE) -> list[Path]:
    """Write the timeline of the engine's releases in ``source``; the paths written."""
    from envknobs.catalogs.timeline_build import build
    from envknobs.catalogs.timeline_build import dump

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(dump(build(PACKAGE, read_releases(source))), encoding="utf-8")
    tmp.replace(out)
    return [out]


def releases() -> list[str]:
    """The bundled engine's catalogued releases, oldest first."""
    from envknobs.timeline import releases as timeline_releases

    return timeline_releases(PACKAGE)


def load_release(version: str) -> Registry:
    """The knobs of one bundled-engine release (KnobError naming the nearest there are)."""
    from envknobs.catalog_release import load_release as release

    return release(PACKAGE, version)[0]


def moved_defaults(old: str, new: str) -> list[tuple[str, Any, Any]]:
    """(knob, default in ``old``, default in ``new``) for each default the upgrade moves."""
    before, after = load_release(old), load_release(new)
    return [(k.name, before[k.name].default, k.default) for k in after
            if k.name in before and before[k.name].default != k.default]


def detect_pins(text: str) -> list[tuple[str, int]]:
    """Every ``knob-ledger-engine==X`` a file names, as ``(spec, line)``, in file order: the
    one reading of a release in a file (:func:`envknobs.catalog_release.detect_engines`)."""
    from envknobs.catalog_release import detect_engines

    return [(spec, line) for spec, line in detect_engines(text or "")
            if spec.startswith(f"{PACKAGE}==")]


def split_spec(spec: str | None) -> str | None:
    """The version of a ``knob-ledger-engine==X`` spec; None for any other engine's."""
    name, sep, version = (spec or "").partition("==")
    return version if sep and name == PACKAGE and version else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envknobs.catalogs.bundled_engine",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", default=str(Path(__file__).resolve().parents[2]),
                        help="a tree holding engine/knobs.py (default: this checkout)")
    parser.add_argument("--out", type=Path, default=TIMELINE)
    args = parser.parse_args(argv)
    try:
        paths = write_catalogs(args.source, args.out)
    except (ValueError, OSError, SyntaxError) as e:
        print(f"error: {args.source}: {e}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
