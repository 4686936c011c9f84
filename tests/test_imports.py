"""The house has no import cycles, and `ledger --help` stays light.

Two checks.  The static one reads every module's imports (top-level *and* the lazy ones
inside functions) and fails on any cycle between modules or between packages, naming it.
The dynamic one imports each module alone in a fresh interpreter, which is where a cycle
of top-level imports shows as an ImportError (only for the module that enters it first).
"""

from __future__ import annotations

import ast
import functools
import json
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
                "ledger.core.changes", "ledger.core.identifiers", "ledger.core.managed_file",
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


def _imports(name: str, path: Path, text: str | None = None) -> set[str]:
    """The project modules ``name`` imports, resolved to modules (not names in them).

    A module's own parent packages are loaded before it, so importing one of them is no
    edge, except where a name the package itself defines is taken from it
    (``from envknobs.formats.systemd import anchor_for_word`` in a module of that
    package): that needs the package's ``__init__`` to have run, a real dependency."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    text = path.read_text(encoding="utf-8") if text is None else text
    for node in _runtime_nodes(ast.parse(text)):
        named: list[str] = []  # the packages names are taken from
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
            named = [base for a in node.names if f"{base}.{a.name}" not in MODULES]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name and (t in named or not name.startswith(t + ".")):
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


@functools.cache
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


# The ledger's layers, top to bottom (docs/ARCHITECTURE.md, "Layers"; ledger/__init__.py).
# A module may import its own layer's package and any layer below it, never one above;
# the names on one row are peers and do not import each other.  envknobs, backups and
# the engine sit under all of them (any layer may use them; they never import the ledger).
LAYERS = (
    ("cli",),
    ("commands",),
    ("render",),
    ("live", "evidence"),
    ("store",),
    ("patches",),
    ("core", "git_runner"),
    ("errors",),
    ("procs", "values", "demo_tools"),
)


def _layer_of(module: str) -> str | None:
    """``ledger.store.txn`` -> ``store``; None outside the ledger and for ``ledger`` itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "ledger" and len(parts) > 1 else None


