"""One check of an assignment — a knob, a launch flag or an engine ``--config`` key set to a
value (or unset) in one or more target files — as the engine reading each file takes it.

:func:`check_assignment` is the one call a writer (the ledger's ``record knob``) makes
before it edits anything.  For each file, in this order, every file before the next step:

1. **the grammar**: a name and values (the new one, and an adopted change's ``before``) a
   config file can carry — an env variable or a launch flag, or, in an engine ``--config``
   file, a server argument as such files spell it;
2. **the catalogs** (unless ``validate`` is off): an engine ``--config`` file's keys
   against that engine's flag catalog; every other knob against the release that reads
   the file (:func:`envknobs.catalog_release.release_of`: its declared release, else the
   one it names itself, else the fallback), or the bundled catalogs without one; and the
   catalog's class hint against the class the change is recorded with;
3. **the spelling**: the name as the file's launch lines spell it in the catalog
   (``--tp`` -> ``--tp-size``), the same in every file; then, where the file's release is
   known and the file sets that flag under another name argparse reads as the same flag
   (an alias, a prefix), the file's spelling, so that the edit changes that flag rather
   than adding a second one;
4. **the places** the edit will change (the format's ``select_places``: ``at`` a line or
   ``"all"``; without it a knob with several places is refused naming each).

A package of its own: it stands over both the catalogs (``envknobs``) and the formats
(``envknobs.formats``), which do not import it.  Warnings come back in a
:class:`Checked`, each once; refusals raise
:class:`AssignmentError`, which says which step and which file (``index``) refused, so a
caller can word it for its users (a hint of which option bypasses the catalogs).  Pure:
the texts are given, nothing is read but the bundled catalogs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from typing import Sequence

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import Registry
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value


@dataclass(frozen=True)
class InFile:
    """One file the assignment is made in: its format and text, the engine release it
    declares (``sglang==0.5.23``; None: the one the text names, else the fallback), and,
    for an engine ``--config`` file, that engine (its keys are server arguments)."""

    fmt: Any  # envknobs.formats.common.TargetFormat
    text: str
    declared: str | None = None
    config: str | None = None
    present: tuple[str, ...] | None = None  # the names the text sets, where already known


@dataclass(frozen=True)
class Checked:
    """What the check found: the knob as the files spell it; the catalogs' warnings (each
    once); per file, in the order given: the release that reads it, the name as asked of
    it and as it spells it (step 3: the two differ where the file's own spelling replaced
    the name), the engine's default of the knob (when asked), the places the edit changes."""

    knob: str
    warnings: tuple[str, ...]
    releases: tuple[str | None, ...]
    spelled: tuple[tuple[str, str], ...]
    defaults: tuple[object, ...]
    places: tuple[tuple, ...]
    source: str | None = None  # the exact text of the value, when asked as a YAML string


class AssignmentError(KnobError):
    """A refused assignment: ``step`` is ``grammar``, ``catalog``, ``spelled-apart`` (the
    files spell the name differently: ``names``), ``spellings`` (one file sets the flag
    under several names: ``names``, and ``places`` as the format has them) or ``places``
    (``cause``: the format's AmbiguousKnob or FormatError); ``index``: which file;
    ``knob``: the name as it stood at that step."""

    def __init__(self, step: str, message: str, index: int = 0, *, knob: str = "",
                 names: Sequence[str] = (), places: Sequence = (), release: str | None = None,
                 cause: Exception | None = None) -> None:
        super().__init__(message)
        self.step, self.index, self.knob, self.release = step, index, knob, release
        self.names, self.places, self.cause = tuple(names), tuple(places), cause


def check_assignment(registry: Registry, knob: str, value: str | None,
                     files: Sequence[InFile], *, cls: str = "", before: str | None = None,
                     fallback: str | None = None, validate: bool = True,
                     defaults: bool = False, at: int | str | None = None,
                     string: bool = False) -> Checked:
    """Check setting ``knob`` to ``value`` (None: unset) in ``files`` (module docstring).

    ``registry``: the knob catalogs (the bundled ones plus an engine's own declarations);
    ``cls``: the class the change is recorded with (perf / bugfix); ``before``: an adopted
    change's old value (its grammar is checked too); ``fallback``: the release of a file
    that neither declares nor names one; ``defaults``: also look up each file's default;
    ``at``: the place(s) to change (a line, ``"all"``); ``string``: the value is to be
    written as a YAML string (:attr:`Checked.source`)."""
    from envknobs.catalog_release import release_of

    releases = tuple(release_of(f.declared, f.text, fallback) for f in files)
    warnings: list[str] = []
    for i, f in enumerate(files):
        _check_grammar(knob, value, before, f.config, i)
        found = [*_catalog_warnings(registry, knob, value, f.config, releases[i], i),
                 *_class_warnings(registry, knob, cls)] if validate else []
        warnings += [w for w in found if w not in warnings]
    names = {f.fmt.canonical(f.text, knob) for f in files}
    if len(names) > 1:
        raise AssignmentError("spelled-apart", f"{knob} is spelled {', '.join(sorted(names))} "
                              "in these targets", knob=knob, names=sorted(names))
    spelled, pairs, found_defaults = names.pop(), [], []
    for i, f in enumerate(files):  # each file's spelling is asked of the name so far
        asked = spelled
        spelled = _file_spelling(f, spelled, releases[i], i)
        pairs.append((asked, spelled))
        found_defaults.append(_default(registry, releases[i], spelled) if defaults else None)
    return Checked(
        knob=spelled, warnings=tuple(warnings), releases=releases, spelled=tuple(pairs),
        defaults=tuple(found_defaults),
        places=tuple(_places(f, spelled, at, value, i) for i, f in enumerate(files)),
        source=_yaml_string(value) if string and value is not None else None)


