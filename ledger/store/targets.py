"""Managed config files, read and edited through the ``envknobs`` formats.

The files are decoded as UTF-8 with ``surrogateescape`` so that any byte sequence comes
back out exactly as it went in: a file the ledger does not change is never rewritten,
and a file it changes differs only in the lines of the knobs it set.

Value sources: the YAML formats (k8s, yaml-map) tell the exact text a value is written
with (:func:`source_in`); an entry keeps the text before and after its change, and an edit
given a source writes it back verbatim (``value: $HF_TOKEN`` comes back as it was, not as
``"$HF_TOKEN"``), falling back to rendering the value where the text no longer fits.

Flag catalogs: a yaml-map target with ``flags: sglang|vllm`` is an engine ``--config``
file; ``record knob`` checks its keys against that engine's flag catalog (see
:func:`envknobs.assign.check_config_key`).  The file as read is a
:class:`ledger.core.target_file.TargetFile` (pure; the planners decide from it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from envknobs.registry import KnobError
from ledger.core.layout import add_knob
from ledger.core.layout import anchor_for
from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.managed_file import Target
from ledger.core.target_file import ENCODING
from ledger.core.target_file import ERRORS
from ledger.core.target_file import Edited
from ledger.core.target_file import TargetFile
from ledger.core.identifiers import place_knob
from ledger.core.identifiers import split_place
from ledger.errors import AmbiguousPlace
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.errors import TargetError
from ledger.store.workspace import Workspace
from ledger.store.managed import check_target_file


def anchor_in(
    tf: TargetFile, text: str, knob: str, managed: Mapping[str, dict | None] | None = None,
    removed: str | None = None,
) -> dict | None:
    """Where ``knob`` sits in ``text`` (a version of ``tf`` holding it), for re-adding it later.

    ``managed``: the target's other ledger knobs and their anchors (see :mod:`ledger.core.layout`);
    ``removed``: ``text`` without the knob, where the caller's edit already made it.
    """
    from envknobs.formats import FormatError

    fmt = target_format(tf.target)
    try:
        place = launch_place_anchor(fmt, text, knob)
        if place is not None:
            return place
        return anchor_for(fmt, text, knob, fmt.parse(text), managed or {}, removed)
    except (FormatError, KnobError):
        return None


_LAUNCH_WORDS = ("prefix", "docker-env", "flag", "array-flag", "env-word", "string-flag")


def launch_place_anchor(fmt, text: str, knob: str) -> dict | None:
    """For a knob whose one place is a word of a launch command (a prefix, a flag, a
    docker --env): the format's own record of where it goes back, byte for byte."""
    found = fmt.knob(text, knob)
    if found is None or len(found.places) != 1 or found.places[0].kind not in _LAUNCH_WORDS:
        return None
    p = found.places[0]
    value = p.value if p.value is not None else getattr(p, "expr", None)
    return {"place": {"key": p.key, "value": value, "raw": p.raw, "anchor": p.anchor}}


def target_format(target: Target):
    """The envknobs format that reads and edits ``target`` (FormatError for a bad setting:
    a malformed container address or key path); the one way to a target's format."""
    from envknobs.formats import get_format

    if target.format == "yaml-map":
        # Keys are checked against the flag catalog when recorded (with --no-validate
        # to bypass it), not on every edit: a revert must never be refused for its key.
        # Without flags the map is an env map: the process gets strings.
        return get_format("yaml-map", key_path=target.key_path, strings=not target.flags,
                          engine=target.flags)
    if target.format == "bash" and target.key_path:  # a script in a YAML file
        return get_format("bash", key_path=target.key_path)
    return get_format(target.format, container=target.container)


def source_in(target: Target, text: str, knob: str) -> str | None:
    """The exact text ``knob``'s value is written with in ``text`` (None: absent, or a
    format that does not keep it)."""
    from envknobs.formats import FormatError

    try:
        return target_format(target).source(text, knob)
    except (FormatError, KnobError):
        return None


