"""Knob catalogs: YAML data files that declare the env knobs of real serving engines.

A catalog (``envknobs/catalogs/*.yaml``) is a mapping with a ``knobs`` list; each item
has the fields of :class:`~envknobs.registry.Knob`::

    knobs:
      - name: SGLANG_SM120_MMA_TARGET_CTAS
        type: int            # int | float | bool | str
        default: 256         # null: unset / computed at runtime
        min: 1               # optional: min, max (numbers) or choices (list)
        class_hint: perf     # perf | bugfix: what changing it usually is
        unit: CTAs
        tags: [liveness]     # optional, descriptive
        doc: One line.

:func:`default_registry` is every bundled catalog plus the knobs a caller declares in
code (the ledger passes the bundled engine's ``engine.knobs.REGISTRY``), cached.  :func:`check_assignment` is the
check ``ledger record`` runs before writing a value.

Loading is on the path of every ``ledger record``, so it uses libyaml (PyYAML's
``CSafeLoader``) when it is installed, which is ~10x faster than pure-Python
ruamel.yaml, and ruamel's safe loader otherwise; the catalogs only use plain YAML that
both read the same (a test checks it).  Line numbers for error messages are computed
only on the error path.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from envknobs.flags import Flag
from envknobs.flags import FlagRegistry
from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.parse_cache import kept
from envknobs.registry import Knob
from envknobs.registry import KnobError
from envknobs.registry import Registry
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value

_FIELDS = ("name", "type", "default", "doc", "class_hint", "min", "max", "choices", "unit", "tags")
_FLAG_FIELDS = (*_FIELDS, "aliases", "negatable", "nargs")
# Flag catalogs (server arguments, see envknobs.flags) are named `<engine>_flags.yaml`.
FLAG_CATALOG_SUFFIX = "_flags.yaml"


class CatalogError(KnobError):
    """A catalog file is malformed; the message names the file and, when known, the line."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = path, problem, line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {problem}")


@functools.lru_cache(maxsize=1)
def yaml_loader() -> tuple[Callable[[str], Any], tuple[type[Exception], ...]]:
    """The fastest safe YAML loader available, and the errors it raises."""
    try:
        import yaml  # PyYAML, only for its libyaml binding

        loader = yaml.CSafeLoader
    except (ImportError, AttributeError):
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        return YAML(typ="safe", pure=True).load, (YAMLError,)
    # CSafeLoader builds plain Python data only, never arbitrary objects.
    return (lambda text: yaml.load(text, Loader=loader)), (yaml.YAMLError,)


