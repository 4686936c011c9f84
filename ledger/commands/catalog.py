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