def edited(tf: TargetFile, knob: str, value: str | None, *, anchors: Mapping[str, dict | None],
           places: Mapping[str, dict] | None = None, source: str | None = None,
           without: bool = False, into: str | None = None,
           lines: str | None = None) -> Edited:
    """``tf`` with ``knob`` set to ``value`` (or unset): the one edit a recorded change makes,
    as :func:`edit_target` writes it (``anchors``/``places``: the target's ledger knobs, so
    a knob the ledger had goes back where it was), with where the knob sits and the exact
    text of its value before and after.  ``source``: the exact text to write the value
    with (a YAML string: :attr:`envknobs.assign.Checked.source`); ``without``: also the
    text without the knob (:attr:`Edited.without`); ``lines``: the lines the knob had when
    the ledger removed it, for a knob that comes back (:func:`ledger.core.layout.add_knob`)."""
    sources = {knob: source} if source is not None else None
    raw = edit_target(tf, {knob: value}, anchors, places, sources,
                      lines={knob: lines} if lines is not None else None, into=into)
    text = raw.decode(ENCODING, ERRORS)
    apart = edit_target(tf, {knob: None}).decode(ENCODING, ERRORS) if without else None
    # The anchor is taken where the file holds the knob; the text without it is the edit
    # already made (an unset; an adopted knob's ``without``), not a second one.
    holding = tf.text if value is None else text
    removed = text if value is None else (apart if holding == tf.text else None)
    anchor = anchor_in(tf, holding, knob, anchors, removed)
    if into is not None and value is not None:  # a restore puts it back where --in put it
        anchor = {**(anchor or {}), "in": into}
    return Edited(
        raw,
        anchor=anchor,
        before_source=source_in(tf.target, tf.text, knob),
        after_source=None if value is None else source_in(tf.target, text, knob),
        without=apart,
    )


def _message(e: Exception, path: Path) -> str:
    render = getattr(e, "render", None)  # container candidates, placed as FILE:LINE
    return render(str(path)) if callable(render) else str(e)


