"""`ledger record knob` and `ledger record patch`: make a change and record it as an entry
(or, with ``adopt``, record a change already made by hand)."""

from __future__ import annotations

from dataclasses import dataclass

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value
from ledger.commands.catalog import class_warnings
from ledger.commands.catalog import engine_of
from ledger.commands.catalog import file_spelling
from ledger.commands.catalog import knob_registry
from ledger.commands.knob_names import did_you_mean
from ledger.commands.knob_names import new_name_warnings
from ledger.commands.live import LiveOutcome
from ledger.commands.live import restartable
from ledger.commands.record_past import Past
from ledger.commands.record_past import refuse_inversion
from ledger.commands.record_past import refuse_not_reverted
from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core import planner
from ledger.core.display import value_text
from ledger.core.layout import inserted_block
from ledger.core.model import Action
from ledger.core.model import Entry
from ledger.core.model import Target
from ledger.core.model import check_class
from ledger.core.model import place_knob
from ledger.core.model import slugify
from ledger.errors import Drift
from ledger.errors import DriftError
from ledger.errors import InvalidValue
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.store.apply import Applied
from ledger.store.apply import apply_plan
from ledger.store.apply import drift_in
from ledger.store.apply import layer_anchors
from ledger.store.targets import anchor_in
from ledger.store.targets import edit_target
from ledger.store.targets import read_target
from ledger.store.targets import source_in
from ledger.store.workspace import new_entry_id


def validate_knob(
    knob: str, value: str | None, no_validate: bool, target: Target | None = None,
    engine: str | None = None,
) -> list[str]:
    """Check a knob (or ``--flag``) assignment against the catalogs; return warnings,
    raise on errors.

    The keys of an engine ``--config`` file (a yaml-map target with ``flags``) are server
    arguments, checked against that engine's flag catalog; every other knob is an env
    variable, checked against the env catalogs.
    """
    if target is not None and target.flags:
        return _validate_flag_key(knob, value, no_validate, target)
    try:
        # An env variable or a launch flag here: a YAML map's other keys need --flags.
        check_flag_name(knob) if is_flag_name(knob) else check_knob_name(knob)
        if value is not None:
            check_knob_value(value)
    except KnobError as e:
        hint = ""
        if target is not None and target.format == "yaml-map":
            hint = (f" (if {target.name} is an engine --config file, add it with "
                    "--flags sglang|vllm)")
        raise InvalidValue(f"{e}{hint}") from None
    if no_validate:
        return []
    from envknobs.catalog import check_assignment
    from envknobs.catalog_release import checked_for_engine

    try:
        return checked_for_engine(engine, knob, value,
                                  lambda: check_assignment(knob_registry(), knob, value))
    except KnobError as e:
        raise InvalidValue(f"{e} (pass --no-validate to record it anyway)") from None


def _validate_flag_key(knob: str, value: str | None, no_validate: bool, target: Target):
    from envknobs.formats.yaml.keys import check_key_name

    try:  # a key of a --config map, or a --flag of a Helm values argument list
        (check_flag_name if is_flag_name(knob) else check_key_name)(knob)
        if value is not None:
            check_knob_value(value)
    except KnobError as e:
        raise InvalidValue(str(e)) from None
    if no_validate:
        return []
    try:
        return check_config_key(str(target.flags), knob, value)
    except KnobError as e:
        raise InvalidValue(f"{e} (pass --no-validate to record it anyway)") from None


