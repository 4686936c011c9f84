"""What ``target show`` reports of a unit: each knob's place, the command, the notes.

Each knob has one place, the one systemd takes (the last assignment, the last
occurrence of a flag).  Kinds: ``env`` (an assignment alone on its ``Environment=``
line: its line goes and comes back whole), ``env-word`` (one of several words on its
line) and ``flag``; the last two carry an anchor, as the bash format's launch words do,
in the *container* ``env N`` (the N-th ``Environment=`` line) or ``launch 1``.
"""

from __future__ import annotations

from envknobs.formats.common.argstring import place_of
from envknobs.formats.common.word_edit import anchor_of
from envknobs.formats.common.word_edit import removal_span
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import LaunchInfo
from envknobs.formats.common.places import Place
from envknobs.formats.common.places import Summary
from envknobs.formats.common.text import line_of
from envknobs.formats.systemd import execstart as ex
from envknobs.formats.systemd.container import container_notes
from envknobs.formats.systemd.container import reaching
from envknobs.formats.systemd.service import Service
from envknobs.formats.systemd.unit import split_words


def _env_places(text: str, svc: Service, launch) -> list[KnobSummary]:
    strings = ex.launch_strings(launch)
    given = reaching(svc, launch)  # under a container launch: only what it passes on
    knob_of = {n: k for k, n in given.items()} if given is not None else {n: n for n in svc.env}
    out = []
    for name, a in svc.env.items():
        if name in strings or name not in knob_of:
            continue  # a string of flags: its flags are the knobs; or it reaches no server
        words = split_words(a.directive, relax=False)
        alone = len(words) == 1
        anchor = None
        if not alone:
            cut = removal_span(text, a.word.start, a.word.end, lines=False)
            anchor = anchor_for_word(text, words, a.word, cut, f"env {a.ordinal}")
        unset_line = svc.unset.get(name)
        value = None if unset_line else a.value
        scope = f"Environment= (line {a.directive.line})"
        if unset_line:
            scope += f", removed by UnsetEnvironment= (line {unset_line})"
        place = Place(knob=knob_of[name], key="at 1", line=line_of(text, a.word.start),
                      kind="env" if alone else "env-word", scope=scope, value=value,
                      computed=a.value is None, launch=None,
                      raw=text[a.word.start : a.word.end], anchor=anchor)
        out.append(KnobSummary(knob_of[name], (place,), False, False))
    return out


def _flag_places(text: str, launch: ex.Launch) -> list[KnobSummary]:
    values = ex.flag_values(launch)
    last = {u.knob: u for u in launch.uses}
    words = list(launch.command.words)
    out = []
    for s, use in launch.order:
        if s is not None and use.knob not in last:
            last[use.knob] = None  # in strings only: its place is in the first loop below
    for knob, use in last.items():
        held, _ = ex.holders(launch, knob)
        places = [place_of(text, s, u, values.get(knob)) for s, u in held]
        if use is None:
            out.append(KnobSummary(knob, tuple(places), False, len(places) > 1, is_flag=True))
            continue
        first = launch.word(use.word)
        cut = ex.flag_span(text, launch, use)
        end = launch.word(use.values[-1]).end if use.values else first.end
        place = Place(knob=knob, key="launch 1", line=line_of(text, first.start), kind="flag",
                      scope="ExecStart=", value=values.get(knob),
                      computed=knob not in values and use.form != "switch", launch=1,
                      raw=text[first.start : end],
                      anchor=anchor_for_word(text, words, first, cut, "launch 1"))
        out.append(KnobSummary(knob, (*places, place), False, bool(places), is_flag=True))
    return out


def _notes(text: str, svc: Service, launch: ex.Launch | None) -> list[str]:
    notes = [f"line {line}: {what}" for line, what in svc.errors]
    if len(svc.commands) > 1:
        notes.append(f"{len(svc.commands)} ExecStart= commands: flags are not read")
    if launch is not None and launch.shape is None:
        notes.append(ex.unrecognised(launch))
    if launch is not None and launch.shape is not None:
        notes += launch.notes
        resolved = {launch.command.words[i].text for i in launch.strings}
        opaque = [w.text for w in launch.command.words if w.text.startswith("$")
                  and w.text[1:2] not in ("{", "$") and w.text not in resolved]
        if opaque:
            notes.append(f"line {launch.command.directive.line}: ExecStart= also takes "
                         f"{', '.join(opaque)} (split at blanks by systemd), which the "
                         "ledger cannot see into")
    if not svc.commands:
        notes.append("no ExecStart= command")
    return notes + container_notes(svc, launch)


def summarize(text: str, svc: Service) -> Summary:
    launch = ex.launch_of(svc)
    knobs = _env_places(text, svc, launch)
    launches: tuple[LaunchInfo, ...] = ()
    if launch is not None:
        d = launch.command.directive
        knobs += _flag_places(text, launch) if launch.shape else []
        launches = (LaunchInfo(1, d.line, line_of(text, max(d.logical.end - 1, 0)),
                               launch.engine, False),)
    return Summary(tuple(knobs), launches, tuple(_notes(text, svc, launch)))


def container_span(text: str, svc: Service, ident: str) -> tuple[int, int] | None:
    """The span of ``env N`` (the N-th Environment= line) or ``launch 1`` in ``text``."""
    kind, _, n = ident.partition(" ")
    if kind == "env" and n.isdigit() and 1 <= int(n) <= len(svc.all_env):
        d = svc.all_env[int(n) - 1]
        return d.logical.at(d.value_at), d.logical.end
    if kind == "launch" and len(svc.commands) == 1:
        lg = svc.commands[0].directive.logical
        return lg.start, lg.end
    return None


def anchor_for_word(text: str, words, w, cut, ident: str) -> dict:
    """A word's anchor (see :func:`envknobs.formats.common.word_edit.anchor_of`)."""
    previous = [x.start for x in words if x.end <= cut[0]]
    following = [x.end for x in words if x.start >= cut[1]]
    start = max(previous) if previous else cut[0]
    end = min(following) if following else cut[1]
    return {"container": ident, **anchor_of(text, cut, start, end)}
