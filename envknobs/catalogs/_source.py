"""Reading an engine's sources for the catalog generator: a wheel or a source tree, parsed
with :mod:`ast` only (nothing of the engine is ever imported or run).

Helpers shared by the SGLang and vLLM readers: opening the source, constant values of
expressions, and what a type annotation says (``int | None``, ``Literal[...]``,
``list[int]``, module-level aliases of those).
"""

from __future__ import annotations

import ast
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any

NOT_CONSTANT = object()
_SCALARS = {"int": "int", "float": "float", "bool": "bool", "str": "str"}


class EngineSource:
    """A wheel (``.whl``), an sdist (``.tar.gz``) or a directory holding the engine's
    package, read as text.  An sdist's members are read from the tarball as it is (its
    top folder ``vllm-0.6.0/`` taken off the names): nothing is extracted, nothing of its
    setup code runs; only regular files are read (links and devices are not)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._zip = None
        self._names: list[str] | None = None
        self._tar: dict[str, bytes] | None = None
        if self.path.is_file() and self.path.name.endswith((".tar.gz", ".tgz", ".tar")):
            self._tar = _tar_members(self.path)
        elif self.path.is_file():
            self._zip = zipfile.ZipFile(self.path)

    def names(self) -> list[str]:
        if self._tar is not None:
            return sorted(self._tar)
        if self._zip is not None:
            return sorted(self._zip.namelist())
        if self._names is None:  # a tree is walked once: the readers ask several times
            self._names = sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*") if p.is_file())
        return list(self._names)

    def read(self, relpath: str) -> str | None:
        try:
            if self._tar is not None:
                return self._tar[relpath].decode("utf-8")
            if self._zip is not None:
                return self._zip.read(relpath).decode("utf-8")
            return (self.path / relpath).read_text(encoding="utf-8")
        except (KeyError, OSError, UnicodeDecodeError):
            return None

    def parse(self, relpath: str) -> ast.Module | None:
        text = self.read(relpath)
        return None if text is None else ast.parse(text, filename=relpath)

    def version(self, package: str) -> str:
        """The release: from a wheel's name, else ``PKG-INFO`` (an sdist's, or the one
        ``benchmarks/fetch_releases.py`` writes: a wheel's ``version.py`` may say
        ``0.0.0.dev0``), else ``<package>/version.py``."""
        m = re.match(rf"{package}-([0-9][^-]*)-", self.path.name)
        if m:
            return m.group(1)
        for rel in ("PKG-INFO", f"{package}/version.py", f"{package}/_version.py"):
            text = self.read(rel) or ""
            m = re.search(r"""(?:__version__\s*=\s*|^Version:\s*)["']?([0-9][^"'\s]*)""", text, re.M)
            if m:
                return m.group(1)
        raise ValueError(f"{self.path}: cannot tell the {package} version (name the wheel or add version.py)")


def _tar_members(path: Path) -> dict[str, bytes]:
    """The ``.py`` files and ``PKG-INFO`` of an sdist, by their name under its top folder."""
    out: dict[str, bytes] = {}
    with tarfile.open(path) as tar:
        for member in tar:
            top, _, rel = member.name.partition("/")
            if member.isfile() and rel and (rel.endswith(".py") or rel == "PKG-INFO"):
                out[rel] = tar.extractfile(member).read()
    return out


def constant(node: ast.AST | None) -> Any:
    """The Python value of a literal expression, or ``NOT_CONSTANT``."""
    if node is None:
        return NOT_CONSTANT
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_CONSTANT


def call_name(node: ast.AST) -> str:
    """``f`` of ``f(...)`` / ``a.b.f(...)``; empty when ``node`` is no such call."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def module_aliases(*trees: ast.Module) -> dict[str, ast.AST]:
    """Module-level ``Name = <annotation>`` / ``Name: TypeAlias = ...`` assignments."""
    out: dict[str, ast.AST] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            if isinstance(target, ast.Name):
                out[target.id] = value
    return out


def annotation_info(node: ast.AST | None, aliases: dict[str, ast.AST], depth: int = 0) -> dict:
    """``{"type", "choices", "nargs"}`` of an annotation; ``type`` None when unknown."""
    info: dict = {"type": None, "choices": None, "nargs": None}
    if node is None or depth > 8:
        return info
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "int | None"
        try:
            return annotation_info(ast.parse(node.value, mode="eval").body, aliases, depth + 1)
        except SyntaxError:
            return info
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right], aliases, depth)
    if isinstance(node, ast.Subscript):
        head = _name(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Literal":
            values = [constant(a) for a in args]
            if values and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
                kind = "int" if all(isinstance(v, int) for v in values) else "str"
                return {"type": kind, "choices": [str(v) for v in values], "nargs": None}
            return info
        if head in ("Optional", "Union"):
            return _union(args, aliases, depth)
        if head == "Annotated":
            return annotation_info(args[0], aliases, depth + 1)
        if head in ("list", "List", "tuple", "Tuple", "set", "Sequence"):
            inner = annotation_info(args[0], aliases, depth + 1)
            if inner["type"] in ("int", "float", "str"):
                return {**inner, "nargs": "+"}
            return info
        return info
    name = _name(node)
    if name in _SCALARS:
        return {"type": _SCALARS[name], "choices": None, "nargs": None}
    if name in aliases and name != _name(aliases[name]):
        return annotation_info(aliases[name], aliases, depth + 1)
    return info


def _union(parts: list[ast.AST], aliases: dict[str, ast.AST], depth: int) -> dict:
    """A union: its one non-None member; ``Literal | str`` is a free ``str``."""
    members = [annotation_info(p, aliases, depth + 1) for p in parts if not _is_none(p)]
    known = [m for m in members if m["type"] is not None]
    if len(members) == 1:
        return members[0]
    if known and len(known) == len(members) and {m["type"] for m in known} == {"str"}:
        return {"type": "str", "choices": None, "nargs": None}
    if len(known) == 1 and known[0]["nargs"] is None and len(members) == 2:
        other = [m for m in members if m is not known[0]][0]
        if other["nargs"] == "+" and other["type"] == known[0]["type"]:
            return other  # `int | list[int]`
    return {"type": None, "choices": None, "nargs": None}


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None or _name(node) == "None"


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def first_doc_line(text: str | None) -> str:
    """The first sentence-ish line of a help text or comment, squashed to one line."""
    if not text:
        return ""
    line = " ".join(text.split())
    return line[:157] + "..." if len(line) > 160 else line


def read_module(src: EngineSource, relpath: str) -> tuple[ast.Module, list[str]]:
    """The parsed module and its lines; ValueError naming the source when it is missing."""
    text = src.read(relpath)
    if text is None:
        raise ValueError(f"{src.path}: no {relpath}")
    return ast.parse(text, filename=relpath), text.splitlines()


def module_dicts(tree: ast.Module, *names: str):
    """``(name, key, value)`` for each item of the module-level dict literals ``names``."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        name = getattr(target, "id", "")
        if name in names and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values):
                yield name, key, value


def comment_above(lines: list[str], lineno: int) -> str:
    """The ``#`` comment block right above line ``lineno``, as one doc line."""
    out: list[str] = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        out.insert(0, lines[i].strip().lstrip("#").strip())
        i -= 1
    return first_doc_line(" ".join(out))