def check_config_key(engine: str, key: str, value: str | None) -> list[str]:
    """Check a key of an ``ENGINE --config`` file against that engine's flag catalog.

    The same catalog as launch-line flags (``cuda-graph-max-bs`` here is
    ``--cuda-graph-max-bs`` there: the lookup normalizes dashes and ``_``).  An unknown
    key is a warning naming the closest known arguments; a value of the wrong type or
    out of range raises KnobError.  Without a bundled flag catalog, a warning says the
    key went unchecked.
    """
    try:
        from envknobs.catalog import flag_registries  # type: ignore[attr-defined]
        from envknobs.catalog import lookup_flag  # type: ignore[attr-defined]
    except ImportError:
        return [f"{key}: not checked, no {engine} flag catalog is bundled yet"]
    declared = lookup_flag(key, engine)
    if declared is None:
        registry = flag_registries().get(engine)
        close = registry.closest(f"--{key.lstrip('-')}") if registry is not None else []
        hint = f"closest known: {', '.join(close[:3])}" if close else "no close match"
        return [f"unknown {engine} server argument {key} ({hint})"]
    if value is not None:
        declared.validate(value)
    return []


def new_entry(s: Session, *, kind: str, cls: str, title: str, why: str, adopt: bool,
              when: str = "", **fields) -> Entry:
    """A new entry, its history one record (or adopt) action; ``when``: the real time of
    the change where it is not now (``--when``, an adopted commit's date)."""
    entries = s.ws.entries()
    if not title or not title.strip():
        raise InvalidValue("--title must not be empty")
    action = Action(at=s.now, action="adopt" if adopt else "record", why=why, command=s.command,
                    when=when)
    return Entry(
        id=new_entry_id(e.id for e in entries),
        seq=planner.next_seq(entries),
        kind=kind,
        cls=check_class(cls),
        title=title.strip(),
        slug=planner.unique_slug(entries, slugify(title)),
        recorded=s.now,
        why=why,
        history=(action,),
        **fields,
    )


@dataclass
class Recorded:
    entry: Entry
    applied: Applied
    warnings: list[str]
    live: LiveOutcome | None = None  # the running services (set by `restartable`)


@restartable
def record_knob(
    s: Session,
    *,
    target: str,
    knob: str,
    value: str | None,
    cls: str,
    title: str,
    why: str = "",
    adopt: bool = False,
    before: str | None = None,
    before_given: bool = False,
    no_validate: bool = False,
    force: bool = False,
    dry_run: bool = False,
    at: int | str | None = None,
    past: Past = Past(),
    string: bool = False,
) -> Recorded:
    """Change a knob in a target and record it; or, with ``adopt``, record a change made by hand.

    ``string`` (``--string``): in a YAML target, write the new value as a string (quoted)
    whatever its neighbours or the flag catalog say (:mod:`envknobs.formats.yaml.newvalue`).

    ``past`` (ledger.commands.record_past): the real time of the change, and a change
    already reverted by hand (recorded ``reverted``, its base the file's value, nothing
    written).  A perf entry whose change is a revert is refused (the inversion trap,
    ledger.core.inversion) unless ``past.not_a_revert``.

    ``knob`` may be a launch flag (``--cuda-graph-max-bs``).  ``at`` selects places in a
    bash script: a line, or ``"all"``; without it a knob with several places (or one
    that depends on a branch) is refused with every place named (see :func:`record_at`).
    The target is read and checked for drift once, under the lock; planned by
    :func:`ledger.core.planner.plan_record`."""
    warnings = _check_record_args(s, target, knob, value, cls, adopt, before, before_given,
                                  no_validate, at)
    _check_string(s.ws.target(target), string, value, adopt)
    past = past.checked(s.now, adopt=adopt, at=at)
    with writing(s, dry_run):
        t = s.ws.target(target)  # as ledger.yaml says under the lock
        entries = s.ws.entries()
        tf = read_target(s.ws, t)
        drifts = drift_in(s.ws, entries, {target: tf})
        knob = canonical_knob(tf, knob)
        spec = engine_of(s.ws, t, tf.text)
        knob, notes = file_spelling(tf, knob, spec)
        warnings += notes + new_name_warnings(tf, knob, value)
        if at is not None:
            done = record_at(s, tf, entries, knob=knob, value=value, at=at, cls=cls,
                             title=title, why=why, force=force, dry_run=dry_run,
                             warnings=warnings)
            if done is not None:
                return done
        else:
            refuse_ambiguous(tf, knob, value, adopt)
        entry_before = before_in(tf, entries, knob, value, before, adopt=adopt, force=force,
                                 drifts=drifts, past=past, cls=cls, title=title, engine=spec)
        entry = new_entry(s, kind="knob", cls=cls, title=title, why=why,
                          adopt=adopt or past.already_reverted, when=past.when,
                          target=target, knob=knob, before=entry_before, after=value,
                          **_where(tf, entries, knob, entry_before, value, adopt, string))
        entry = past.taken_back(entry, at=s.now, command=s.command)
        message = _record_message(entry, value, past)
        applied = apply_plan(s.ws, planner.plan_record(entry, adopt=adopt), command=s.command,
                             now=s.now, message=message, force=force, dry_run=dry_run,
                             files={target: tf}, drifts=drifts)
        return Recorded(applied.changed[-1], applied, warnings)