def layer_violations(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of ``graph`` that goes up the layers or across peers, and every ledger
    module whose layer is not in ``layers``, as one line each."""
    rank = {name: i for i, row in enumerate(layers) for name in row}
    found = []
    for module, deps in sorted(graph.items()):
        src = _layer_of(module)
        if src is None:
            continue
        if src not in rank:
            found.append(f"{module}: layer {src!r} is in no row of LAYERS (place it there "
                         "and in docs/ARCHITECTURE.md)")
            continue
        for dep in sorted(deps):
            dst = _layer_of(dep)
            if dst is None or dst == src or dst not in rank:
                continue
            if rank[dst] < rank[src]:
                found.append(f"{module} imports {dep}: {src} is below {dst}")
            elif rank[dst] == rank[src]:
                found.append(f"{module} imports {dep}: {src} and {dst} are peers")
    return found


def test_the_ledger_calls_down_its_layers_only():
    bad = layer_violations(_graph())
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_the_layer_check_sees_an_upward_and_a_peer_import():
    graph = {"ledger.core.model": {"ledger.store.txn", "ledger.errors", "envknobs.registry"},
             "ledger.live.probe": {"ledger.evidence.stats"},
             "ledger.cli.setup": {"ledger.commands.setup", "ledger.values"},
             "ledger.newthing": set()}
    assert layer_violations(graph) == [
        "ledger.core.model imports ledger.store.txn: core is below store",
        "ledger.live.probe imports ledger.evidence.stats: live and evidence are peers",
        ("ledger.newthing: layer 'newthing' is in no row of LAYERS (place it there and in "
         "docs/ARCHITECTURE.md)")]


def test_the_package_docstring_names_the_layer_order():
    import ledger

    order = " → ".join("/".join(row) for row in LAYERS)
    assert order in " ".join((ledger.__doc__ or "").split()), order


def test_a_name_taken_from_the_own_package_is_an_edge():
    # envknobs.formats.systemd imports .places (lazily), and places took names from the
    # package: a cycle the check must see; a submodule taken from the package is none.
    places = ROOT / "envknobs/formats/systemd/places.py"
    name = "envknobs.formats.systemd.places"
    text = "from envknobs.formats.systemd import anchor_for_word\n"
    assert _imports(name, places, text) == {"envknobs.formats.systemd"}
    text = "def f():\n    from envknobs.formats.systemd import execstart as ex\n"
    assert _imports(name, places, text) == {"envknobs.formats.systemd.execstart"}


def _benchmark_graph() -> dict[str, set[str]]:
    """The benchmarks' imports of each other: scripts, each importing a sibling by its bare
    name (their directory on ``sys.path``), inside functions included."""
    scripts = {p.stem: p for p in (ROOT / "benchmarks").glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in scripts.items():
        found = set()
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level:
                found.add((node.module or "").partition(".")[0])
            elif isinstance(node, ast.Import):
                found |= {a.name.partition(".")[0] for a in node.names}
        graph[name] = (found & scripts.keys()) - {name}
    return graph


def test_no_cycle_between_benchmarks():
    graph = _benchmark_graph()
    assert graph["engine_vs_hf"], "the benchmarks' sibling imports are no longer seen"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in benchmarks/: " + " -> ".join(cycle)


def test_the_checker_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    lazy = ast.parse("def f():\n    import ledger.cli\nif TYPE_CHECKING:\n    import ledger.store\n")
    names = [a.name for n in _runtime_nodes(lazy) if isinstance(n, ast.Import) for a in n.names]
    assert names == ["ledger.cli"]


# Each project module imported alone: one fresh interpreter (no module of ours loaded)
# imports the third-party libraries the project uses, then forks one child per module,
# which imports that module and nothing else of ours.  A child starts with the same
# project-free module table a fresh interpreter would have, so a top-level cycle still
# shows as an ImportError in the module that enters it first; what it saves is ~190
# interpreter starts, each paying again for torch, pandas and git (minutes on 2 cores).
_ALONE = r"""
import importlib, json, os, sys
names, preload, ours = json.loads(sys.argv[1]), json.loads(sys.argv[2]), tuple(sys.argv[3:])
for lib in preload:
    try:
        importlib.import_module(lib)
    except Exception:
        pass  # a child that needs it fails on it, naming it
assert not [m for m in sys.modules if m.split(".")[0] in ours], "a project module preloaded"
failures, running = {}, {}

def reap():
    pid, status = os.wait()
    name, fd = running.pop(pid)
    err = os.read(fd, 65536).decode(errors="replace").strip()
    os.close(fd)
    if status:
        failures[name] = err or f"exit status {status}"

for name in names:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            os._exit(0)
        except BaseException as e:
            os.write(w, f"{type(e).__name__}: {e}".encode()[-4000:])
            os._exit(1)
    os.close(w)
    running[pid] = (name, r)
    if len(running) >= 2:
        reap()
while running:
    reap()
print(json.dumps(failures))
"""


def _third_party() -> list[str]:
    """The modules of other libraries that ours import (``scipy.stats``, ``torch.nn``;
    the standard library's too, harmless), as far down as they are named."""
    found = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
    return sorted(m for m in found if m.split(".")[0] not in (*PACKAGES, "__future__"))


@pytest.mark.slow
def test_every_module_imports_alone():
    out = subprocess.run(
        [sys.executable, "-c", _ALONE, json.dumps(sorted(MODULES)), json.dumps(_third_party()),
         *PACKAGES], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    failures = json.loads(out.stdout.strip().splitlines()[-1])
    assert not failures, "\n\n".join(f"{name}:\n{err}" for name, err in failures.items())


def test_the_alone_check_sees_a_top_level_cycle(tmp_path):
    # a <-> b at top level: importing ``a`` alone fails (b's ``from a import X`` finds a
    # half-initialised a); the check must report it, and only for the module that fails.
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc.b import Y\nX = 1\n")
    (pkg / "b.py").write_text("from cyc.a import X\nY = 2\n")
    (pkg / "c.py").write_text("import json\n")
    out = subprocess.run(
        [sys.executable, "-c", _ALONE, json.dumps(["cyc.a", "cyc.c"]), json.dumps(["json"]),
         "cyc"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    failures = json.loads(out.stdout.strip().splitlines()[-1])
    assert list(failures) == ["cyc.a"] and "ImportError" in failures["cyc.a"]


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