def read_target(ws: Workspace, target: Target) -> TargetFile:
    """Read and parse one target file; errors name the file."""
    path = ws.target_path(target)
    check_target_file(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TargetError(str(path), f"cannot read: {e.strerror}") from e
    return _parsed_once(target, path, raw)


def _parsed_once(target: Target, path: Path, raw: bytes) -> TargetFile:
    """:func:`parse_target`, made once per content of the file and the target's format
    settings (:mod:`ledger.store.cache`); a file that does not parse is never cached."""
    from ledger.store import cache

    key = cache.key_of("target", repr(target), raw)  # every setting of the target
    found = cache.load("targets", key)
    if found is not None:
        values, summary, places = found
        return TargetFile(target, path, raw, values, summary, places)
    tf = parse_target(target, path, raw)
    cache.store("targets", key, (tf.values, tf.summary, tf.place_values))
    return tf


def remember_target(target: Target, path: Path, raw: bytes) -> None:
    """Keep the analysis of ``raw``, just written to ``path``, for the next command."""
    try:
        _parsed_once(target, path, raw)
    except LedgerError:
        pass  # a file that does not parse is read (and refused) by the next command itself


def parse_target(target: Target, path: Path, raw: bytes) -> TargetFile:
    """``raw`` (the content of ``path``, on disk or planned) parsed as ``target``'s format."""
    from envknobs.formats import FormatError

    text = raw.decode(ENCODING, ERRORS)
    try:
        fmt = target_format(target)
        summary = fmt.summary(text)
        if summary is None:  # a format whose knobs have one spot each
            return TargetFile(target, path, raw, fmt.parse(text))
    except FormatError as e:
        raise TargetError(str(path), _message(e, path)) from e
    values = {k.knob: k.value for k in summary.knobs if k.value is not None and not k.needs_selection}
    places = {place_knob(k.knob, p.key): p.value for k in summary.knobs for p in k.places}
    return TargetFile(target, path, raw, values, summary, places)


def ambiguous(e, path: Path) -> AmbiguousPlace:
    """An envknobs AmbiguousKnob as the ledger's error: every place as ``file:line``."""
    flag = "record flag" if e.knob.startswith("-") else "record knob"
    places = [
        {"path": str(path), "line": p.line, "scope": p.scope, "text": p.raw.strip()}
        for p in e.places
    ]
    message = e.describe(str(path)).replace(
        "select a place with --at LINE", f"select a place with `ledger {flag} ... --at LINE`"
    )
    return AmbiguousPlace(message, places)


def edit_target(
    tf: TargetFile, edits: Mapping[str, str | None],
    anchors: Mapping[str, dict | None] | None = None,
    places: Mapping[str, dict] | None = None,
    sources: Mapping[str, str | None] | None = None,
    lines: Mapping[str, str | None] | None = None,
    into: str | None = None,
) -> bytes:
    """The file's bytes with each knob in ``edits`` set (or unset, for None).

    Keys ``knob@place`` edit that one place (entries recorded with ``--at``/``--all``);
    ``places`` holds each such place as recorded first (its old value, exact text and
    anchor), so that going back to that value writes back that exact text.  Then plain
    knobs: removals, changes in place, and knobs that are absent, in the order given,
    each put back at its anchor when it has one (see :mod:`ledger.core.layout`).
    ``sources``: the exact text to write for a knob's value, where the format keeps it;
    ``lines``: the exact lines a re-added knob had (see :func:`ledger.core.layout.add_knob`);
    ``into``: ``record --in``, where a k8s target's knob goes (:meth:`K8sFormat.placed`).
    """
    from envknobs.formats import FormatError
    from envknobs.formats.common.places import AmbiguousKnob

    text = tf.text
    present = tf.values
    release = edits.get(RELEASE_KNOB, _NO_RELEASE)
    edits = {k: v for k, v in edits.items() if k != RELEASE_KNOB}
    plain = {k: v for k, v in edits.items() if split_place(k)[1] is None}
    removals = [k for k, v in plain.items() if v is None]
    changes = [k for k, v in plain.items() if v is not None and k in present]
    additions = [k for k, v in plain.items() if v is not None and k not in present]
    try:
        fmt = target_format(tf.target).placed(into)
        fmt.refuse_outside(str(tf.path), text, [split_place(k)[0] for k in edits])
        text = _edit_places(fmt, text, edits, places or {})
        text = fmt.edit_many(text, {k: plain[k] for k in (*removals, *changes)}, sources)
        text = _add_all(fmt, text, {k: plain[k] for k in additions}, anchors or {},
                        sources or {}, lines or {})
        if release is not _NO_RELEASE:
            text = release_edited(str(tf.path), text, release)
    except AmbiguousKnob as e:
        raise ambiguous(e, tf.path) from e
    except FormatError as e:
        raise TargetError(str(tf.path), _message(e, tf.path)) from e
    except KnobError as e:
        raise InvalidValue(f"{tf.path}: {e}") from e
    return text.encode(ENCODING, ERRORS)


_NO_RELEASE = object()


def release_edited(path: str, text: str, spec: str | None) -> str:
    """``text`` running release ``spec`` (``vllm==0.34.0``): the version of every place that
    names that engine rewritten, the rest byte for byte (:mod:`envknobs.release_spots`).
    A file naming no release of the engine, or several, is refused naming each place."""
    from envknobs.release_spots import engine_spots
    from envknobs.release_spots import release_spots
    from envknobs.release_spots import releases_named
    from envknobs.release_spots import with_release

    engine, _, version = (spec or "").partition("==")
    if not version:
        raise TargetError(path, f"no engine release to write ({spec!r})")
    spots = engine_spots(release_spots(text), engine)
    if not spots:
        raise TargetError(path, f"names no {engine} release to change (an image tag such as "
                                f"vllm/vllm-openai:v0.13.0, a pip pin {engine}==X, a Helm "
                                "image.tag): declare the release with `engine:` in ledger.yaml")
    if len(releases_named(spots)) > 1:
        raise release_ambiguity(path, spots, "bring them to one release by hand and adopt "
                                "that (`ledger record upgrade --adopt --before`)")
    return with_release(text, spots, version)


def release_ambiguity(path: str, spots, how: str) -> AmbiguousPlace:
    """A file naming several releases (or none), refused: each place as ``file:line``, and
    ``how`` to select."""
    where = "\n".join(f"  {path}:{s.line}: {s.spec} ({s.kind}): {s.text}" for s in spots)
    return AmbiguousPlace(
        f"{path} names several engine releases; one file runs one release:\n{where}\n{how}",
        [{"path": path, "line": s.line, "scope": s.kind, "text": s.text} for s in spots])


def _edit_places(fmt, text: str, edits: Mapping[str, str | None], places: Mapping[str, dict]) -> str:
    from envknobs.formats.common.places import PlaceEdit

    by_knob: dict[str, list] = {}
    for key, value in edits.items():
        knob, place = split_place(key)
        if place is None:
            continue
        recorded = places.get(key) or {}
        raw = recorded.get("raw") if recorded.get("before") == value and recorded.get("raw") else None
        by_knob.setdefault(knob, []).append(
            PlaceEdit(place, value, raw=raw, anchor=recorded.get("anchor"))
        )
    for knob, place_edits in by_knob.items():
        text = fmt.edit_places(text, knob, place_edits)
    return text


def _add_all(fmt, text: str, values: Mapping[str, str], anchors: Mapping[str, dict | None],
             sources: Mapping[str, str | None], lines: Mapping[str, str | None]) -> str:
    """Absent knobs back in, in order: each run of knobs with no anchor, exact text or
    lines of their own (which ``_add`` would give to ``fmt.set`` as they are) goes to
    ``fmt.add_many`` together, which may add them in one pass."""
    run: dict[str, str] = {}
    for knob, value in values.items():
        if anchors.get(knob) or sources.get(knob) is not None or lines.get(knob) is not None:
            text = fmt.add_many(text, run) if run else text
            run = {}
            text = _add(fmt, text, knob, value, anchors, source=sources.get(knob),
                        lines=lines.get(knob))
        else:
            run[knob] = value
    return fmt.add_many(text, run) if run else text


def _add(fmt, text: str, knob: str, value: str, anchors: Mapping[str, dict | None],
         source: str | None = None, lines: str | None = None) -> str:
    """An absent knob back in: at its launch-word anchor, else at its layout anchor, in
    the place ``record --in`` chose for it (the anchor's ``in``)."""
    from envknobs.formats import FormatError
    from envknobs.formats.common.places import PlaceEdit

    into = (anchors.get(knob) or {}).get("in")
    if isinstance(into, str):
        fmt = fmt.placed(into)
    place = (anchors.get(knob) or {}).get("place")
    if isinstance(place, dict):
        raw = place.get("raw") if place.get("value") == value else None
        try:
            return fmt.edit_places(
                text, knob, [PlaceEdit(str(place.get("key")), value, raw=raw, anchor=place.get("anchor"))]
            )
        except FormatError:
            pass  # the text around it changed: the format places it as a new knob
        if raw is None and place.get("raw") and isinstance(place.get("value"), str):
            # Back where it was, as it was recorded there, then given this value (a value
            # computed from a variable goes back as that text).
            try:
                out = fmt.edit_places(text, knob, [PlaceEdit(
                    str(place.get("key")), str(place.get("value")), raw=place.get("raw"),
                    anchor=place.get("anchor"))])
                return fmt.set_exact(out, knob, value, source)
            except FormatError:
                pass
    return add_knob(fmt, text, knob, value, anchors, source=source, lines=lines)
