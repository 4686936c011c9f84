"""The house has no import cycles, and `ledger --help` stays light.

Two checks.  The static one reads every module's imports (top-level *and* the lazy ones
inside functions) and fails on any cycle between modules or between packages, naming it.
The dynamic one imports each module alone in a fresh interpreter, which is where a cycle
of top-level imports shows as an ImportError (only for the module that enters it first).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ledger", "envknobs", "backups", "engine")
HEAVY = ("torch", "pandas", "matplotlib", "scipy")
# ``ledger --help`` parses no file and runs no git: the library behind the commands (the
# model, the formats, the store, YAML, GitPython) loads only when a command runs.
NOT_FOR_HELP = ("envknobs", "backups", "ruamel", "git", "jinja2", "ledger.core.model",
                "ledger.store", "ledger.commands", "ledger.patches")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "scripts" not in path.parts and path.name != "__main__.py":
                found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules ``name`` imports, resolved to modules (not names in them)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):  # a package's own parents
                out.add(t)
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node, except those under ``if TYPE_CHECKING:`` (annotations never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in ast.walk(child))
            continue
        yield node
        yield from _runtime_nodes(node)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph``, as the list of nodes around it, or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        colour[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if colour.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not colour.get(m) and (found := visit(m)):
                return found
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(graph):
        if not colour.get(n) and (found := visit(n)):
            return found
    return None


def _graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in MODULES.items()}


def test_no_cycle_between_modules():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _package_graph(modules: dict[str, set[str]], inits: set[str]) -> dict[str, set[str]]:
    """Package -> the packages its modules import (``inits``: the modules that are
    packages).  A package's own top-level modules (``ledger/errors.py``) are that package,
    so ``ledger.errors`` importing ``ledger.core`` while ``ledger.core`` imports
    ``ledger.errors`` is a cycle.  The engine alone may have a parent package and its
    sub-packages lean on each other (``engine/config.py`` and ``engine.model``): it is a
    model package, not a stack of layers."""
    def pkg(m: str) -> str:
        return m if m in inits else m.rpartition(".")[0]

    def parent_child(a: str, b: str) -> bool:
        return a.startswith("engine") and (a.startswith(b + ".") or b.startswith(a + "."))

    graph: dict[str, set[str]] = {}
    for m, deps in modules.items():
        graph.setdefault(pkg(m), set()).update(
            pkg(d) for d in deps if pkg(d) != pkg(m) and not parent_child(pkg(m), pkg(d))
        )
    return graph


def test_no_cycle_between_packages():
    inits = {m for m, path in MODULES.items() if path.name == "__init__.py"}
    cycle = _cycle(_package_graph(_graph(), inits))
    assert cycle is None, "package cycle: " + " -> ".join(cycle)


def test_the_package_check_sees_a_cycle_through_a_top_level_module():
    # ledger.errors (package "ledger") -> ledger.core.display; ledger.core.model -> errors
    modules = {"ledger.errors": {"ledger.core.display"}, "ledger.core.display": set(),
               "ledger.core.model": {"ledger.errors"}}
    inits = {"ledger", "ledger.core"}
    assert _cycle(_package_graph(modules, inits)) == ["ledger", "ledger.core", "ledger"]
    engine = {"engine.config": {"engine.model.llama"}, "engine.model.llama": {"engine.config"}}
    assert _cycle(_package_graph(engine, {"engine", "engine.model"})) is None


def test_envknobs_depends_on_nothing_of_ours():
    for name, deps in _graph().items():
        if name.startswith("envknobs"):
            bad = sorted(d for d in deps if not d.startswith("envknobs"))
            assert not bad, f"{name} imports {bad}"
        if name.startswith("engine"):
            bad = sorted(d for d in deps if d.startswith(("ledger", "backups")))
            assert not bad, f"{name} imports {bad}: the engine never imports the ledger"


def test_the_checker_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    lazy = ast.parse("def f():\n    import ledger.cli\nif TYPE_CHECKING:\n    import ledger.store\n")
    names = [a.name for n in _runtime_nodes(lazy) if isinstance(n, ast.Import) for a in n.names]
    assert names == ["ledger.cli"]


def test_every_module_imports_alone_in_a_fresh_interpreter():
    # One interpreter per module (a cycle shows only for the module that enters it first);
    # the engine's modules, which all pay for torch, share a process pool of two.
    names = sorted(MODULES)
    code = "import importlib, sys; importlib.import_module(sys.argv[1])"
    procs = []
    failures = []
    for name in names:
        procs.append((name, subprocess.Popen([sys.executable, "-c", code, name], cwd=ROOT,
                                             stderr=subprocess.PIPE, text=True)))
        if len(procs) >= 4:
            failures += _reap(procs.pop(0))
    for p in procs:
        failures += _reap(p)
    assert not failures, "\n\n".join(failures)


def _reap(item) -> list[str]:
    name, proc = item
    _, err = proc.communicate(timeout=120)
    return [f"{name}:\n{err.strip().splitlines()[-1] if err.strip() else proc.returncode}"] \
        if proc.returncode else []


@pytest.mark.parametrize("module", ["ledger.cli"])
def test_help_path_imports_nothing_heavy(module):
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print(' '.join(sorted(sys.modules)))"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    heavy = sorted({m.split(".")[0] for m in out} & set(HEAVY))
    assert not heavy, f"importing {module} pulls in {heavy}"
    library = sorted(m for m in out if m in NOT_FOR_HELP or m.startswith(
        tuple(f"{n}." for n in NOT_FOR_HELP)))
    assert not library, f"importing {module} (ledger --help) loads {library}"
