"""What changes for a config between two releases of one engine.  Pure: catalogs in, data out.

:func:`changes_between` compares the generated catalogs of two releases
(:func:`envknobs.catalog_release.load_release`) name by name, env vars and server flags
alike, and says for each name that changed:

* ``removed`` — declared by the old release, not by the new one (the new release's own
  removed table, or the hand-kept overlay, gives the status and the replacement);
* ``renamed`` — removed with a replacement the new release's table calls a rename;
  ``inverts`` when the replacement says the opposite (``ENABLE`` <-> ``DISABLE``,
  ``--x`` <-> ``--no-x``): a value is then translated (:func:`translated_value`), never
  copied;
* ``deprecated`` — still read by the new release but marked deprecated there and not in
  the old one (with the replacement where the release names one);
* ``default`` — declared by both with another default (``old_default`` -> ``new_default``);
* ``new`` — declared by the new release only, and hinted perf (the catalog's class hint,
  the generic catalogs' hint for the name, or the release's own doc speaking of
  throughput / latency / performance): the knobs an operator upgrading for speed wants
  to look at.  Other new names are left out (a release adds dozens).

Decisions (the issue was silent): a name the old release did not declare either is no
change of this upgrade (it is a doctor finding of the file, not the upgrade's); a
release without a bundled catalog is planned with the nearest bundled one, which
:func:`stand_in` names so the caller can warn (never refuse).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from dataclasses import field

from envknobs.catalog_release import bundled_releases
from envknobs.catalog_release import default_of
from envknobs.catalog_release import deprecated_names
from envknobs.catalog_release import load_release
from envknobs.flags import is_flag_name
from envknobs.registry import FALSE_WORDS
from envknobs.registry import TRUE_WORDS
from envknobs.registry import KnobError

CHANGES = ("removed", "renamed", "deprecated", "default", "new")
_PERF_WORDS = re.compile(r"\b(throughput|latency|performance|faster|speed ?up)\b", re.I)


@dataclass(frozen=True)
class NameChange:
    """One name whose meaning changes between the two releases (fields per ``change``)."""

    name: str
    change: str  # one of CHANGES
    replacement: str | None = None  # removed / renamed / deprecated: what to use instead
    inverts: bool = False  # renamed: the new name means the opposite
    note: str = ""
    old_default: object = None  # default / new: the defaults on each side
    new_default: object = None
    doc: str = ""

    def to_dict(self) -> dict:
        d = {"name": self.name, "change": self.change}
        for key in ("replacement", "note", "doc"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.inverts:
            d["inverts"] = True
        if self.change in ("default", "new"):
            d["old_default"], d["new_default"] = _plain(self.old_default), _plain(self.new_default)
        return d


def _plain(value: object) -> object:
    """A default as JSON holds it (a computed default is its words)."""
    if isinstance(value, tuple):
        return list(value)
    return str(value) if getattr(value, "computed", False) else value


@dataclass(frozen=True)
class ReleaseChanges:
    engine: str
    old: str
    new: str
    changes: dict[str, NameChange] = field(default_factory=dict)

    def of(self, change: str) -> list[NameChange]:
        return [c for c in self.changes.values() if c.change == change]

    def get(self, name: str) -> NameChange | None:
        return self.changes.get(name)


def stand_in(engine: str, version: str) -> str | None:
    """``version`` itself when a catalog is bundled for it; else the nearest bundled release
    at or below it (else above it); None when the engine has none."""
    known = bundled_releases(engine)
    if version in known:
        return version
    near = nearest(engine, version)
    return near[0] if near else None


def nearest(engine: str, version: str) -> list[str]:
    """The bundled releases closest to ``version``: the one below it first, then the one
    above (``envknobs.timeline.nearest_releases`` where that module exists)."""
    try:
        from envknobs.timeline import nearest_releases  # type: ignore[import-not-found]
    except ImportError:
        nearest_releases = None
    if nearest_releases is not None:
        return [v for v in nearest_releases(engine, version) if v]
    known = bundled_releases(engine)
    key = version_key(version)
    below = [v for v in known if version_key(v) <= key]
    above = [v for v in known if version_key(v) > key]
    return [*below[-1:], *above[:1]]


def version_key(version: str) -> tuple:
    """A release's order: ``0.5.7`` < ``0.5.7.post1`` < ``0.5.10`` < ``0.13.0``."""
    parts = re.findall(r"\d+|[A-Za-z]+", version)
    return tuple((0, int(p)) if p.isdigit() else (-1 if p in ("rc", "a", "b", "dev") else 1, p)
                 for p in parts)


