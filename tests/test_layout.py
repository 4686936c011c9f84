"""The house rules on size, checked over every module of the four packages.

A function's body is at most 60 lines and a module at most 500 lines of code.
What is measured is code: a function's signature and docstring, and a module's
blank and comment-only lines, are not counted, so documenting a decision never
pushes code over a limit (docs/ARCHITECTURE.md §1 asks for decisions to be written down).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ledger", "engine", "envknobs", "backups")
MAX_FUNCTION_BODY = 60
MAX_MODULE_CODE = 500


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    first = body[0]
    if (len(body) > 1 and isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        first = body[1]
    return node.end_lineno - first.lineno + 1


def _code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({_body_lines(node)} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _body_lines(node) > MAX_FUNCTION_BODY
    ]


def test_packages_are_found() -> None:
    assert len(_modules()) > 50


def test_no_function_body_over_the_limit() -> None:
    found = [line for path in _modules() for line in long_functions(path)]
    assert not found, "functions over 60 lines:\n" + "\n".join(found)


def test_no_module_over_the_limit() -> None:
    found = [
        f"{p.relative_to(ROOT)} ({n} lines of code)"
        for p in _modules()
        if (n := _code_lines(p.read_text(encoding="utf-8"))) > MAX_MODULE_CODE
    ]
    assert not found, "modules over 500 lines of code:\n" + "\n".join(found)


@pytest.mark.parametrize("size", [MAX_FUNCTION_BODY, MAX_FUNCTION_BODY + 1])
def test_the_function_rule_counts_the_body_only(size: int) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(size))
    (node,) = ast.parse(f'def f(\n    a,\n):\n    """Doc\n    string."""\n{body}\n').body
    assert _body_lines(node) == size


def test_comment_and_blank_lines_are_not_code() -> None:
    assert _code_lines("# note\n\nx = 1\n    # indented note\ny = 2\n") == 2