def _check_grammar(knob: str, value: str | None, before: str | None, config: str | None,
                   index: int) -> None:
    """A name and values a config file can carry: an engine ``--config`` file's keys are
    server arguments (or ``--flags`` of a Helm values argument list); every other knob is
    an env variable or a launch flag."""
    try:
        if config:
            from envknobs.formats.yaml.keys import check_key_name

            (check_flag_name if is_flag_name(knob) else check_key_name)(knob)
        else:
            check_flag_name(knob) if is_flag_name(knob) else check_knob_name(knob)
        for v in (value, before):
            if v is not None:
                check_knob_value(v)
    except KnobError as e:
        raise AssignmentError("grammar", str(e), index, knob=knob) from None


def _catalog_warnings(registry: Registry, knob: str, value: str | None, config: str | None,
                      release: str | None, index: int) -> list[str]:
    from envknobs.catalog import check_assignment as check_in_catalogs
    from envknobs.catalog_release import checked_for_engine

    try:
        if config:
            return check_config_key(config, knob, value)
        return checked_for_engine(release, knob, value,
                                  lambda: check_in_catalogs(registry, knob, value))
    except KnobError as e:
        raise AssignmentError("catalog", str(e), index, knob=knob) from None


def check_config_key(engine: str, key: str, value: str | None) -> list[str]:
    """Check a key of an ``ENGINE --config`` file against that engine's flag catalog.

    The same catalog as launch-line flags (``cuda-graph-max-bs`` here is
    ``--cuda-graph-max-bs`` there: the lookup normalizes dashes and ``_``).  An unknown
    key is a warning naming the closest known arguments; a value of the wrong type or
    out of range raises KnobError.
    """
    from envknobs.catalog import flag_registries
    from envknobs.catalog import lookup_flag

    declared = lookup_flag(key, engine)
    if declared is None:
        registry = flag_registries().get(engine)
        close = registry.closest(f"--{key.lstrip('-')}") if registry is not None else []
        hint = f"closest known: {', '.join(close[:3])}" if close else "no close match"
        return [f"unknown {engine} server argument {key} ({hint})"]
    if value is not None:
        declared.validate(value)
    return []


def _class_warnings(registry: Registry, knob: str, cls: str) -> list[str]:
    """The catalog's class hint against the class the change is recorded with."""
    from envknobs.catalog import lookup_flag
    from envknobs.catalog_release import class_hint_warnings

    declared = lookup_flag(knob) if is_flag_name(knob) else registry.get(knob)
    return class_hint_warnings(declared, cls)


def _file_spelling(f: InFile, knob: str, release: str | None, index: int) -> str:
    """The spelling to change flag ``knob`` under in ``f`` (module docstring, step 3).  A
    file that sets the flag under several such names is refused (argparse takes the last
    one, and editing another would take no effect).  Without a release, as given (the
    hand catalogs' aliases are the format's already)."""
    if release is None or not is_flag_name(knob):
        return knob
    from envknobs.catalog_release import same_flag_spellings

    same = same_flag_spellings(release, knob, _present(f))
    if len(same) > 1:
        places = [p for name in same for p in f.fmt.places(f.text, name)]
        raise AssignmentError("spellings", f"{knob}: one flag of {release} set as "
                              f"{' and '.join(same)}", index, knob=knob, names=same,
                              places=places, release=release)
    return same[0] if len(same) == 1 else knob


def _present(f: InFile) -> list[str]:
    """The names ``f`` sets: as given, else as its format's summary (or parse) has them."""
    if f.present is not None:
        return list(f.present)
    summary = f.fmt.summary(f.text)
    return [k.knob for k in summary.knobs] if summary is not None else list(f.fmt.parse(f.text))


def _default(registry: Registry, release: str | None, knob: str) -> object:
    from envknobs.catalog_release import default_of

    return default_of(release, knob, registry)


def _places(f: InFile, knob: str, at: int | str | None, value: str | None, index: int) -> tuple:
    """The format's places of ``knob`` that ``at`` selects; without ``at``, none where the
    format cannot select in the file (its edit reports that, naming the file)."""
    from envknobs.formats import FormatError

    try:
        return tuple(f.fmt.select_places(f.text, knob, at, "unset" if value is None else "set"))
    except FormatError as e:
        from envknobs.formats.common.places import AmbiguousKnob

        if at is None and not isinstance(e, AmbiguousKnob):
            return ()
        raise AssignmentError("places", str(e), index, knob=knob, cause=e) from e


def _yaml_string(value: str) -> str:
    from envknobs.formats.yaml.scalar import double_quoted

    return " " + double_quoted(value)


__all__ = ["AssignmentError", "Checked", "InFile", "check_assignment", "check_config_key"]