@functools.lru_cache(maxsize=16)
def changes_between(engine: str, old: str, new: str) -> ReleaseChanges:
    """Every name whose fate changes from release ``old`` to ``new`` of ``engine`` (both
    bundled; KnobError names the bundled ones otherwise)."""
    old_knobs, old_flags, _ = load_release(engine, old)
    new_knobs, new_flags, new_removed = load_release(engine, new)
    old_dep, new_dep = deprecated_names(engine, old), deprecated_names(engine, new)
    declared_old = {k.name: k for k in [*old_knobs, *old_flags]}
    declared_new = {k.name: k for k in [*new_knobs, *new_flags]}
    out: dict[str, NameChange] = {}
    for name, was in declared_old.items():
        now = declared_new.get(name)
        if now is None:
            out[name] = _gone(name, new_removed.get(name) or {})
        elif name in new_dep and name not in old_dep:
            repl, note = new_dep[name]
            out[name] = NameChange(name, "deprecated", repl or None, note=note)
        elif _differs(was, now):
            out[name] = NameChange(name, "default",
                                   old_default=default_of(f"{engine}=={old}", name),
                                   new_default=default_of(f"{engine}=={new}", name),
                                   doc=now.doc or "")
    for name, now in declared_new.items():
        if name not in declared_old and _perf_hinted(engine, now):
            out[name] = NameChange(name, "new", new_default=default_of(f"{engine}=={new}", name),
                                   doc=now.doc or "")
    return ReleaseChanges(engine, old, new, dict(sorted(out.items())))


def _gone(name: str, item: dict) -> NameChange:
    status = str(item.get("status") or "removed")
    repl = item.get("replacement") or None
    note = str(item.get("note") or "")
    if "renamed" in status and repl:
        inverts = bool(item["inverts"]) if "inverts" in item else inverted(name, repl)
        return NameChange(name, "renamed", repl, inverts=inverts, note=note)
    if status.startswith("deprecated"):
        return NameChange(name, "deprecated", repl, note=note)
    return NameChange(name, "removed", repl, note=note)


def _differs(was, now) -> bool:
    """Whether the default moved (a switch's absent default is off: None is False)."""
    a, b = was.default, now.default
    if was.type == "bool" and now.type == "bool":
        return bool(a) != bool(b)
    return a != b or type(a) is not type(b) and not (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b)


def _perf_hinted(engine: str, declared) -> bool:
    if declared.class_hint == "perf":
        return True
    generic = _generic_hint(engine, declared.name)
    if generic is not None:
        return generic == "perf"
    return bool(_PERF_WORDS.search(declared.doc or ""))


def _generic_hint(engine: str, name: str) -> str | None:
    """The hand-written catalogs' class hint for ``name`` (None: they do not say)."""
    from envknobs.catalog import default_registry
    from envknobs.catalog import lookup_flag

    declared = lookup_flag(name, engine) if is_flag_name(name) else default_registry().get(name)
    return None if declared is None else declared.class_hint


_SIDES = (("ENABLE", "DISABLE"), ("DISABLE", "ENABLE"))


def inverted(old: str, new: str) -> bool:
    """Whether the rename ``old`` -> ``new`` says the opposite: ``..._DISABLE_X`` ->
    ``..._ENABLE_X``, ``--enable-x`` -> ``--disable-x``, ``--x`` -> ``--no-x``."""
    a, b = _words(old), _words(new)
    if not a or not b:
        return False
    if a[0] == "NO" and a[1:] == b or b[0] == "NO" and b[1:] == a:
        return True
    for this, that in _SIDES:
        if this in a and that in b:
            i, j = a.index(this), b.index(that)
            if a[i + 1:] == b[j + 1:]:
                return True
    return False


def _words(name: str) -> list[str]:
    words = re.split(r"[-_]+", name.strip("-").upper())
    while words and words[0] in ("SGLANG", "SGL", "VLLM"):
        words = words[1:]
    return words


def translated_value(value: str | None, inverts: bool) -> str | None:
    """The value for the new name: the same, or for an inverting rename the opposite
    boolean in the same spelling (``1`` -> ``0``, ``true`` -> ``false``, ``True`` ->
    ``False``); a value that is no boolean cannot be translated (KnobError)."""
    if value is None or not inverts:
        return value
    pairs = {"1": "0", "0": "1", "true": "false", "false": "true", "yes": "no", "no": "yes",
             "on": "off", "off": "on", "y": "n", "n": "y"}
    word = value.strip().lower()
    if word not in pairs or (word not in TRUE_WORDS and word not in FALSE_WORDS):
        raise KnobError(f"{value!r} is not a boolean: the renamed knob means the opposite, "
                        "translate it by hand")
    out = pairs[word]
    if value.strip().isupper():
        return out.upper()
    return out.capitalize() if value.strip()[:1].isupper() else out


__all__ = ["CHANGES", "NameChange", "ReleaseChanges", "changes_between", "inverted", "nearest",
           "stand_in", "translated_value", "version_key"]
