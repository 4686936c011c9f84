"""`ledger upgrade plan` and `ledger record upgrade`: an engine upgrade as a change.

``upgrade plan`` reads each target, finds the release it runs (:func:`release_from`: the
release the file names — image tag, pip pin, Helm ``image.tag``, compose ``image:`` —
else ``engine:`` in ledger.yaml, else ``--from``), asks
:func:`envknobs.release_diff.changes_between` what changes between that release and
``--to``, and has the pure :func:`ledger.core.upgrade.plan_target` decide the rows.

``record upgrade`` does the same under the writer lock, rewrites the version of every
place the file names the engine's release (:func:`ledger.store.targets.release_edited`:
the tag's ``v`` and suffix such as ``-cu129`` kept) and records an ``upgrade`` entry
(``knob`` :data:`~ledger.core.identifiers.RELEASE_KNOB`, ``before``/``after`` the two specs,
``plan`` the target's plan as JSON, ``body`` as markdown) through the shared
planner/apply path, so revert and restore rewrite the version back byte for byte.
``--adopt --before SPEC`` records an upgrade already made by hand (the file must name
``--to``; nothing is written).

Decisions (the issue was silent): a release without a bundled catalog is planned with
the nearest bundled one and says so (a warning, never a refusal); a file naming two
releases of the engine is refused, every place named, with ``--from`` to select (for
``upgrade plan``); ``record upgrade`` edits a file that names one release only;
``upgrade plan`` without TARGET plans every target that runs the engine of ``--to``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import replace

from ledger.commands.catalog import engine_of
from ledger.commands.record import new_entry
from ledger.commands.session import Session
from ledger.commands.session import writing
from ledger.core import planner
from ledger.core.identifiers import ENGINE_SPEC_RE
from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.identifiers import check_class
from ledger.core.model import Entry
from ledger.core.target_file import TargetFile
from ledger.core.upgrade import Setting
from ledger.core.upgrade import TargetPlan
from ledger.core.upgrade import markdown
from ledger.core.upgrade import plan_target
from ledger.errors import InvalidValue
from ledger.errors import Refused
from ledger.errors import UsageError
from ledger.store.apply import Applied
from ledger.store.apply import apply_plan
from ledger.store.apply import drift_in
from ledger.store.targets import edit_target
from ledger.store.targets import read_target
from ledger.store.targets import release_ambiguity


def check_spec(spec: str | None, option: str) -> str:
    """``vllm==0.34.0`` as typed after ``option``, else InvalidValue naming it."""
    if not spec or not ENGINE_SPEC_RE.match(spec):
        raise InvalidValue(f"{option} {spec!r}: write the release as sglang==X or vllm==X")
    return spec


@dataclass(frozen=True)
class Release:
    spec: str  # vllm==0.30.0
    source: str  # "detected" / "declared" / "--from" / "--before"
    lines: tuple[int, ...] = ()  # where the file writes it


def release_from(ws, tf: TargetFile, engine: str, given: str | None = None,
                 option: str = "--from") -> Release:
    """The release ``tf`` runs before the upgrade: ``given`` (``--from``), else the one the
    file names, else the one ledger.yaml declares.  Several releases in the file, or none
    anywhere, are refused naming each place and ``--from``."""
    spots = [s for s in tf.release_spots() if s.engine == engine]
    if given is not None:
        lines = tuple(s.line for s in spots if s.spec == given)
        return Release(check_spec(given, option), option, lines)
    named = list(dict.fromkeys(s.spec for s in spots))
    if len(named) > 1:
        raise release_ambiguity(str(tf.path), spots,
                                f"select the release the upgrade starts from with {option} "
                                f"{engine}==VERSION")
    if named:
        return Release(named[0], "detected", tuple(s.line for s in spots))
    declared = engine_of(ws, tf.target, "")
    if declared and declared.startswith(engine + "=="):
        return Release(declared, "declared")
    raise Refused(f"{tf.path}: no {engine} release detectable{_unversioned(tf, engine)}: "
                  f"give {option} {engine}==VERSION or declare `engine:` for target "
                  f"{tf.target.name} in ledger.yaml")


def _unversioned(tf: TargetFile, engine: str) -> str:
    """The places naming the engine without a version (``vllm/vllm-openai:latest``)."""
    word = "vllm-openai" if engine == "vllm" else "sglang"
    lines = [f"{tf.path}:{n}: {ln.strip()}" for n, ln in enumerate(tf.text.splitlines(), 1)
             if re.search(rf"(?<![\w-]){word}(?:[:\"' ]|$)", ln) and "==" not in ln]
    return (" (it names the engine without a version at:\n  " + "\n  ".join(lines) + "\n)"
            if lines else "")


def settings_of(tf: TargetFile, spec: str | None) -> list[Setting]:
    """Every knob and flag the file sets, as release ``spec`` spells it, with its line."""
    from envknobs.catalog_release import release_flag_name

    out = []
    for name in tf.names():
        found = tf.knob_summary(name)
        line = found.places[0].line if found is not None and found.places else _line_of(tf, name)
        # an engine --config file's keys are its server flags, spelled without the dashes
        key = name if tf.target.flags and not name.startswith("-") else None
        flag = f"--{name}" if key is not None else name
        out.append(Setting(release_flag_name(spec, flag) or flag, tf.live(name), line, key))
    return out


def _line_of(tf: TargetFile, name: str) -> int:
    """The first line naming ``name`` (formats that keep no lines: k8s, dotenv, YAML)."""
    word = re.compile(rf"(?<![\w-]){re.escape(name.lstrip('-'))}(?![\w-])")
    for n, ln in enumerate(tf.text.splitlines(), 1):
        if word.search(ln):
            return n
    return 1


def plan_for(ws, tf: TargetFile, to: str, release: Release) -> TargetPlan:
    """One target's plan from ``release`` to ``to`` (catalogs asked here)."""
    from envknobs.registry import KnobError
    from envknobs.release_diff import changes_between
    from envknobs.release_diff import nearest
    from envknobs.release_diff import stand_in
    from envknobs.release_diff import translated_value

    engine, old = release.spec.split("==", 1)
    new = to.split("==", 1)[1]
    warnings = []
    sides = []
    for version in (old, new):
        found = stand_in(engine, version)
        if found != version:
            near = ", ".join(nearest(engine, version)) or "none"
            warnings.append(f"{engine} {version} has no bundled catalog (nearest known: {near})"
                            + (f"; planned with {found}" if found else ""))
        sides.append(found)
    changes = None
    if None not in sides and sides[0] != sides[1]:
        changes = changes_between(engine, sides[0], sides[1])
    elif old != new:
        warnings.append("no two bundled catalogs stand for the two ends: no knob changes to "
                        "compare")

    def translate(value, inverts):
        try:
            return translated_value(value, inverts)
        except KnobError as e:
            raise ValueError(str(e)) from None

    old_spec = f"{engine}=={sides[0]}" if sides[0] else None
    return plan_target(tf.target.name, str(tf.path), settings_of(tf, old_spec), release.lines,
                       release.spec, to, release.source, changes, translate=translate,
                       warnings=warnings, spelling=lambda name: _spelling(tf, name))


