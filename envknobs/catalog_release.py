"""Version-aware knob checks against the generated per-release catalogs (each release's
catalog comes out of its engine's timeline, :mod:`envknobs.timeline`).

A target or workspace names its engine as ``sglang==0.5.23``; :func:`release_warnings`
then says, for one knob or flag, whether that release knows it (closest names if not),
whether it was removed / renamed / deprecated there (naming the replacement, from the
release's own tables, the hand-kept ``catalogs/overlay/removed.yaml``, or because an older
bundled release declared it and this one does not), and whether the value has the type
and choices that release's grammar accepts.  Catalogs load lazily, on first use.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from envknobs import timeline
from envknobs.catalog import knob_from
from envknobs.catalog import yaml_loader
from envknobs.parse_cache import kept
from envknobs.flags import FlagRegistry
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import Registry

OVERLAY = Path(__file__).resolve().parent / "catalogs" / "overlay" / "removed.yaml"
# the bundled engine too (envknobs.catalogs.bundled_engine writes its timeline)
_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "knob-ledger-engine": "knob-ledger-engine"}


def parse_engine(spec: str) -> tuple[str, str]:
    """``sglang==0.5.23`` -> ``("sglang", "0.5.23")``; KnobError naming what is bundled."""
    engine, sep, version = (spec or "").partition("==")
    if not sep or engine not in _NAMES or not version:
        raise KnobError(f"engine {spec!r}: write it as sglang==X, vllm==X or knob-ledger-engine==X")
    return engine, version


def bundled_releases(engine: str) -> list[str]:
    """Versions of ``engine`` in its timeline, oldest first."""
    return timeline.releases(engine)


def _release_data(engine: str, version: str) -> dict:
    """One release's catalog; KnobError naming the nearest catalogued releases when the
    timeline does not hold it (callers turn that into a warning, never a refusal)."""
    if version not in timeline.releases(engine):
        near = timeline.nearest_releases(engine, version)
        known = f"nearest catalogued: {', '.join(near)}" if near else "none catalogued"
        raise KnobError(f"no bundled catalog for {engine}=={version} ({known})")
    return timeline.release_catalog(engine, version)


_NOT_KNOB_KEYS = ("deprecated", "deprecated_note", "true_words")


@functools.lru_cache(maxsize=8)
def load_release(engine: str, version: str) -> tuple[Registry, FlagRegistry, dict[str, dict]]:
    """(env knobs, flags, removed names) of one bundled release (kept by the application,
    where it offers a place: :mod:`envknobs.parse_cache`)."""
    return kept(f"release {engine} {version}", timeline.TIMELINES / f"{engine}.json",
                lambda: _build_release(engine, version), OVERLAY)


def _build_release(engine: str, version: str) -> tuple[Registry, FlagRegistry, dict[str, dict]]:
    data = _release_data(engine, version)
    load, _ = yaml_loader()
    knobs, flags = Registry(), FlagRegistry()
    for item in data["knobs"]:
        knobs.add(_declared(item))
    for item in data["flags"]:
        flags.add(_declared(item, engine))
    removed = {r["name"]: r for r in data["removed"]}
    overlay = load(OVERLAY.read_text(encoding="utf-8")) or {}
    for item in overlay.get("removed", []):
        if item.get("engine") == engine and item["name"] not in knobs and item["name"] not in flags:
            removed.setdefault(item["name"], item)
    for name, last in _gone_before(engine, version):
        new = timeline.renamed_by_prefix(name, data.get("prefix_renames"))
        if new is not None and knobs.get(new) is not None:  # SGL_X, read as SGLANG_X
            removed.setdefault(name, {"name": name, "status": "deprecated", "replacement": new,
                                      "note": f"read as {new}"})
        elif name not in knobs and name not in flags:
            removed.setdefault(name, {"name": name, "status": f"last in {last}, removed"})
    return knobs, flags, removed


def _declared(item: dict, engine: str | None = None):
    """One catalogued name as a Knob (a Flag with ``engine``).  A default its own grammar
    refuses (SGLang 0.4's ``--hicache-io-backend`` default ``""`` with choices
    ``direct``/``kernel``: argparse never checks a default) is kept as no default —
    the engine starts without it, so it is nothing a file could set."""
    fields = {k: v for k, v in item.items() if k not in _NOT_KNOB_KEYS}
    try:
        return knob_from(fields, engine)
    except KnobError:
        return knob_from({**fields, "default": None}, engine)


def _gone_before(engine: str, version: str) -> list[tuple[str, str]]:
    """(name, the last release before ``version`` that declared it) of each env var and
    flag an older catalogued release declares and ``version`` does not."""
    data = timeline.timeline(engine)
    key = timeline.version_key(version)
    out = []
    for section in ("knobs", "flags"):
        for name, entry in data[section].items():
            before = [b for _, b in entry["in"] if timeline.version_key(b) < key]
            if before and not any(timeline.version_key(a) <= key <= timeline.version_key(b)
                                  for a, b in entry["in"]):
                out.append((name, before[-1]))
    return out


def prefix_matches(flags: FlagRegistry, name: str) -> list[str]:
    """The flags ``name`` is a prefix of (argparse's abbreviation rule), sorted."""
    key = name.lstrip("-").replace("_", "-")
    return sorted({flags.get(k).name for k in flags._keys if k.startswith(key)})  # noqa: SLF001


def resolve_prefix(flags: FlagRegistry, name: str) -> str | None:
    """argparse's abbreviation rule: a unique prefix of one flag names that flag."""
    hits = prefix_matches(flags, name)
    return hits[0] if len(hits) == 1 else None


_VERSION = r"(\d+\.\d+\.\d+(?:\.?post\d+)?)"
RELEASE_PATTERNS = (
    # an image tag: lmsysorg/sglang:v0.5.23-cu129, vllm/vllm-openai:v0.34.0
    re.compile(r"(?<![\w.-])(sglang|vllm-openai|vllm):v?" + _VERSION),
    # a pin: pip install "sglang[all]==0.5.23", vllm==0.34.0
    re.compile(r"(?<![\w.-])(sglang|vllm|knob-ledger-engine)(?:\[[\w,.-]*\])?==" + _VERSION),
    # `pip show` output kept in the file: Name: vllm / Version: 0.34.0
    re.compile(r"Name:\s*(sglang|vllm)[ \t]*\r?\n[^\n]*?Version:\s*" + _VERSION),
)


def detect_engines(text: str) -> list[tuple[str, int]]:
    """Every engine release a file names itself — an image tag (``lmsysorg/sglang:v0.5.23``,
    ``vllm/vllm-openai:v0.34.0``), a pip pin (``sglang[all]==0.5.23``) or ``pip show``
    output (``Name: vllm`` then ``Version: 0.34.0``) — as ``(spec, line)``, in file order.
    Nothing else is guessed from: a ``my-sglang:1.0`` image or ``sglang-router`` is no
    engine release."""
    found = []
    for pattern in RELEASE_PATTERNS:
        for m in pattern.finditer(text or ""):
            engine = m.group(1) if m.group(1) in _NAMES else "vllm"  # vllm-openai
            found.append((m.start(), f"{engine}=={m.group(2)}"))
    return [(spec, text.count("\n", 0, start) + 1) for start, spec in sorted(found)]


def named_releases(text: str | None) -> list[tuple[str, int]]:
    """:func:`detect_engines`, loading nothing for the common text that names no engine."""
    if not text or not any(w in text for w in ("sglang", "vllm", "knob-ledger-engine")):
        return []
    return detect_engines(text)


def release_of(declared: str | None, text: str | None, fallback: str | None) -> str | None:
    """The engine release that reads a file: the one ``declared`` for it; else the one
    release its ``text`` names itself (:func:`detect_engines`); else ``fallback``.  A text
    naming several releases names none."""
    if declared:
        return declared
    found = {spec for spec, _ in named_releases(text)}
    return found.pop() if len(found) == 1 else fallback


def release_flag_name(spec: str | None, name: str) -> str | None:
    """The flag release ``spec``'s argparse reads ``name`` as: its own name for an alias
    (``--tp`` -> ``--tp-size``) or a unique prefix (``--speculative-algo`` ->
    ``--speculative-algorithm``); None without a spec, for an env var, or a name the
    release does not know."""
    if spec is None or not is_flag_name(name):
        return None
    try:
        engine, version = parse_engine(spec)
        _, flags, _ = load_release(engine, version)
    except KnobError:
        return None
    declared = flags.get(name)
    if declared is None and not name.startswith("--no-"):
        full = resolve_prefix(flags, name)
        declared = flags.get(full) if full else None
    return None if declared is None else declared.name


def same_flag_spellings(spec: str | None, name: str, present) -> list[str]:
    """Of the names a file sets (``present``), those release ``spec`` reads as the same
    flag as ``name`` (its own spelling too); empty when that cannot be told."""
    want = release_flag_name(spec, name)
    if want is None:
        return []
    return [p for p in present if is_flag_name(p) and release_flag_name(spec, p) == want]


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
    out = []
    if declared is None and registry is flags:
        full = resolve_prefix(flags, name)
        if full is not None:
            out.append(f"{name}: argparse reads it as {full} in {label}")
            declared = flags.get(full)
    if declared is None and registry is flags and len(prefix_matches(flags, name)) > 1:
        return [f"{name}: ambiguous to {label}'s argparse, which refuses to start on it "
                f"(it could be {', '.join(prefix_matches(flags, name))})"]
    if declared is None:
        close = registry.closest(name)
        hint = f"closest: {', '.join(close)}" if close else "no close match"
        return [f"{name}: unknown to {label} ({hint})"]
    marked = _deprecations(engine, version).get(declared.name)
    if marked is not None:  # the replacement, else the release's own words when they say why
        repl, note = marked
        note = note or (declared.doc if "deprecat" in (declared.doc or "").lower() else "")
        why = f" (use {repl})" if repl else (f" ({note})" if note else "")
        out.append(f"{name}: deprecated in {label}{why}")
    if value is None or value == "":
        return out
    try:
        declared.validate(value)
        if registry is knobs and declared.type == "bool":
            check_bool_word(engine, version, name, value)
    except KnobError as e:
        raise KnobError(f"{e} (as {label} reads it)") from None
    return out


@functools.lru_cache(maxsize=64)
def _deprecations(engine: str, version: str) -> dict[str, tuple[str, str]]:
    """Knobs and flags the release still takes but marks deprecated -> (their replacement,
    empty when it names none; the release's note)."""
    data = _release_data(engine, version)
    return {item["name"]: (item["deprecated"] or "", item.get("deprecated_note") or "")
            for item in [*data["knobs"], *data["flags"]] if item.get("deprecated") is not None}


def check_bool_word(engine: str, version: str, name: str, value: str) -> None:
    """A bool env var's value by the release's own parser, else KnobError.

    SGLang's ``EnvBool`` lower-cases the value and takes only its listed words (``on``
    raises there); a vLLM ``os.getenv(X).lower() in ("1", "true")`` takes every word but
    reads any other than those as false — ``yes`` would quietly mean false, so only
    its true words and ``0``/``false`` pass (pass ``--no-validate`` for anything else).
    """
    data = _release_data(engine, version)
    word = value.lower()
    item = next((k for k in data["knobs"] if k["name"] == name), {})
    if item.get("true_words"):
        falses = ("0", "false")
        if word not in item["true_words"] and word not in falses:
            raise KnobError(f"{name}={value!r}: read as false (only "
                            f"{'/'.join(item['true_words'])} mean true, 0 or false for false)")
        return
    words = data.get("bool_words")
    if words and word not in words["true"] and word not in words["false"]:
        raise KnobError(f"{name}={value!r}: not a boolean the engine takes "
                        f"({'/'.join(words['true'])} or {'/'.join(words['false'])})")


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
        return [*generic(), *removed_everywhere(name)]
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


def removed_everywhere(name: str) -> list[str]:
    """For a target that declares no release: a warning for a name the newest catalogued
    release of an engine lists as removed, renamed or deprecated, and no release since a
    point declares (``VLLM_USE_V1: removed in vLLM >= 0.11.1; declare the release with
    `engine:` ...``: the first release after the last one that declared it), so that the
    file's engine not being known does not hide a name no current release reads.  Names
    only some releases in between removed are left to the declared release (they may be
    right for an older one)."""
    out: list[str] = []
    if is_flag_name(name):  # a flag's fate depends on the release too much (splits, renames
        return out          # of flags old servers still take): the declared release says
    for engine in _NAMES:
        releases = bundled_releases(engine)
        if not releases:
            continue
        gone = load_release(engine, releases[-1])[2].get(name)
        if gone is None:
            continue
        history = timeline.knob_history(engine, name)
        last = history.last() if history is not None and history.section == "knobs" else None
        since = releases[releases.index(last) + 1] if last in releases[:-1] else releases[0]
        repl = gone.get("replacement")
        use = f" (use {repl})" if repl else ""
        status = gone.get("status") or "removed"
        status = "removed" if status.startswith("last in") else status
        out.append(f"{name}: {status} in {_NAMES[engine]} >= {since}{use}; declare the "
                   f"release with `engine: {engine}==X` in ledger.yaml to check it against "
                   "the release the file runs")
    return out


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


_PREFIXES = {"sglang": ("SGLANG_", "SGL_"), "vllm": ("VLLM_",), "knob-ledger-engine": ("ENGINE_",)}


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


class ComputedDefault(str):
    """The default of a name the catalog declares with no constant default (``null``):
    the engine works it out at startup (SGLang's thread pool from the CPU count, vLLM's
    attention backend from the device).  Shown as ``unset (default: computed at
    startup)``, never as a bare ``unset`` that reads like "off"."""

    computed = True


COMPUTED_DEFAULT = ComputedDefault("computed at startup")


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
            return _declared_default(declared)
    if is_flag_name(name):
        from envknobs.catalog import lookup_flag

        declared = lookup_flag(name)
    else:
        declared = generic.get(name) if generic is not None else None
    return None if declared is None else _declared_default(declared)


def _declared_default(declared) -> object:
    """A declared name's default; a valued one without a constant default is computed at
    startup (a switch's absent default is simply off: ``False``, or None for no default)."""
    if declared.default is None and getattr(declared, "type", None) not in ("bool", None):
        return COMPUTED_DEFAULT
    return declared.default


def release_default(spec: str, name: str) -> object:
    """The default of ``name`` in release ``spec`` (None: unset, computed or unknown)."""
    engine, version = parse_engine(spec)
    knobs, flags, _ = load_release(engine, version)
    declared = (flags if is_flag_name(name) else knobs).get(name)
    return None if declared is None else declared.default


def deprecated_names(engine: str, version: str) -> dict[str, tuple[str, str]]:
    """The names release ``version`` still reads but marks deprecated -> (replacement or
    "", note): :mod:`envknobs.release_diff` compares two releases' marks."""
    return _deprecations(engine, version)
