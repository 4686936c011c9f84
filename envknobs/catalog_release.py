"""Version-aware knob checks against the generated per-release catalogs.

A target or workspace names its engine as ``sglang==0.5.23``; :func:`release_warnings`
then says, for one knob or flag, whether that release knows it (closest names if not),
whether it was removed / renamed / deprecated there (naming the replacement, from the
release's own tables, the hand-kept ``catalogs/overlay/removed.yaml``, or because an older
bundled release declared it and this one does not), and whether the value has the type
and choices that release's grammar accepts.  Catalogs load lazily, on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from envknobs.catalog import _knob_from
from envknobs.catalog import _loader
from envknobs.flags import FlagRegistry
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import Registry

RELEASES = Path(__file__).resolve().parent / "catalogs" / "releases"
OVERLAY = Path(__file__).resolve().parent / "catalogs" / "overlay" / "removed.yaml"
_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


def parse_engine(spec: str) -> tuple[str, str]:
    """``sglang==0.5.23`` -> ``("sglang", "0.5.23")``; KnobError naming what is bundled."""
    engine, sep, version = (spec or "").partition("==")
    if not sep or engine not in _NAMES or not version:
        raise KnobError(f"engine {spec!r}: write it as sglang==X or vllm==X")
    return engine, version


def bundled_releases(engine: str) -> list[str]:
    """Versions of ``engine`` with a generated catalog, oldest first."""
    def key(v: str) -> tuple:
        return tuple(int(p) if p.isdigit() else 0 for p in v.replace("post", ".").split("."))

    names = [p.stem.split("-", 1)[1] for p in RELEASES.glob(f"{engine}-*.yaml")]
    return sorted(names, key=key)


@functools.lru_cache(maxsize=8)
def load_release(engine: str, version: str) -> tuple[Registry, FlagRegistry, dict[str, dict]]:
    """(env knobs, flags, removed names) of one bundled release."""
    path = RELEASES / f"{engine}-{version}.yaml"
    if not path.is_file():
        known = ", ".join(bundled_releases(engine)) or "none"
        raise KnobError(f"no bundled catalog for {engine}=={version} (bundled: {known})")
    load, _ = _loader()
    data = load(path.read_text(encoding="utf-8"))
    knobs, flags = Registry(), FlagRegistry()
    for item in data["knobs"]:
        knobs.add(_knob_from({k: v for k, v in item.items() if k != "deprecated"}))
    for item in data["flags"]:
        flags.add(_knob_from({k: v for k, v in item.items() if k != "deprecated"}, engine))
    removed = {r["name"]: r for r in data["removed"]}
    overlay = load(OVERLAY.read_text(encoding="utf-8")) or {}
    for item in overlay.get("removed", []):
        if item.get("engine") == engine and item["name"] not in knobs and item["name"] not in flags:
            removed.setdefault(item["name"], item)
    for older in bundled_releases(engine):
        if older == version:
            break
        old_knobs, old_flags, _ = load_release(engine, older)
        for knob in [*old_knobs, *old_flags]:
            if knob.name not in knobs and knob.name not in flags:
                removed.setdefault(knob.name, {"name": knob.name, "status": f"gone since {older}, removed"})
    return knobs, flags, removed


def resolve_prefix(flags: FlagRegistry, name: str) -> str | None:
    """argparse's abbreviation rule: a unique prefix of one flag names that flag."""
    key = name.lstrip("-").replace("_", "-")
    hits = {flags.get(k).name for k in flags._keys if k.startswith(key)}  # noqa: SLF001
    return hits.pop() if len(hits) == 1 else None


def release_warnings(spec: str, name: str, value: str | None) -> list[str]:
    """Warnings for setting ``name`` to ``value`` on a target running engine ``spec``."""
    engine, version = parse_engine(spec)
    knobs, flags, removed = load_release(engine, version)
    label = f"{_NAMES[engine]} {version}"
    gone = removed.get(name)
    if gone is not None:
        repl = gone.get("replacement")
        use = f" (use {repl})" if repl else (f" ({gone['note']})" if gone.get("note") else "")
        return [f"{name}: {gone.get('status', 'removed')} in {label}{use}"]
    registry = flags if is_flag_name(name) else knobs
    declared = registry.get(name)
    if declared is None and registry is flags and name.startswith("--no-"):
        base = flags.get("--" + name[5:])  # BooleanOptionalAction's `--no-x`: x set false
        if base is not None and base.negatable:
            return []
    if declared is None and registry is flags:
        full = resolve_prefix(flags, name)
        if full is not None:
            return [f"{name}: argparse reads it as {full} in {label}"]
    if declared is None:
        close = registry.closest(name)
        hint = f"closest: {', '.join(close)}" if close else "no close match"
        return [f"{name}: unknown to {label} ({hint})"]
    if value is None or value == "":
        return []
    try:
        declared.validate(value)
    except KnobError as e:
        raise KnobError(f"{e} (as {label} reads it)") from None
    return []


