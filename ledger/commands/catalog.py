"""The knob catalogs the commands check values against and name knobs from."""

from __future__ import annotations

from typing import Mapping


def knob_registry():
    """The bundled catalogs plus the bundled engine's own knobs (its declarations win)."""
    from envknobs.catalog import default_registry

    try:
        from engine.knobs import REGISTRY
    except ImportError:  # installed without the engine
        REGISTRY = None
    return default_registry(REGISTRY)


def _bundled_names() -> frozenset[str]:
    try:
        from engine.knobs import REGISTRY
    except ImportError:  # installed without the engine
        return frozenset()
    return frozenset(k.name for k in REGISTRY)


def engine_of(ws, target, text: str | None = None) -> str | None:
    """The engine release that reads ``target``'s file, ``sglang==0.5.23``: the target's own
    ``engine:`` in ledger.yaml; else the one release the file names itself (an image tag,
    a pip pin, ``pip show`` output: envknobs.catalog_release.release_of; ``text`` is the
    file's, read here when not given); else ledger.yaml's top-level ``engine:``; else None.
    A file naming several releases names none (``doctor`` says which lines)."""
    if target.engine:
        return target.engine
    from envknobs.catalog_release import release_of

    return release_of(None, _file_text(ws, target) if text is None else text, ws.config.engine)


def _detect(text: str | None) -> list[tuple[str, int]]:
    from envknobs.catalog_release import named_releases

    return named_releases(text)


_DETECT_LIMIT = 1 << 20  # a file's first MiB is where it names its engine


def _detection_text(raw: bytes) -> str:
    """The text :func:`engine_of` reads a release from, of a file's bytes."""
    return raw[:_DETECT_LIMIT].decode("utf-8", "replace")


def _file_text(ws, target) -> str | None:
    try:
        with open(ws.target_path(target), "rb") as f:
            return _detection_text(f.read(_DETECT_LIMIT))
    except (OSError, ValueError, LookupError):
        return None  # an unreadable file is reported by whatever reads it for real


def engine_findings(ws, target, text: str | None) -> list[str]:
    """A file without a declared engine that names several releases: each with its line."""
    found = _detect(text) if not target.engine else []
    if len({spec for spec, _ in found}) < 2:
        return []
    return [f"names several engine releases ({', '.join(f'{s} at line {n}' for s, n in found)}): "
            "none is used; declare one with `engine:` for the target in ledger.yaml"]


def _unset_side(e) -> bool:
    """Whether a knob entry has an unset side (before, after, or a place's before)."""
    if e.before is None or e.after is None:
        return True
    return bool(e.places) and any(p.get("before") is None for p in e.places.values())


def knob_defaults(ws, entries, raws: Mapping[str, bytes] | None = None
                  ) -> dict[tuple[str, str], object]:
    """(target, knob) -> the engine's default, for the knob entries with an unset side.

    The target's engine release (:func:`engine_of`) decides (envknobs.catalog_release);
    else the bundled catalogs.  Catalogs load only when some entry has an unset side.
    ``raws``: target name -> its file's bytes, where the caller read the file already (a
    target not in it is read here).
    """
    wanted = {(e.target, e.knob) for e in entries if e.kind == "knob" and _unset_side(e)}
    if not wanted:
        return {}
    from envknobs.catalog_release import default_of

    registry = knob_registry()
    bundled = _bundled_names()
    out = {}
    specs: dict[str, str | None] = {}
    for target, knob in wanted:
        t = ws.config.targets.get(target)
        if target not in specs:
            raw = (raws or {}).get(target)
            specs[target] = (engine_of(ws, t, None if raw is None else _detection_text(raw))
                             if t is not None else ws.config.engine)
        default = default_of(specs[target], knob, registry)
        if knob in bundled:
            raw = (raws or {}).get(target)
            text = _detection_text(raw) if raw is not None else (
                _file_text(ws, t) if t is not None else None)
            default = bundled_release_default(text, knob, default)
        if default is not None:
            out[(target, knob)] = default
    return out


def bundled_release_default(text: str | None, knob: str, fallback: object) -> object:
    """The default of the bundled engine's ``knob`` in the release the file pins
    (``knob-ledger-engine==1.1.0`` on its launch line, envknobs.catalogs.bundled_engine), else
    ``fallback``.  A file pinning several releases, or one with no catalog, keeps the
    fallback: the pin it names is the engine's to refuse (it does, at start-up)."""
    if not text or "knob-ledger-engine" not in text:
        return fallback
    from envknobs.catalogs.bundled_engine import detect_pins
    from envknobs.catalogs.bundled_engine import load_release
    from envknobs.catalogs.bundled_engine import split_spec
    from envknobs.registry import KnobError

    pins = {spec for spec, _ in detect_pins(text)}
    if len(pins) != 1:
        return fallback
    try:
        declared = load_release(split_spec(pins.pop())).get(knob)
    except KnobError:
        return fallback
    return fallback if declared is None else declared.default


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