def _spelling(tf: TargetFile, name: str) -> str | None:
    """How ``tf``'s format writes a name it does not hold yet; None where it cannot: a
    flag in an env map or env file, an env var in an engine ``--config`` file."""
    t = tf.target
    if name.startswith("-"):
        if t.flags:
            return name.lstrip("-")
        return name if t.format in ("bash", "k8s", "systemd") else None
    return None if t.flags else name


def upgrade_plan(s: Session, names: list[str], to: str, given: str | None = None
                 ) -> list[TargetPlan]:
    """The plan of every target named (none: every target running the engine of ``to``)."""
    to = check_spec(to, "--to")
    engine = to.split("==", 1)[0]
    if given is not None and check_spec(given, "--from").split("==")[0] != engine:
        raise UsageError(f"--from {given} and --to {to} name two engines")
    ws = s.ws
    chosen = names or sorted(ws.config.targets)
    plans = []
    for name in chosen:
        tf = read_target(ws, ws.target(name))
        if not names and not _runs(ws, tf, engine):
            continue
        plans.append(plan_for(ws, tf, to, release_from(ws, tf, engine, given)))
    if not plans:
        raise Refused(f"no target runs {engine} (no image tag, pin or `engine:` names it): "
                      "name the TARGETs to plan")
    return plans


def _runs(ws, tf: TargetFile, engine: str) -> bool:
    if any(s.engine == engine for s in tf.release_spots()):
        return True
    declared = engine_of(ws, tf.target, "")
    return bool(declared and declared.startswith(engine + "=="))


def upgrade_fields(ws, tf: TargetFile, before: str | None, after: str | None) -> dict:
    """An upgrade entry's ``plan`` and ``body`` for ``tf`` from ``before`` to ``after``
    (``ledger adopt`` of an image-tag or pin change found in history)."""
    before, after = check_spec(before, "before"), check_spec(after, "after")
    plan_json = plan_for(ws, tf, after, Release(before, "adopted", _lines(tf, after))).to_dict()
    return {"plan": plan_json, "body": markdown([plan_json])}


