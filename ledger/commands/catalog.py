"""The knob catalogs the commands check values against and name knobs from."""

from __future__ import annotations


def knob_registry():
    """The bundled catalogs plus the bundled engine's own knobs (its declarations win)."""
    from envknobs.catalog import default_registry

    try:
        from engine.knobs import REGISTRY
    except ImportError:  # installed without the engine
        REGISTRY = None
    return default_registry(REGISTRY)


def knob_defaults(targets: dict, entries) -> dict[tuple[str, str], object]:
    """(target, knob) -> the engine's default, for the knob entries with an unset side.

    The target's declared ``engine`` release decides (envknobs.catalog_release); else the
    bundled catalogs.  Catalogs load only when some entry has an unset side.
    """
    wanted = {(e.target, e.knob) for e in entries
              if e.kind == "knob" and (e.before is None or e.after is None
                                       or any(p.get("before") is None for p in (e.places or {}).values()))}
    if not wanted:
        return {}
    from envknobs.catalog_release import default_of

    registry = knob_registry()
    out = {}
    for target, knob in wanted:
        t = targets.get(target)
        default = default_of(getattr(t, "engine", None), knob, registry)
        if default is not None:
            out[(target, knob)] = default
    return out


def class_warnings(knob: str, cls: str) -> list[str]:
    """The catalog's class hint against the class the entry is recorded with."""
    from envknobs.catalog import lookup_flag
    from envknobs.catalog_release import class_hint_warnings
    from envknobs.flags import is_flag_name

    declared = lookup_flag(knob) if is_flag_name(knob) else knob_registry().get(knob)
    return class_hint_warnings(declared, cls)


def catalog_class(knob: str) -> str | None:
    """The class the catalog says changing ``knob`` usually is (a liveness knob: bugfix),
    or None when it does not say (``ledger adopt`` then asks the operator)."""
    from envknobs.catalog import lookup_flag
    from envknobs.flags import is_flag_name

    declared = lookup_flag(knob) if is_flag_name(knob) else knob_registry().get(knob)
    if declared is None:
        return None
    if "liveness" in declared.tags:
        return "bugfix"
    return declared.class_hint if declared.class_hint in ("perf", "bugfix") else None


def name_defaults(engine: str | None, names) -> dict[str, object]:
    """Knob or flag name -> its default (``engine``'s release first, then the catalogs)."""
    from envknobs.catalog_release import default_of

    registry = knob_registry()
    return {n: default_of(engine, n, registry) for n in names}