def before_in(tf, entries, knob: str, value: str | None, before: str | None, *,
              adopt: bool, force: bool, drifts, past: Past, cls: str, title: str,
              several: bool = False, engine: str | None = None) -> str | None:
    """The value in effect in ``tf`` before the change to ``value``: the hand edit's
    ``before`` (``adopt``) or the ledger's, checked against the file (drift), an
    already-reverted value, a change that changes nothing, and the inversion trap.
    ``several``: one target of a change across several (the refusal says to leave it out);
    ``engine``: the target's engine release (its defaults tell an adopted revert)."""
    layer = planner.knob_layers(entries).get((tf.target.name, knob))
    if adopt:
        found = _adopted_before(tf, layer, knob, value, before)
    else:
        found = _before_now(tf, layer, knob, force, drifts, value)
    if past.already_reverted:
        refuse_not_reverted(tf, knob, found, value)
    if found == value:
        hint = did_you_mean(tf, knob) if value is None else ""
        raise Refused(f"{knob} in {tf.target.name} is already {value_text(value, quote=True)}"
                      f"{hint}: " + ("leave that target out" if several else "nothing to record"))
    refuse_inversion(tf, layer, knob=knob, before=found, after=value, cls=cls, adopt=adopt,
                     title=title, past=past, engine=engine)
    return found


def _record_message(entry: Entry, value: str | None, past: Past) -> str:
    """The workspace commit's message; ``When:`` trailers carry the real dates (``ledger
    log`` shows and orders by them; the commit's own time stays the record time)."""
    head = f"record {entry.cls} {entry.knob}={value_text(value, quote=True)} in {entry.target}"
    if past.already_reverted:
        head += " (already reverted)"
    body = f"- {entry.id} [{entry.cls}] {entry.title}\n"
    return f"{head}: {entry.title}\n\n{body}{when_trailers(entry.history)}"


def when_trailers(history) -> str:
    """``When: TIME`` for the earliest real date of these actions (none without one)."""
    dates = sorted(a.when for a in history if a.when)
    return f"\nWhen: {dates[0]}\n" if dates else ""


def _check_string(t: Target, string: bool, value: str | None, adopt: bool) -> None:
    if not string:
        return
    if t.format not in ("yaml-map", "k8s"):
        raise UsageError(f"--string is for YAML targets; in {t.name} ({t.format}) every "
                         "value is a string already")
    if value is None or adopt:
        raise UsageError("--string says how to write a new value; it does not go with "
                         "--unset or --adopt")