def checked_for_engine(spec: str | None, name: str, value: str | None,
                       generic: Callable[[], list[str]]) -> list[str]:
    """Warnings of setting ``name`` on a target that declares engine ``spec``.

    Without ``spec`` this is the ``generic`` (all-catalogs) check.  With one, a name the
    release knows, or lists as removed/renamed/deprecated, gets the release's verdict
    only (its types, defaults and grammar); any other name — the bundled engine's own
    knobs, a name only the hand-written catalogs know — gets the generic check, and if
    that does not know it either, the release's "unknown to" warning with its closest
    names.  A spec without a bundled catalog is a warning, then the generic check.
    """
    if spec is None:
        return generic()
    try:
        found = release_warnings(spec, name, value)
    except KnobError as e:
        if "no bundled catalog" not in str(e):
            raise
        return [str(e), *generic()]
    if not any(" unknown to " in w for w in found):
        return found
    general = generic()
    return found if any(w.startswith("unknown ") for w in general) else general


def class_hint_warnings(declared, cls: str) -> list[str]:
    """A warning when ``cls`` (perf / bugfix) is not what the catalog says changing the knob
    usually is: a liveness knob recorded as perf would be taken off the table by
    ``revert --perf-only`` like any tuning."""
    if declared is None or not cls:
        return []
    hint = declared.class_hint
    liveness = "liveness" in declared.tags
    if cls == "perf" and (liveness or hint == "bugfix"):
        what = "a liveness knob" if liveness else "usually a bugfix"
        return [f"{declared.name} is {what} (catalog class hint: {hint or 'liveness'}); as perf, "
                "`revert --perf-only` would take it off the table"]
    if hint is not None and hint != cls and not liveness:
        return [f"{declared.name} is usually {hint} (catalog class hint), recorded as {cls}"]
    return []


_PREFIXES = {"sglang": ("SGLANG_", "SGL_"), "vllm": ("VLLM_",)}


def release_findings(spec: str, values: dict[str, str | None]) -> list[str]:
    """What :func:`release_warnings` says of each knob and flag set in one file (doctor).

    A file also sets variables no engine reads (``MODEL``, ``PATH``): a name unknown to the
    release is reported only when it is a flag or has the engine's prefix (``VLLM_``).
    """
    engine, _ = parse_engine(spec)
    out = []
    for name in sorted(values):
        try:
            found = release_warnings(spec, name, values[name])
        except KnobError as e:
            found = [str(e)]
        if any(" unknown to " in w for w in found) and not (
                is_flag_name(name) or name.startswith(_PREFIXES[engine])):
            continue
        out.extend(found)
    return out


def default_of(spec: str | None, name: str, generic: Registry | None = None) -> object:
    """What the engine uses for ``name`` when it is unset: the default in release ``spec``
    (when it declares the name), else the ``generic`` registry's or the bundled flag
    catalogs'; None when unset means computed at runtime or nobody knows."""
    if spec is not None:
        try:
            engine, version = parse_engine(spec)
            knobs, flags, _ = load_release(engine, version)
        except KnobError:  # no bundled catalog for it: the generic catalogs still know much
            knobs, flags = Registry(), FlagRegistry()
        declared = (flags if is_flag_name(name) else knobs).get(name)
        if declared is not None:
            return declared.default
    if is_flag_name(name):
        from envknobs.catalog import lookup_flag

        declared = lookup_flag(name)
    else:
        declared = generic.get(name) if generic is not None else None
    return None if declared is None else declared.default


def release_default(spec: str, name: str) -> object:
    """The default of ``name`` in release ``spec`` (None: unset, computed or unknown)."""
    engine, version = parse_engine(spec)
    knobs, flags, _ = load_release(engine, version)
    declared = (flags if is_flag_name(name) else knobs).get(name)
    return None if declared is None else declared.default