def _item_line(text: str, index: int, key: str = "knobs") -> int | None:
    """Line of the ``index``-th item of ``key`` (error path only: it re-parses)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="rt").load(text)
        return int(doc[key].lc.item(index)[0]) + 1
    except (YAMLError, KeyError, IndexError, TypeError, AttributeError):
        return None  # best effort: the message is still useful without a line


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def knob_from(item: Any, engine: str | None = None) -> Knob:
    """One catalog item as a Knob, or as a Flag when ``engine`` is given (a flag catalog)."""
    fields = _FIELDS if engine is None else _FLAG_FIELDS
    if not isinstance(item, dict):
        raise KnobError(f"a knob must be a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - set(fields), key=str)
    if unknown:
        raise KnobError(
            f"unknown field(s) {', '.join(map(str, unknown))} (allowed: {', '.join(fields)})"
        )
    name = item.get("name")
    if not isinstance(name, str):
        raise KnobError("a knob needs a string name")
    if engine is None:
        check_knob_name(name)
    for bound in ("min", "max"):
        v = item.get(bound)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
        ):
            raise KnobError(f"knob {name}: {bound} must be a finite number, got {v!r}")
    choices = item.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise KnobError(f"knob {name}: choices must be a list")
    tags = item.get("tags") or ()
    if not isinstance(tags, (list, tuple)):
        raise KnobError(f"knob {name}: tags must be a list")
    for text_field in ("doc", "unit", "class_hint", "type"):
        v = item.get(text_field)
        if v is not None and not isinstance(v, str):
            raise KnobError(f"knob {name}: {text_field} must be a string, got {v!r}")
    common = dict(
        name=name,
        type=item.get("type") or "",
        default=item.get("default"),
        doc=(item.get("doc") or "").strip(),
        class_hint=item.get("class_hint"),
        min=item.get("min"),
        max=item.get("max"),
        choices=tuple(_value_text(c) for c in choices) if choices is not None else None,
        unit=item.get("unit"),
        tags=tuple(str(t) for t in tags),
    )
    knob = Knob(**common) if engine is None else _flag_from(item, engine, common)
    if knob.default is not None:  # a default the knob's own rules refuse is a typo
        default = knob.default
        text = " ".join(map(_value_text, default)) if isinstance(default, list) else default
        check_knob_value(_value_text(text))
        knob.parse(_value_text(text))
    return knob


def _flag_from(item: dict, engine: str, common: dict) -> Flag:
    aliases = item.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise KnobError(f"flag {common['name']}: aliases must be a list of strings")
    negatable = item.get("negatable", False)
    if not isinstance(negatable, bool):
        raise KnobError(f"flag {common['name']}: negatable must be true or false")
    return Flag(
        **common, aliases=tuple(aliases), negatable=negatable, nargs=item.get("nargs"),
        engine=engine,
    )


def load_catalog(path: str | Path) -> Registry:
    """Load one catalog file into a :class:`Registry`.

    Raises :class:`CatalogError` (a ``KnobError``) naming the file and line of the
    problem: unreadable file, invalid YAML, a missing ``knobs`` list, a bad or duplicate
    knob.
    """
    return _load(path, "knobs")


def load_flag_catalog(path: str | Path) -> FlagRegistry:
    """Load one flag catalog (an ``engine`` name and a ``flags`` list) into a FlagRegistry.

    Items have the fields of a knob catalog plus ``aliases`` (other spellings, e.g.
    ``[--tensor-parallel-size]``), ``negatable`` (a ``--no-x`` form exists) and ``nargs``
    (``+``: several words).  Errors as for :func:`load_catalog`.
    """
    return _load(path, "flags")  # type: ignore[return-value]


def _load(path: str | Path, key: str) -> Registry:
    """One catalog file, kept by the application where it offers a place
    (:mod:`envknobs.parse_cache`)."""
    return kept(f"catalog {key}", Path(path), lambda: _parse(path, key))


def _parse(path: str | Path, key: str) -> Registry:
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(where, f"cannot read the catalog: {e}") from None
    load, yaml_errors = yaml_loader()
    try:
        data = load(text)
    except yaml_errors as e:  # both loaders mark the line of the problem
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CatalogError(where, f"invalid YAML: {problem}", line) from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise CatalogError(where, f"a catalog is a mapping with a {key!r} list")
    engine = None
    if key == "flags":
        engine = data.get("engine")
        if not isinstance(engine, str) or not engine:
            raise CatalogError(where, "a flag catalog names its 'engine'")
    registry: Registry = Registry() if engine is None else FlagRegistry()
    for index, item in enumerate(data[key]):
        try:
            knob = knob_from(item, engine)
            if knob.name in registry:
                raise KnobError(f"knob {knob.name} is declared twice")
            registry.add(knob)
        except KnobError as e:
            raise CatalogError(where, str(e), _item_line(text, index, key)) from None
    return registry


def bundled_catalogs() -> list[Path]:
    """The env knob catalog files shipped in ``envknobs/catalogs``, sorted by name."""
    return [p for p in _bundled() if not p.name.endswith(FLAG_CATALOG_SUFFIX)]


def bundled_flag_catalogs() -> list[Path]:
    """The flag catalog files (``<engine>_flags.yaml``) shipped in ``envknobs/catalogs``."""
    return [p for p in _bundled() if p.name.endswith(FLAG_CATALOG_SUFFIX)]


def _bundled() -> list[Path]:
    folder = resources.files("envknobs") / "catalogs"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml"))


@functools.lru_cache(maxsize=1)
def flag_registries() -> dict[str, FlagRegistry]:
    """Engine name (``sglang``, ``vllm``) -> its bundled flags, cached for the process."""
    out: dict[str, FlagRegistry] = {}
    for path in bundled_flag_catalogs():
        registry = load_flag_catalog(path)
        first = next(iter(registry), None)
        engine = first.engine if first else path.name[: -len(FLAG_CATALOG_SUFFIX)]
        out[engine] = registry  # type: ignore[assignment]
    return out


def lookup_flag(name: str, engine: str | None = None) -> Flag | None:
    """The catalog's declaration of flag ``name`` (any spelling: ``--mem-fraction-static``,
    ``mem_fraction_static``, the ``--config`` YAML key ``mem-fraction-static``, an alias).

    ``engine`` picks that engine's catalog; without it SGLang's is tried first, then the
    others in name order.  None when no catalog declares it.
    """
    registries = flag_registries()
    if engine is not None:
        registry = registries.get(engine)
        return None if registry is None else registry.get(name)
    order = sorted(registries, key=lambda e: (e != "sglang", e))
    for e in order:
        found = registries[e].get(name)
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=4)
def default_registry(extra: Registry | None = None) -> Registry:
    """All bundled catalogs, plus ``extra`` layered last; cached for the process.

    ``extra`` is how a caller adds knobs declared in code — the ledger passes the bundled
    engine's ``engine.knobs.REGISTRY`` — so this package imports neither.  When ``extra``
    declares a knob a catalog also lists, its declaration wins: it is the code that
    actually reads the variable.
    """
    layers = [load_catalog(path) for path in bundled_catalogs()]
    return layered(*layers, *([extra] if extra is not None else []))


def layered(*registries: Registry) -> Registry:
    """One registry from several; a knob declared again in a later one replaces it."""
    knobs: dict[str, Knob] = {}
    for registry in registries:
        for knob in registry:
            knobs[knob.name] = knob
    return Registry(knobs.values())


def check_assignment(registry: Registry, knob: str, value: str | None) -> list[str]:
    """Check setting ``knob`` to ``value`` (``None``: unset) and return warnings.

    An unknown knob is a warning naming the closest known names; an empty value is a
    warning (engines read it as unset).  A bad name, a wrong type, a value out of range
    or not among the choices raises :class:`~envknobs.registry.KnobError` naming knob,
    value and rule.  Unsetting a knob is always fine.
    """
    if is_flag_name(knob):
        return check_flag_assignment(knob, value)
    check_knob_name(knob)
    if value is None:
        return []
    check_knob_value(value)
    declared = registry.get(knob)
    if declared is None:
        close = registry.closest(knob)
        hint = f"closest known: {', '.join(close)}" if close else "no close match in the catalogs"
        return [f"unknown knob {knob} ({hint})"]
    if value == "":
        default = declared.default
        return [
            f"{knob} is set to the empty string: engines read that as unset (default {default!r})"
        ]
    declared.validate(value)
    return []


def check_flag_assignment(flag: str, value: str | None, engine: str | None = None) -> list[str]:
    """:func:`check_assignment` for a launch-line flag (``--cuda-graph-max-bs``).

    An unknown flag is a warning naming the closest known flags.  A boolean flag takes
    ``true``/``false`` (and friends); ``false`` of a flag without a ``--no-`` form is
    refused, since such a flag is switched off by removing it (``--unset``).
    """
    check_flag_name(flag)
    if value is None:
        return []
    check_knob_value(value)
    declared = lookup_flag(flag, engine)
    if declared is None:
        close: list[str] = []
        for registry in flag_registries().values():
            close.extend(c for c in registry.closest(flag) if c not in close)
        hint = f"closest known: {', '.join(close[:3])}" if close else "no close match in the catalogs"
        return [f"unknown flag {flag} ({hint})"]
    declared.validate(value)
    if declared.is_switch and not declared.parse(value) and not declared.negatable:
        raise KnobError(
            f"{declared.name} is a switch without a --no- form: "
            "remove it with --unset instead of setting it false"
        )
    return []


__all__ = [
    "CatalogError",
    "bundled_catalogs",
    "bundled_flag_catalogs",
    "check_assignment",
    "check_flag_assignment",
    "flag_registries",
    "load_flag_catalog",
    "lookup_flag",
    "default_registry",
    "layered",
    "load_catalog",
]
