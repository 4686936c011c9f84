"""`ledger record knob|flag` decided: what the change was, where, in which exact text.

Pure, like :func:`ledger.core.planner.plan_restore`: no files, no git, no clock, no
catalogs.  The command (:mod:`ledger.commands.record`) reads its 1..N targets once under
the lock (:class:`ledger.core.target_file.TargetFile`), asks the catalogs, has each file
edited once (:class:`ledger.core.target_file.Edited`) and hands what it found here.  The
rules, in the order the command asks them:

* **Options** (:class:`RecordOptions`): one typed record of what the operator typed,
  checked together (:meth:`RecordOptions.checked`) before anything is read.
* **The before value** (:func:`before_value`): with ``adopt``, the ``--before`` given,
  which the ledger must agree with, of a file that already holds the change; else the
  value the ledger expects, which the file must hold (drift is refused unless
  ``force``, which takes the file's).  A change that changes nothing is refused; so is a
  perf entry whose change is a revert (the inversion trap, :mod:`ledger.core.inversion`)
  unless ``--not-a-revert``; so is ``--already-reverted`` of the value the file holds.
* **Places** (:func:`selected_places`): with ``--at LINE``/``--all``, each selected place
  keeps its own old value, exact text and anchor, so revert and restore touch exactly
  those; a knob the file does not have is a new whole knob.
* **Exact texts** (:func:`exact_texts`): the value's text before and after, and the
  knob's lines where the change adds or removes it, so revert and restore write those
  bytes back rather than a re-rendering.
* **The past** (:class:`Past`): the real time of the change, and a change already
  reverted by hand (recorded ``reverted``, its base the file's value, nothing written).
* **The plan** (:func:`plan_knob`): one entry (one id across several targets, each
  target keeping its own before, anchor and texts in ``Entry.also``), planned by
  :func:`ledger.core.planner.plan_record`.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace
from typing import Callable
from typing import Mapping
from typing import Sequence

from envknobs.formats.yaml.envfrom import INTO
from ledger.core import planner
from ledger.core.inversion import inversion
from ledger.core.layers import knob_layers
from ledger.core.layers import layer_value
from ledger.core.layout import inserted_block
from ledger.core.action import Action
from ledger.core.model import Entry
from ledger.core.managed_file import Target
from ledger.core.identifiers import check_class
from ledger.core.identifiers import place_knob
from ledger.core.target_file import Edited
from ledger.core.target_file import TargetFile
from ledger.core.when import parse_when
from ledger.errors import Drift
from ledger.errors import DriftError
from ledger.errors import InvalidValue
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.values import value_text

HAND_REVERT = "reverted by hand before the ledger knew of it"


@dataclass(frozen=True)
class Past:
    """What the operator tells ``record`` about history the ledger did not see.

    ``record knob decode CTAS=512 --already-reverted`` records a change that was made and
    then taken back before the ledger knew of it (a ``sed`` on the serve script): the
    entry's base is what the file holds now, its after the value given, its state
    ``reverted`` — so ``ledger diff`` shows it off the table and ``restore`` claws it
    back.  Nothing is written.  ``suspected`` marks it taken back as a suspect
    (``reverted_why`` is then the hypothesis), held back until ``ledger clear``.
    Decisions: the history is an ``adopt`` (at ``when``) then a ``revert`` or ``suspect``
    (at ``reverted_when``), both recorded now; the lines a restore writes are the ones
    the format writes for a new knob.
    """

    when: str = ""  # when the change was made (raw text until :meth:`checked`)
    already_reverted: bool = False
    reverted_when: str = ""
    reverted_why: str = ""
    suspected: bool = False
    not_a_revert: bool = False  # a perf removal that is itself the change

    def checked(self, now: str, *, adopt: bool, at: object = None) -> "Past":
        """The flags checked together, the times parsed (``--when`` not after now, the
        revert not before the change)."""
        if self.already_reverted and adopt:
            raise UsageError("--already-reverted records a change the file no longer holds; "
                             "--adopt one it holds: give one of them")
        if self.already_reverted and at is not None:
            raise UsageError("--already-reverted records a whole knob; it does not take "
                             "--at/--all")
        if not self.already_reverted and (self.reverted_when or self.reverted_why
                                          or self.suspected):
            raise UsageError("--reverted-when, --reverted-why and --suspected go with "
                             "--already-reverted")
        if self.suspected and not self.reverted_why.strip():
            raise UsageError("--suspected needs --reverted-why: write the hypothesis down")
        when = parse_when(self.when, now) if self.when else ""
        back = parse_when(self.reverted_when, now, "--reverted-when") if self.reverted_when \
            else ""
        if when and back and back < when:
            raise UsageError(f"--reverted-when {back} is before --when {when}: a change is "
                             "reverted after it is made")
        return replace(self, when=when, reverted_when=back)

    def taken_back(self, entry: Entry, *, at: str, command: str) -> Entry:
        """``entry`` as recorded already reverted (or as it is, without the flag)."""
        if not self.already_reverted:
            return entry
        why = self.reverted_why.strip() or HAND_REVERT
        action = Action(at=at, action="suspect" if self.suspected else "revert", why=why,
                        command=command, when=self.reverted_when)
        if self.suspected:
            return entry.with_action(action, state="reverted", suspicion="suspected",
                                     suspect_why=why)
        return entry.with_action(action, state="reverted")


@dataclass(frozen=True)
class RecordOptions:
    """Everything ``record knob|flag`` is told, declared once: the CLI builds it from its
    parameters (:func:`RecordOptions.of`), the command takes it.

    ``targets``: one change across several targets is one entry (the first is the
    entry's ``target``); ``at``: a line or ``"all"`` (places in one bash script);
    ``string``: in a YAML target, write the value as a string (quoted);
    ``before``/``before_given``: with ``adopt``, the value before the hand edit (given
    as unset when ``before`` is None).  ``dry_run`` and ``restart``, which every
    mutating command takes, are the command's own keywords."""

    targets: tuple[str, ...]
    knob: str
    value: str | None
    cls: str
    title: str
    why: str = ""
    adopt: bool = False
    before: str | None = None
    before_given: bool = False
    no_validate: bool = False
    force: bool = False
    at: int | str | None = None
    past: Past = Past()
    string: bool = False
    into: str | None = None  # --in env|configmap: where a k8s target's new knob goes

    @staticmethod
    def of(*, target: str | None = None, targets: Sequence[str] = (), **fields
           ) -> "RecordOptions":
        """From keyword arguments: ``target=NAME`` or ``targets=[...]``, the rest by name
        (``cls`` is a field here: the entry's class)."""
        names = tuple(targets) if targets else (target,) if target else ()
        if not names:
            raise UsageError("name a TARGET")
        return RecordOptions(targets=names, **fields)

    @property
    def target(self) -> str:
        return self.targets[0]

    @property
    def several(self) -> bool:
        return len(self.targets) > 1

    def checked(self, now: str, target_of: Callable[[str], Target]) -> "RecordOptions":
        """The options checked together against the targets' formats (usage errors),
        ``past`` parsed; nothing is read.  ``target_of``: a target's settings by name."""
        if self.several and self.at is not None:
            raise UsageError("--at/--all select places in one script; name one target")
        if self.several and self.string:
            raise UsageError("--string writes one YAML target's value; name one target")
        check_class(self.cls)
        targets = [target_of(name) for name in self.targets]
        for t in targets:
            if self.at is not None and t.format != "bash":
                raise UsageError(f"--at/--all select places in a bash script; {t.name} is "
                                 f"{t.format}")
            if self.at is not None and self.adopt:
                raise UsageError("--adopt records a whole knob; it does not take --at/--all")
        if self.before_given and not self.adopt:
            raise UsageError("--before/--before-unset only go with --adopt")
        if self.adopt and not self.before_given:
            raise UsageError("--adopt needs --before VALUE or --before-unset")
        if self.string:
            t = targets[0]
            if t.format not in ("yaml-map", "k8s"):
                raise UsageError(f"--string is for YAML targets; in {t.name} ({t.format}) "
                                 "every value is a string already")
            if self.value is None or self.adopt:
                raise UsageError("--string says how to write a new value; it does not go "
                                 "with --unset or --adopt")
        if self.into is not None and self.into.partition(":")[0] not in INTO:
            raise InvalidValue(f"--in {self.into!r}: give --in env or --in configmap[:NAME] "
                               "(a flag: --in args or --in env)")
        if self.into is not None and (self.several or targets[0].format != "k8s"
                                      or self.value is None or self.adopt):
            raise UsageError("--in env|configmap selects where one k8s target's container "
                             "gets a knob's value; it does not go with --unset or --adopt")
        return replace(self, past=self.past.checked(now, adopt=self.adopt, at=self.at))


@dataclass(frozen=True)
class Asked:
    """What the catalogs and the file's own names say of the knob in one target."""

    default: object = None  # the engine's default (an adopted revert to it is a revert)
    hint: str = ""  # " (did you mean X (line 16)?)": names in the file close to the knob


def before_value(tf: TargetFile, entries: Sequence[Entry], opts: RecordOptions, knob: str,
                 drifts: Sequence[Drift], asked: Asked = Asked()) -> str | None:
    """The value in effect in ``tf`` before the change to ``opts.value``: the hand edit's
    ``before`` (``adopt``) or the ledger's, checked against the file (drift), an
    already-reverted value, a change that changes nothing, and the inversion trap."""
    value = opts.value
    layer = knob_layers(entries).get((tf.target.name, knob))
    if opts.adopt:
        found = _adopted_before(tf, layer, knob, value, opts.before)
    else:
        found = _before_now(tf, layer, knob, opts.force, drifts, value)
    if opts.past.already_reverted and found == value:
        raise Refused(f"{tf.path}: {knob} is {value_text(value, quote=True)} in the file now: "
                      "it is not reverted; record it with --adopt --before V (or "
                      "--before-unset) instead")
    if found == value:
        hint = asked.hint if value is None else ""
        raise Refused(f"{knob} in {tf.target.name} is already {value_text(value, quote=True)}"
                      f"{hint}: " + ("leave that target out" if opts.several
                                     else "nothing to record"))
    if not (opts.past.not_a_revert or opts.past.already_reverted):
        trap = inversion(target=tf.target.name, knob=knob, before=found, after=value,
                         cls=opts.cls, adopt=opts.adopt, title=opts.title, layer=layer or (),
                         default=asked.default if opts.adopt else None)
        if trap is not None:
            raise Refused(trap.message(f"{tf.path}: {knob}"))
    return found


def _adopted_before(tf: TargetFile, layer, knob: str, value: str | None,
                    before: str | None) -> str | None:
    """The ``before`` of an adopted hand edit, checked against the file and the ledger."""
    live = tf.values.get(knob)
    if live != value:
        raise Refused(
            f"{tf.path}: {knob} is {value_text(live, quote=True)} in the file, "
            f"not {value_text(value, quote=True)}: "
            "--adopt records a change already made; make it first (or drop --adopt)"
        )
    if layer and layer_value(layer) != before:
        raise Refused(
            f"{knob} in {tf.target.name}: the ledger expects "
            f"{value_text(layer_value(layer), quote=True)} "
            f"before this change, not {value_text(before, quote=True)}"
        )
    return before


def _before_now(tf: TargetFile, layer, knob: str, force: bool, drifts: Sequence[Drift],
                value: str | None) -> str | None:
    """The value in effect before a new change: the ledger's, which the file must agree
    with (``drifts``: what checking the file found; drift is refused unless ``force``,
    which takes the file's; a computed value is its shell text, :meth:`TargetFile.live`)."""
    live = tf.live(knob)
    expected = layer_value(layer) if layer else live
    if live != expected:
        if not force:
            mine = [d for d in drifts if d.knob == knob] or \
                [Drift(str(tf.path), knob, expected, live, tf.target.name)]
            raise DriftError([d.planned("record", value) for d in mine])
        return live
    return expected


def selected_places(tf: TargetFile, entries: Sequence[Entry], knob: str, value: str | None,
                    selected: Sequence, force: bool) -> dict[str, dict] | None:
    """The places ``--at``/``--all`` changes (``selected``: the format's places, each with
    ``key``, ``line``, ``raw``, ``anchor``): each with its line, old value, exact text and
    anchor.  Drift at a place is refused unless ``force`` (which takes the file's value);
    places already at ``value`` are left out.  None when the file does not have the knob
    yet: it is then a whole new knob."""
    target = tf.target.name
    layers = knob_layers(entries)
    places: dict[str, dict] = {}
    drifts = []
    for p in selected:
        key = place_knob(knob, p.key)
        live = tf.live(key)
        layer = layers.get((target, key))
        expected = layer_value(layer) if layer else live
        if live != expected and not force:
            drifts.append(Drift(f"{tf.path}:{p.line}", key, expected, live))
        before = live if force else expected
        if before != value:
            places[p.key] = {"line": p.line, "before": before, "raw": p.raw, "anchor": p.anchor}
    if drifts:
        raise DriftError(drifts)
    if not places:
        if not selected:
            return None
        raise Refused(f"{knob} in {target} is already {value_text(value, quote=True)} at "
                      f"line {', '.join(str(p.line) for p in selected)}: nothing to record")
    return places


def wants_without(tf: TargetFile, opts: RecordOptions, knob: str, before: str | None) -> bool:
    """An adopted knob the file added by hand: its lines as they are (an inline comment
    like ``# +12.8% see PLAN.md`` included) are what a restore after a revert puts back,
    so the command has the file edited without it too."""
    return opts.adopt and before is None and opts.value is not None and knob in tf.values


def exact_texts(tf: TargetFile, edited: Edited, before: str | None, after: str | None,
                adopt: bool) -> dict:
    """The entry's anchor and the exact texts of its values and lines, from the file as
    read (``tf``) and as edited once (``edited``)."""
    if adopt:  # the file already holds the change: what it said before is unknown
        texts = {"after_source": None if after is None else edited.after_source}
        if edited.without is not None:
            lines = inserted_block(edited.without, tf.text)
            if lines is not None:
                texts["after_lines"] = lines
    else:
        texts = {
            "before_source": None if before is None else edited.before_source,
            "after_source": None if after is None else edited.after_source,
            "before_lines": inserted_block(edited.text, tf.text) if after is None else None,
            "after_lines": inserted_block(tf.text, edited.text) if before is None else None,
        }
    # Text that is not valid UTF-8 (bytes kept through surrogateescape) cannot be stored:
    # without it, the value is rendered instead.
    return {"anchor": edited.anchor,
            **{k: v for k, v in texts.items() if v is None or _encodable(v)}}


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class NewEntry:
    """What a new entry is given that the planner does not decide: its id and order, the
    time and the command line."""

    id: str
    seq: int
    slug: str
    now: str
    command: str


def entry_of(new: NewEntry, *, kind: str, cls: str, title: str, why: str, adopt: bool = False,
             when: str = "", **fields) -> Entry:
    """A new entry (a knob, or a patch), its history one record (or adopt) action at
    ``when`` (its real time, where it is not now)."""
    if not title or not title.strip():
        raise InvalidValue("--title must not be empty")
    action = Action(at=new.now, action="adopt" if adopt else "record", why=why,
                    command=new.command, when=when)
    return Entry(id=new.id, seq=new.seq, kind=kind, cls=check_class(cls), title=title.strip(),
                 slug=new.slug, recorded=new.now, why=why, history=(action,), **fields)


def _knob_entry(new: NewEntry, opts: RecordOptions, knob: str, **fields) -> Entry:
    return entry_of(new, kind="knob", cls=opts.cls, title=opts.title, why=opts.why, knob=knob,
                    after=opts.value, **fields)


def plan_knob(new: NewEntry, opts: RecordOptions, knob: str, files: Mapping[str, TargetFile],
              befores: Mapping[str, str | None], edits: Mapping[str, Edited]
              ) -> tuple[planner.Plan, str]:
    """The entry of a whole-knob change in every target of ``opts`` (each target's own
    before, anchor and exact texts), and its plan; with the workspace commit's message."""
    where = {name: exact_texts(files[name], edits[name], befores[name], opts.value,
                               opts.adopt) for name in opts.targets}
    first, *others = opts.targets
    also = {name: {"before": befores[name],
                   **{k: v for k, v in where[name].items() if v is not None}}
            for name in others}
    entry = _knob_entry(new, opts, knob, adopt=opts.adopt or opts.past.already_reverted,
                     when=opts.past.when, target=first, before=befores[first],
                     also=also or None, **where[first])
    entry = opts.past.taken_back(entry, at=new.now, command=new.command)
    return planner.plan_record(entry, adopt=opts.adopt), record_message(entry, opts)


def plan_places(new: NewEntry, opts: RecordOptions, knob: str, places: dict[str, dict]
                ) -> tuple[planner.Plan, str]:
    """The entry of a change at selected places (``--at``/``--all``), and its plan.
    ``--when`` dates it as it dates a whole knob (its history and the message's ``When:``
    trailer): an option the operator gave is honoured, never dropped."""
    first = next(iter(places.values()))
    entry = _knob_entry(new, opts, knob, when=opts.past.when, target=opts.target,
                        before=first["before"], places=places, at=str(opts.at))
    lines = ", ".join(str(p["line"]) for p in places.values())
    message = (f"record {opts.cls} {knob}={value_text(opts.value, quote=True)} in "
               f"{opts.target} at line {lines}: {entry.title}\n\n"
               f"- {entry.id} [{opts.cls}] {entry.title}\n{when_trailers(entry.history)}")
    return planner.plan_record(entry), message


def record_message(entry: Entry, opts: RecordOptions) -> str:
    """The workspace commit's message; ``When:`` trailers carry the real dates (``ledger
    log`` shows and orders by them; the commit's own time stays the record time)."""
    head = (f"record {entry.cls} {entry.knob}={value_text(opts.value, quote=True)} in "
            f"{','.join(opts.targets)}")
    if opts.past.already_reverted:
        head += " (already reverted)"
    body = f"- {entry.id} [{entry.cls}] {entry.title}\n"
    return f"{head}: {entry.title}\n\n{body}{when_trailers(entry.history)}"


def when_trailers(history: Sequence[Action]) -> str:
    """``When: TIME`` for the earliest real date of these actions (none without one)."""
    dates = sorted(a.when for a in history if a.when)
    return f"\nWhen: {dates[0]}\n" if dates else ""


__all__ = ["Asked", "HAND_REVERT", "NewEntry", "Past", "RecordOptions", "before_value",
           "entry_of", "exact_texts", "plan_knob", "plan_places", "record_message",
           "selected_places", "wants_without", "when_trailers"]
