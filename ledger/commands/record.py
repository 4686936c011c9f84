"""`ledger record knob` and `ledger record flag`: make a change and record it as an entry
(or, with ``adopt``, record a change already made by hand).

Like ``restore``: the command reads its 1..N targets once under the lock, asks the
catalogs (:func:`ask_catalogs` — the one check of the value, against the target's
engine release — and the names the file and the catalogs know), has each file edited
once (:func:`ledger.store.targets.edited`), and the pure planner
(:mod:`ledger.core.recording`) decides the entry and its plan; one transaction applies
it (:func:`ledger.store.apply.apply_plan`, with the edit already made).  The options are
one :class:`~ledger.core.recording.RecordOptions`, which the CLI builds.

One change across several targets (``record knob decode,prefill,decode-k8s K=V``) is one
entry, one id, reverted and restored together; each target keeps its own ``before``,
anchor and exact texts (``Entry.also``).  Every file is read and checked (drift,
ambiguity, the catalogs, the inversion trap) before anything is written, and all of
them are written in one transaction.  Decisions (the issue was silent): the targets are
told apart by commas, the first is the entry's ``target``; a target named twice is
refused; ``--at/--all`` select places in one script and do not go with several targets;
a target where the knob already has the value is refused, naming it (leave it out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from envknobs.flags import check_flag_name
from envknobs.flags import is_flag_name
from envknobs.registry import KnobError
from envknobs.registry import check_knob_name
from envknobs.registry import check_knob_value
from ledger.commands.catalog import class_warnings
from ledger.commands.catalog import engine_of
from ledger.commands.catalog import file_spelling
from ledger.commands.catalog import knob_registry
from ledger.commands.catalog import name_defaults
from ledger.commands.knob_names import did_you_mean
from ledger.commands.knob_names import new_name_warnings
from ledger.commands.live import LiveOutcome
from ledger.commands.live import restartable
from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core import planner
from ledger.core.recording import Asked
from ledger.core.recording import NewEntry
from ledger.core.recording import before_value
from ledger.core.recording import entry_of
from ledger.core.recording import plan_knob
from ledger.core.recording import plan_places
from ledger.core.recording import selected_places
from ledger.core.recording import wants_without
from ledger.core.model import Entry
from ledger.core.managed_file import Target
from ledger.core.identifiers import slugify
from ledger.core.recording import RecordOptions
from ledger.core.recording import when_trailers
from ledger.core.target_file import TargetFile
from ledger.errors import InvalidValue
from ledger.errors import Refused
from ledger.store.apply import Applied
from ledger.store.apply import apply_plan
from ledger.store.apply import drift_in
from ledger.store.apply import layer_anchors
from ledger.store.apply import layer_places
from ledger.store.targets import canonical_knob
from ledger.store.targets import edited
from ledger.store.targets import read_target
from ledger.store.targets import select_places
from ledger.store.workspace import new_entry_id


def check_grammar(knob: str, value: str | None, target: Target | None = None,
                  before: str | None = None) -> None:
    """A name and values (the new one, and an adopted change's ``before``) a config file
    can carry (InvalidValue otherwise).

    The keys of an engine ``--config`` file (a yaml-map target with ``flags``) are server
    arguments (or a Helm values argument list's ``--flags``); every other knob is an env
    variable or a launch flag."""
    try:
        if target is not None and target.flags:
            from envknobs.formats.yaml.keys import check_key_name

            (check_flag_name if is_flag_name(knob) else check_key_name)(knob)
        else:  # an env variable or a launch flag here: a YAML map's other keys need --flags
            check_flag_name(knob) if is_flag_name(knob) else check_knob_name(knob)
        for v in (value, before):
            if v is not None:
                check_knob_value(v)
    except KnobError as e:
        hint = ""
        if target is not None and not target.flags and target.format == "yaml-map":
            hint = (f" (if {target.name} is an engine --config file, add it with "
                    "--flags sglang|vllm)")
        raise InvalidValue(f"{e}{hint}") from None


def catalog_warnings(knob: str, value: str | None, target: Target | None = None,
                     engine: str | None = None) -> list[str]:
    """The one check of a value against the catalogs: an engine ``--config`` file's keys
    against that engine's flag catalog, every other knob against ``engine``'s release (the
    one that reads the target's file; the bundled catalogs without one).  Warnings back;
    a value of the wrong type or out of range raises InvalidValue."""
    try:
        if target is not None and target.flags:
            return check_config_key(str(target.flags), knob, value)
        from envknobs.catalog import check_assignment
        from envknobs.catalog_release import checked_for_engine

        return checked_for_engine(engine, knob, value,
                                  lambda: check_assignment(knob_registry(), knob, value))
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
    return entry_of(_new(s, s.ws.entries(), title), kind=kind, cls=cls, title=title, why=why,
                    adopt=adopt, when=when, **fields)


@dataclass
class Recorded:
    entry: Entry
    applied: Applied
    warnings: list[str]
    live: LiveOutcome | None = None  # the running services (set by `restartable`)


@restartable
def record_knob(s: Session, opts: RecordOptions | None = None, *, dry_run: bool = False,
                **fields) -> Recorded:
    """Change a knob in 1..N targets and record it as one entry; or, with ``adopt``, record
    a change made by hand.  ``opts``, or its fields by keyword (``target=`` or
    ``targets=``, ``knob=``, ``value=``, ...: :class:`RecordOptions`).

    ``knob`` may be a launch flag (``--cuda-graph-max-bs``).  ``opts.at`` selects places
    in a bash script: a line, or ``"all"``; without it a knob with several places (or one
    that depends on a branch) is refused with every place named.  ``opts.past``: the real
    time of the change, and a change already reverted by hand (recorded ``reverted``,
    nothing written); a perf entry whose change is a revert is refused (the inversion
    trap) unless ``past.not_a_revert``.  The rules are :mod:`ledger.core.recording`'s."""
    opts = (opts or RecordOptions.of(**fields)).checked(s.now, s.ws.target)
    with writing(s, dry_run):
        entries = s.ws.entries()
        files = {name: read_target(s.ws, s.ws.target(name)) for name in opts.targets}
        drifts = drift_in(s.ws, entries, files)
        knob, warnings, asked = ask_catalogs(s.ws, opts, files)
        if opts.at is not None:
            tf = files[opts.target]
            chosen = select_places(tf, knob, opts.at, opts.value)
            places = selected_places(tf, entries, knob, opts.value, chosen, opts.force)
            if places is not None:
                plan, message = plan_places(_new(s, entries, opts.title), opts, knob, places)
                return _apply(s, plan, message, opts, dry_run, files, drifts, {}, warnings)
        else:
            for tf in files.values():
                select_places(tf, knob, None, opts.value, opts.adopt)
        befores = {name: before_value(tf, entries, opts, knob, drifts, asked[name])
                   for name, tf in files.items()}
        edits = _edited(entries, opts, knob, files, befores)
        plan, message = plan_knob(_new(s, entries, opts.title), opts, knob, files, befores, edits)
        return _apply(s, plan, message, opts, dry_run, files, drifts,
                      {name: e.raw for name, e in edits.items()}, warnings)


def _edited(entries, opts: RecordOptions, knob: str, files: Mapping[str, TargetFile],
            befores: Mapping[str, str | None]) -> dict:
    """Each target edited once, its knobs where the ledger had them."""
    anchors, places = layer_anchors(entries), layer_places(entries)
    return {name: edited(tf, knob, opts.value, anchors=anchors.get(name) or {},
                         places=places.get(name), string=opts.string, into=opts.into,
                         without=wants_without(tf, opts, knob, befores[name]))
            for name, tf in files.items()}


def _new(s: Session, entries, title: str) -> NewEntry:
    """What a new entry gets from the workspace and the session: id, order, slug, time."""
    return NewEntry(id=new_entry_id(e.id for e in entries), seq=planner.next_seq(entries),
                    slug=planner.unique_slug(entries, slugify(title or "")), now=s.now,
                    command=s.command)


def _apply(s: Session, plan, message: str, opts: RecordOptions, dry_run: bool, files,
           drifts, edits: Mapping[str, bytes], warnings: list[str]) -> Recorded:
    applied = apply_plan(s.ws, plan, command=s.command, now=s.now, message=message,
                         force=opts.force, dry_run=dry_run, files=files, drifts=drifts,
                         edited=edits)
    return Recorded(applied.changed[-1], applied, warnings)


def ask_catalogs(ws, opts: RecordOptions, files: Mapping[str, TargetFile]
                 ) -> tuple[str, list[str], dict[str, Asked]]:
    """The knob as the files spell it, the catalogs' warnings (each once), and what they
    say of it in each target (its engine's default, the close names in the file).

    The one validation of the value: its grammar (a name and a value a config file can
    carry; ``--before`` too), then, unless ``no_validate``, the catalog of the engine
    release that reads each target's file (read once, under the lock)."""
    warnings: list[str] = []
    engines = {name: engine_of(ws, tf.target, tf.text) for name, tf in files.items()}
    for name, tf in files.items():
        check_grammar(opts.knob, opts.value, tf.target, opts.before)
        found = [] if opts.no_validate else [
            *catalog_warnings(opts.knob, opts.value, tf.target, engines[name]),
            *class_warnings(opts.knob, opts.cls)]
        warnings += [w for w in found if w not in warnings]
    names = {canonical_knob(tf, opts.knob) for tf in files.values()}
    if len(names) > 1:
        raise Refused(f"{opts.knob} is spelled {', '.join(sorted(names))} in these targets: "
                      "record it in each")
    knob = names.pop()
    asked = {}
    for name, tf in files.items():
        knob, notes = file_spelling(tf, knob, engines[name])
        warnings += notes + new_name_warnings(tf, knob, opts.value)
        default = name_defaults(engines[name], [knob]).get(knob) if opts.adopt else None
        hint = did_you_mean(tf, knob) if opts.value is None else ""
        asked[name] = Asked(default=default, hint=hint)
    return knob, warnings, asked


__all__ = ["RecordOptions", "Recorded", "ask_catalogs", "catalog_warnings", "check_config_key",
           "check_grammar", "new_entry", "record_knob", "when_trailers"]