def _where(tf, entries, knob: str, before: str | None, value: str | None,
           adopt: bool, string: bool = False) -> dict:
    """The entry's anchor (where the knob's line sits while present, so a later revert
    or restore puts it back there) and the exact texts of its values and lines;
    ``string``: the value written as a YAML string (its source is the quoted text)."""
    from envknobs.formats.yaml.scalar import double_quoted

    sources = {knob: " " + double_quoted(value)} if string and value is not None else None
    after_text = edit_target(tf, {knob: value}, sources=sources).decode(
        "utf-8", "surrogateescape")
    holding = tf.text if value is None else after_text
    anchor = anchor_in(tf, holding, knob, layer_anchors(entries).get(tf.target.name))
    texts = _exact_texts(tf.target, tf.text, after_text, knob, before, value, adopt)
    if adopt and before is None and value is not None and knob in tf.values:
        # An adopted knob the file added by hand: its lines as they are (an inline comment
        # like `# +12.8% see PLAN.md` included) are what a restore after a revert puts back.
        without = edit_target(tf, {knob: None}).decode("utf-8", "surrogateescape")
        lines = inserted_block(without, tf.text)
        if lines is not None and _encodable(lines):
            texts["after_lines"] = lines
    return {"anchor": anchor, **texts}


def _check_record_args(s: Session, target: str, knob: str, value: str | None, cls: str,
                       adopt: bool, before: str | None, before_given: bool, no_validate: bool,
                       at: int | str | None) -> list[str]:
    """The arguments of ``record knob`` checked before anything is read; the warnings."""
    check_class(cls)
    t = s.ws.target(target)
    if at is not None and t.format != "bash":
        raise UsageError(f"--at/--all select places in a bash script; {target} is {t.format}")
    if at is not None and adopt:
        raise UsageError("--adopt records a whole knob; it does not take --at/--all")
    warnings = validate_knob(knob, value, no_validate, t, engine_of(s.ws, t))
    warnings += [] if no_validate else class_warnings(knob, cls)
    if before is not None:
        validate_knob(knob, before, True, t)
    if before_given and not adopt:
        raise UsageError("--before/--before-unset only go with --adopt")
    if adopt and not before_given:
        raise UsageError("--adopt needs --before VALUE or --before-unset")
    return warnings


def canonical_knob(tf, knob: str) -> str:
    """A flag as the file's launch lines spell it in the catalog (``--tp`` -> ``--tp-size``)."""
    from ledger.store.targets import target_format

    fmt = target_format(tf.target)
    return fmt.canonical(tf.text, knob)


def refuse_ambiguous(tf, knob: str, value: str | None, adopt: bool) -> None:
    """No silent pick: a knob with several places, or one that depends on a branch, is
    refused with each place as ``file:line`` and how to select one."""
    from envknobs.formats import FormatError
    from envknobs.formats.common.places import AmbiguousKnob
    from ledger.store.targets import ambiguous
    from ledger.store.targets import target_format

    fmt = target_format(tf.target)
    try:
        fmt.select_places(tf.text, knob, None, "unset" if value is None else "set")
    except AmbiguousKnob as e:
        if adopt:
            raise UsageError(f"{tf.path}: {knob} has several places; --adopt cannot say which "
                             "one was edited: record it with --at LINE instead") from e
        raise ambiguous(e, tf.path) from e
    except FormatError:
        pass  # the edit itself reports it, naming the file


