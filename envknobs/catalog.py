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

from envknobs.registry import Knob
from envknobs.registry import KnobError
from envknobs.registry import Registry
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value

_FIELDS = ("name", "type", "default", "doc", "class_hint", "min", "max", "choices", "unit", "tags")


class CatalogError(KnobError):
    """A catalog file is malformed; the message names the file and, when known, the line."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = path, problem, line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {problem}")


@functools.lru_cache(maxsize=1)
def _loader() -> tuple[Callable[[str], Any], tuple[type[Exception], ...]]:
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


def _item_line(text: str, index: int) -> int | None:
    """Line of the ``index``-th item of ``knobs`` (error path only: it re-parses)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="rt").load(text)
        return int(doc["knobs"].lc.item(index)[0]) + 1
    except (YAMLError, KeyError, IndexError, TypeError, AttributeError):
        return None  # best effort: the message is still useful without a line


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _knob_from(item: Any) -> Knob:
    if not isinstance(item, dict):
        raise KnobError(f"a knob must be a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - set(_FIELDS), key=str)
    if unknown:
        raise KnobError(
            f"unknown field(s) {', '.join(map(str, unknown))} (allowed: {', '.join(_FIELDS)})"
        )
    name = item.get("name")
    if not isinstance(name, str):
        raise KnobError("a knob needs a string name")
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
    knob = Knob(
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
    if knob.default is not None:  # a default the knob's own rules refuse is a typo
        check_knob_value(_value_text(knob.default))
        knob.parse(_value_text(knob.default))
    return knob


def load_catalog(path: str | Path) -> Registry:
    """Load one catalog file into a :class:`Registry`.

    Raises :class:`CatalogError` (a ``KnobError``) naming the file and line of the
    problem: unreadable file, invalid YAML, a missing ``knobs`` list, a bad or duplicate
    knob.
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(where, f"cannot read the catalog: {e}") from None
    load, yaml_errors = _loader()
    try:
        data = load(text)
    except yaml_errors as e:  # both loaders mark the line of the problem
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CatalogError(where, f"invalid YAML: {problem}", line) from None
    if not isinstance(data, dict) or not isinstance(data.get("knobs"), list):
        raise CatalogError(where, "a catalog is a mapping with a 'knobs' list")
    registry = Registry()
    for index, item in enumerate(data["knobs"]):
        try:
            knob = _knob_from(item)
            if knob.name in registry:
                raise KnobError(f"knob {knob.name} is declared twice")
            registry.add(knob)
        except KnobError as e:
            raise CatalogError(where, str(e), _item_line(text, index)) from None
    return registry


def bundled_catalogs() -> list[Path]:
    """The catalog files shipped in ``envknobs/catalogs``, sorted by name."""
    folder = resources.files("envknobs") / "catalogs"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml"))


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


__all__ = [
    "CatalogError",
    "bundled_catalogs",
    "check_assignment",
    "default_registry",
    "layered",
    "load_catalog",
]
