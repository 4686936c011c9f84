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

from envknobs.assign import AssignmentError
from envknobs.assign import InFile
from envknobs.assign import check_assignment
from envknobs.formats.common.places import AmbiguousKnob
from ledger.commands.catalog import knob_registry
from ledger.commands.knob_names import did_you_mean
from ledger.commands.knob_names import new_name_warnings
from ledger.commands.live import LiveOutcome
from ledger.commands.live import restartable
from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core import planner
from ledger.core.layers import knob_layers
from ledger.core.layers import removed_lines
from ledger.core.recording import Asked
from ledger.core.recording import NewEntry
from ledger.core.recording import before_value
from ledger.core.recording import entry_of
from ledger.core.recording import plan_knob
from ledger.core.recording import plan_places
from ledger.core.recording import selected_places
from ledger.core.recording import wants_without
from ledger.core.model import Entry
from ledger.core.identifiers import slugify
from ledger.core.recording import RecordOptions
from ledger.core.recording import when_trailers
from ledger.core.target_file import TargetFile
from ledger.errors import AmbiguousPlace
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.errors import Refused
from ledger.errors import TargetError
from ledger.errors import UsageError
from ledger.store.apply import Applied
from ledger.store.apply import apply_plan
from ledger.store.apply import drift_in
from ledger.store.apply import layer_anchors
from ledger.store.apply import layer_places
from ledger.store.targets import edited
from ledger.store.targets import ambiguous
from ledger.store.targets import read_target
from ledger.store.targets import target_format
from ledger.store.workspace import new_entry_id


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
        checked = ask_catalogs(s.ws, opts, files)
        knob, warnings, asked = checked.knob, checked.warnings, checked.asked
        if opts.at is not None:
            tf = files[opts.target]
            places = selected_places(tf, entries, knob, opts.value, checked.places[opts.target],
                                     opts.force)
            if places is not None:
                plan, message = plan_places(_new(s, entries, opts.title), opts, knob, places)
                return _apply(s, plan, message, opts, dry_run, files, drifts, {}, warnings)
        befores = {name: before_value(tf, entries, opts, knob, drifts, asked[name])
                   for name, tf in files.items()}
        edits = _edited(entries, opts, checked, files, befores)
        plan, message = plan_knob(_new(s, entries, opts.title), opts, knob, files, befores, edits)
        return _apply(s, plan, message, opts, dry_run, files, drifts,
                      {name: e.raw for name, e in edits.items()}, warnings)


def _edited(entries, opts: RecordOptions, checked: Catalogs, files: Mapping[str, TargetFile],
            befores: Mapping[str, str | None]) -> dict:
    """Each target edited once, its knobs where the ledger had them."""
    anchors, places, knob = layer_anchors(entries), layer_places(entries), checked.knob
    stacks = knob_layers(entries)
    return {name: edited(tf, knob, opts.value, anchors=anchors.get(name) or {},
                         places=places.get(name), source=checked.source, into=opts.into,
                         without=wants_without(tf, opts, knob, befores[name]),
                         lines=removed_lines(stacks.get((name, knob), ())))
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


@dataclass(frozen=True)
class Catalogs:
    """What :func:`ask_catalogs` found: the knob as the files spell it, the warnings (each
    once), and per target what the catalogs and the file's own names say of the knob
    (:class:`Asked`), the places ``--at`` selects (the format's), and the exact text of
    the value where it is written as a YAML string (``--string``)."""

    knob: str
    warnings: list[str]
    asked: dict[str, Asked]
    places: dict[str, tuple]
    source: str | None = None


def ask_catalogs(ws, opts: RecordOptions, files: Mapping[str, TargetFile]) -> Catalogs:
    """The one check of the change, against each target's file as read under the lock:
    :func:`envknobs.assign.check_assignment` — the grammar (``--before`` too), the
    catalogs of the release that reads the file (unless ``no_validate``), the name as the
    files spell it, the places ``--at`` selects; then what the file's own names say of it
    (a close name: "did you mean").  Refusals name the target, the file and the way out."""
    tfs = list(files.values())
    try:
        checked = check_assignment(
            knob_registry(), opts.knob, opts.value, [_in_file(tf) for tf in tfs],
            cls=opts.cls, before=opts.before, fallback=ws.config.engine,
            validate=not opts.no_validate, defaults=opts.adopt, at=opts.at,
            string=opts.string)
    except AssignmentError as e:
        raise _refusal(e, opts, tfs[e.index]) from None
    warnings, asked = list(checked.warnings), {}
    for i, (name, tf) in enumerate(files.items()):
        was, knob = checked.spelled[i]
        if was != knob:
            warnings.append(f"{was}: recorded as {knob}, the spelling {tf.path} gives that "
                            f"flag (the same to {checked.releases[i]})")
        warnings += new_name_warnings(tf, knob, opts.value)
        hint = did_you_mean(tf, knob) if opts.value is None else ""
        asked[name] = Asked(default=checked.defaults[i], hint=hint)
    return Catalogs(checked.knob, warnings, asked, dict(zip(files, checked.places)),
                    checked.source)


def _in_file(tf: TargetFile) -> InFile:
    """A target's file as :func:`check_assignment` takes it: its format, text, declared
    release, the engine of an engine ``--config`` file, and the names it sets."""
    present = (tuple(k.knob for k in tf.summary.knobs) if tf.summary is not None
               else tuple(tf.values))
    return InFile(target_format(tf.target), tf.text, declared=tf.target.engine,
                  config=str(tf.target.flags) if tf.target.flags else None, present=present)


def _refusal(e: AssignmentError, opts: RecordOptions, tf: TargetFile) -> LedgerError:
    """A refused assignment as the ledger says it: which target, file and place, and how
    to go on (``--no-validate``, ``--flags``, ``--at``)."""
    target = tf.target
    if e.step == "grammar":
        hint = (f" (if {target.name} is an engine --config file, add it with --flags "
                "sglang|vllm)") if not target.flags and target.format == "yaml-map" else ""
        return InvalidValue(f"{e}{hint}")
    if e.step == "catalog":
        return InvalidValue(f"{e} (pass --no-validate to record it anyway)")
    if e.step == "spelled-apart":
        return Refused(f"{opts.knob} is spelled {', '.join(e.names)} in these targets: "
                       "record it in each")
    if e.step == "spellings":
        places = [{"path": str(tf.path), "line": p.line, "text": p.raw.strip()}
                  for p in e.places]
        where = ", ".join(f"{tf.path}:{p['line']} ({p['text']})" for p in places) or str(tf.path)
        return AmbiguousPlace(f"{e.knob}: {target.name} sets one flag of {e.release} as "
                              f"{' and '.join(e.names)} ({where}); argparse takes the last: "
                              "remove one by hand, then record the other", places)
    if not isinstance(e.cause, AmbiguousKnob):
        return TargetError(str(tf.path), str(e.cause))
    if opts.adopt and opts.at is None:
        return UsageError(f"{tf.path}: {e.knob} has several places; --adopt cannot say which "
                          "one was edited: record it with --at LINE instead")
    return ambiguous(e.cause, tf.path)


__all__ = ["Catalogs", "RecordOptions", "Recorded", "ask_catalogs", "new_entry", "record_knob",
           "when_trailers"]