def record_at(s: Session, tf, entries, *, knob: str, value: str | None, at: int | str,
              cls: str, title: str, why: str, force: bool, dry_run: bool,
              warnings: list[str]) -> Recorded | None:
    """Record a change at the selected places only; the entry keeps each place's key,
    line, old value, exact text and anchor, so revert/restore touch exactly those.
    None when the file does not have the knob yet: it is then a whole new knob."""
    from envknobs.formats import FormatError
    from envknobs.formats.common.places import AmbiguousKnob
    from ledger.errors import TargetError
    from ledger.store.targets import ambiguous
    from ledger.store.targets import target_format

    target = tf.target.name
    fmt = target_format(tf.target)
    try:
        selected = fmt.select_places(tf.text, knob, at, "unset" if value is None else "set")
    except AmbiguousKnob as e:
        raise ambiguous(e, tf.path) from e
    except FormatError as e:
        raise TargetError(str(tf.path), str(e)) from e
    layers = planner.knob_layers(entries)
    places: dict[str, dict] = {}
    drifts = []
    for p in selected:
        key = place_knob(knob, p.key)
        live = tf.live(key)
        layer = layers.get((target, key))
        expected = planner.layer_value(layer) if layer else live
        if live != expected and not force:
            drifts.append(Drift(f"{tf.path}:{p.line}", key, expected, live))
        before = live if force else expected
        if before != value:
            places[p.key] = {"line": p.line, "before": before, "raw": p.raw, "anchor": p.anchor}
    if drifts:
        raise DriftError(drifts)
    if not places:
        if not selected:  # a knob the file does not have: a new one, where it always applies
            return None
        raise Refused(f"{knob} in {target} is already {value_text(value, quote=True)} at "
                      f"line {', '.join(str(p.line) for p in selected)}: nothing to record")
    first = next(iter(places.values()))
    entry = new_entry(s, kind="knob", cls=cls, title=title, why=why, adopt=False,
                      target=target, knob=knob, before=first["before"], after=value,
                      places=places, at=str(at))
    lines = ", ".join(str(p["line"]) for p in places.values())
    message = (f"record {cls} {knob}={value_text(value, quote=True)} in {target} at line "
               f"{lines}: {entry.title}\n\n- {entry.id} [{cls}] {entry.title}\n")
    applied = apply_plan(s.ws, planner.plan_record(entry), command=s.command,
                         now=s.now, message=message, force=force, dry_run=dry_run,
                         files={target: tf})
    return Recorded(applied.changed[-1], applied, warnings)


def _exact_texts(
    t: Target, before_text: str, after_text: str, knob: str,
    before: str | None, after: str | None, adopt: bool,
) -> dict[str, str | None]:
    """The exact text of the value before and after, and the knob's lines where the change
    removes or adds it, so revert/restore write those bytes back (not a re-rendering)."""
    if adopt:  # the file already holds the change: what it said before is unknown
        texts = {"after_source": None if after is None else source_in(t, after_text, knob)}
    else:
        texts = {
            "before_source": None if before is None else source_in(t, before_text, knob),
            "after_source": None if after is None else source_in(t, after_text, knob),
            "before_lines": inserted_block(after_text, before_text) if after is None else None,
            "after_lines": inserted_block(before_text, after_text) if before is None else None,
        }
    # Text that is not valid UTF-8 (bytes kept through surrogateescape) cannot be stored:
    # without it, the value is rendered instead.
    return {k: v for k, v in texts.items() if v is None or _encodable(v)}


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _adopted_before(tf, layer, knob: str, value: str | None, before: str | None) -> str | None:
    """The ``before`` of an adopted hand edit, checked against the file and the ledger."""
    live = tf.values.get(knob)
    if live != value:
        raise Refused(
            f"{tf.path}: {knob} is {value_text(live, quote=True)} in the file, "
            f"not {value_text(value, quote=True)}: "
            "--adopt records a change already made; make it first (or drop --adopt)"
        )
    if layer and planner.layer_value(layer) != before:
        raise Refused(
            f"{knob} in {tf.target.name}: the ledger expects "
            f"{value_text(planner.layer_value(layer), quote=True)} "
            f"before this change, not {value_text(before, quote=True)}"
        )
    return before


def _before_now(tf, layer, knob: str, force: bool, drifts, value: str | None) -> str | None:
    """The value in effect before a new change: the ledger's, which the file must agree
    with (``drifts``: what checking the file found; drift is refused unless ``force``,
    which takes the file's; a computed value is its shell text, :meth:`TargetFile.live`)."""
    live = tf.live(knob)
    expected = planner.layer_value(layer) if layer else live
    if live != expected:
        if not force:
            mine = [d for d in drifts if d.knob == knob] or \
                [Drift(str(tf.path), knob, expected, live, tf.target.name)]
            raise DriftError([d.planned("record", value) for d in mine])
        return live
    return expected