@dataclass
class RecordedUpgrade:
    entry: Entry
    applied: Applied
    plan: TargetPlan


def record_upgrade(s: Session, target: str, to: str, *, cls: str, title: str, why: str = "",
                   adopt: bool = False, before: str | None = None, force: bool = False,
                   dry_run: bool = False) -> RecordedUpgrade:
    """Upgrade ``target`` to release ``to`` (or, with ``adopt``, record the upgrade from
    ``before`` made by hand) as one ``upgrade`` entry."""
    to = check_spec(to, "--to")
    check_class(cls)
    if adopt != (before is not None):
        raise UsageError("--adopt needs --before ENGINE==VERSION (and --before goes with "
                         "--adopt)")
    engine = to.split("==", 1)[0]
    if before is not None and check_spec(before, "--before").split("==")[0] != engine:
        raise UsageError(f"--before {before} and --to {to} name two engines")
    with writing(s, dry_run):
        entries = s.ws.entries()
        tf = read_target(s.ws, s.ws.target(target))
        drifts = drift_in(s.ws, entries, {target: tf})
        release = _before(s.ws, tf, engine, to, before, entries)
        edited = {} if adopt else {target: edit_target(tf, {RELEASE_KNOB: to})}
        tp = plan_for(s.ws, tf, to, release)
        declared = tf.target.engine
        if declared and declared != to:  # target.engine wins over the file (engine_of)
            tp = replace(tp, warnings=(*tp.warnings, (
                f"ledger.yaml declares engine: {declared} for target {target}, which knob "
                f"checks keep using: change it to {to}")))
        plan_json = tp.to_dict()
        entry = new_entry(s, kind="upgrade", cls=cls, title=title, why=why, adopt=adopt,
                          target=target, knob=RELEASE_KNOB, before=release.spec, after=to,
                          plan=plan_json, body=markdown([plan_json]))
        message = (f"{'adopt' if adopt else 'record'} {cls} upgrade {release.spec} -> {to} in "
                   f"{target}: {entry.title}\n\n- {entry.id} [{cls}] {entry.title}\n")
        applied = apply_plan(s.ws, planner.plan_record(entry, adopt=adopt), command=s.command,
                             now=s.now, message=message, force=force, dry_run=dry_run,
                             files={target: tf}, drifts=drifts, edited=edited)
    return RecordedUpgrade(applied.changed[-1], applied, tp)


_EXAMPLE = {"vllm": "vllm/vllm-openai:v0.13.0", "sglang": "lmsysorg/sglang:v0.5.7-cu129"}
_ONE_RELEASE = ("bring them to one release by hand and adopt that (`ledger record upgrade "
                "--adopt --before`), or give each its own file")


def _lines(tf: TargetFile, spec: str) -> tuple[int, ...]:
    """The lines where the file writes release ``spec`` (an adopted upgrade's rows)."""
    return tuple(s.line for s in tf.release_spots() if s.spec == spec)


def _before(ws, tf: TargetFile, engine: str, to: str, before: str | None, entries) -> Release:
    """The release before the upgrade, checked against the file and the ledger."""
    layer = planner.knob_layers(entries).get((tf.target.name, RELEASE_KNOB))
    expected = planner.layer_value(layer) if layer else None
    if before is not None:
        release = Release(check_spec(before, "--before"), "--before", _lines(tf, to))
        live = tf.live(RELEASE_KNOB)
        if live != to:
            raise Refused(f"{tf.path} names {live or 'no single release'}, not {to}: --adopt "
                          "records an upgrade already made; make it first (or drop --adopt)")
        if expected is not None and expected != release.spec:
            raise Refused(f"{tf.target.name}: the ledger expects {expected} before this "
                          f"upgrade, not {release.spec}")
        return release
    spots = [s for s in tf.release_spots() if s.engine == engine]
    if not spots:
        raise Refused(f"{tf.path} names no {engine} release to change (an image tag such as "
                      f"{_EXAMPLE[engine]}, a pip pin {engine}==X, a Helm image.tag)")
    if len({s.spec for s in spots}) > 1:
        raise release_ambiguity(str(tf.path), spots, _ONE_RELEASE)
    release = Release(spots[0].spec, "detected", tuple(s.line for s in spots))
    if release.spec == to:
        raise Refused(f"{tf.target.name} already runs {to}: nothing to record")
    if release.spec.split("==")[0] != engine:
        raise UsageError(f"{tf.target.name} runs {release.spec}, not {engine}")
    return release


__all__ = ["Release", "RecordedUpgrade", "check_spec", "plan_for", "record_upgrade",
           "release_from", "upgrade_fields", "upgrade_plan"]
