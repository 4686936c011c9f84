"""Which places an edit touches, and the checked application of place edits.

:func:`select` turns an ``at`` (None, a line, or ALL) into the sites to edit, or the
launches a new place goes on — refusing with :class:`AmbiguousKnob` rather than
choosing.  :func:`apply_edits` performs place edits and verifies, on every path, that
exactly the intended change happened (see :func:`expected_after`).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from envknobs.flags import is_flag_name
from envknobs.formats.common import FormatError
from envknobs.formats.common.word_edit import put_back
from envknobs.formats.common.word_edit import removal_span
from envknobs.formats.bash.flow import Def
from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.bash.analysis import analyse
from envknobs.formats.bash.analysis import KnobState
from envknobs.formats.bash.analysis import Launch
from envknobs.formats.bash.analysis import Site
from envknobs.formats.common.launch import flag_lookup
from envknobs.formats.bash.summary import fingerprint
from envknobs.formats.bash.summary import fingerprints
from envknobs.formats.bash.summary import to_places
from envknobs.formats.bash.write import find_container
from envknobs.formats.bash.write import launch_word_cut
from envknobs.formats.bash.write import write_value
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import remove_lines
from envknobs.formats.common.places import ALL
from envknobs.formats.common.places import AmbiguousKnob
from envknobs.formats.common.places import PlaceEdit

_LAUNCH_KINDS = ("prefix", "docker-env", "flag", "array-flag")


@dataclass
class Selection:
    state: KnobState | None
    sites: list[Site] = field(default_factory=list)
    new_on: list[Launch] = field(default_factory=list)  # launches a new place goes on
    name: str = ""  # the variable a new export sets, where not the knob (APPTAINERENV_K)

    def key(self, site: Site) -> str:
        return self.state.key(site)  # type: ignore[union-attr]


def _ambiguous(a: Analysis, state: KnobState, action: str) -> AmbiguousKnob:
    places = to_places(a, state)
    if state.conditional:
        reason = "depends on a branch of the script (conditional), set at"
    else:
        reason = f"has {len(places)} places that take effect"
    return AmbiguousKnob(state.knob, places, action, reason)


def _env_file_refusal(launches: list[Launch], knob: str, text: str) -> None:
    for launch in launches:
        if launch.shape is not None and launch.shape.env_files:
            from envknobs.formats.common.launch import word_text

            w = launch.shape.env_files[0]
            said = word_text(w) or w.text
            if "=" in said:  # apptainer's `--env A=1,B=2`: a list the ledger does not split
                raise FormatError(
                    f"line {line_of(text, w.start)}: --env {said} sets several variables in "
                    f"one option, which the ledger does not edit inside; write them as one "
                    f"--env K=V each by hand, then record {knob}")
            raise FormatError(
                f"line {line_of(text, w.start)}: the container's env also comes from "
                f"--env-file {said}: adding or removing {knob} on this launch "
                "line would not say what the container gets; manage that file as a dotenv "
                "target instead"
            )


def _new_places(a: Analysis, knob: str, action: str) -> Selection:
    servers = [l for l in a.launches if l.shape is not None]
    lines = tuple(line_of(a.text, l.simple.start) for l in (servers or a.launches))
    if is_flag_name(knob):
        if not servers:
            raise FormatError(
                f"{knob}: the script has no server launch command (python -m sglang.launch_server, "
                "vllm serve, docker run ...) to put a flag on"
            )
        if len(servers) > 1:
            raise AmbiguousKnob(knob, [], action, "is on no launch line yet; the launch commands are at", lines)
        runs = servers[0].shape.runs  # type: ignore[union-attr]
        if runs is not None:
            raise FormatError(
                f"line {line_of(a.text, runs.start)}: the server's flags are inside the script "
                f"that `{runs.text}` runs, which the ledger reads only from one string quoted "
                f"whole, without backslashes, backticks or inner quotes (envknobs.formats."
                f"bash.inner); add {knob} there by hand and record it with --adopt")
        return Selection(None, [], servers)
    docker = [l for l in a.launches if l.shape is not None and l.shape.docker]
    if docker:
        if len(a.launches) > 1:
            raise AmbiguousKnob(knob, [], action, "is on no launch line yet; the launch commands are at", lines)
        _env_file_refusal(docker, knob, a.text)
        if _passed_through(a, docker[0], knob) or knob in a.host_refs(docker[0]):
            return Selection(None)  # `-e K`, `--tp $K`: the script's K reaches it, an export
        prefix = a.env_prefix_in_use(docker[0])
        if prefix:  # the script passes its container env as APPTAINERENV_K: one more
            return Selection(None, name=prefix + knob)
        return Selection(None, [], docker)
    return Selection(None)


def _passed_through(a: Analysis, launch: Launch, knob: str) -> bool:
    """Whether the launch's last ``-e K`` for ``knob`` passes the script's K through
    (then a new knob is an ``export``, as without docker); refused where it passes none
    of it (``sudo docker run -e K``): an ``-e K=V`` beside it would be a second spelling."""
    env = [e for e in launch.shape.env if e.name == knob]  # type: ignore[union-attr]
    if not env or not env[-1].passthrough:
        return False
    if not launch.shape.passes_script_env:  # type: ignore[union-attr]
        raise FormatError(
            f"line {line_of(a.text, env[-1].word.start)}: `-e {knob}` passes the {knob} of "
            "the environment docker runs in, and the wrapper in front of it (sudo) gives "
            f"docker none of the script's; write -e {knob}=VALUE there by hand (or sudo "
            f"--preserve-env={knob}), then record {knob} again")
    return True


def select(a: Analysis, knob: str, at: int | str | None, action: str) -> Selection:
    """The sites ``at`` selects (see the module docstring)."""
    state = a.knobs.get(knob)
    places = state.places if state else []
    if at is None:
        if state is not None and (len(places) > 1 or state.conditional):
            raise _ambiguous(a, state, action)
        if places and places[0].kind == "unset":  # unset everywhere: as if absent
            return Selection(state) if action == "unset" else _new_places(a, knob, action)
        if places or action == "unset":
            return Selection(state, places[:1])
        return _new_places(a, knob, action)
    if at == ALL:
        if places or action == "unset":
            return Selection(state, list(places))
        if is_flag_name(knob):
            return Selection(None, [], [l for l in a.launches if l.shape is not None] or _new_places(a, knob, action).new_on)
        docker = [l for l in a.launches if l.shape is not None and l.shape.docker]
        _env_file_refusal(docker, knob, a.text)
        return Selection(None, [], docker)
    if isinstance(at, bool) or not isinstance(at, int):
        raise FormatError(f"--at takes a line number or 'all', not {at!r}")
    return _select_line(a, knob, state, at, action)


def _select_line(a: Analysis, knob: str, state: KnobState | None, line: int, action: str) -> Selection:
    places = state.places if state else []
    matching = [s for s in places if line_of(a.text, s.start) <= line <= line_of(a.text, s.end)]
    if len(matching) > 1:
        raise FormatError(f"line {line}: {knob} has {len(matching)} places on that line; edit it by hand")
    if matching:
        return Selection(state, matching)
    launch = a.launch_of(line)
    if launch is not None:
        on = [s for s in places if s.launch == launch.ordinal]
        if on:
            return Selection(state, on)
        if action == "set" and not (is_flag_name(knob) and launch.shape is None):
            if not is_flag_name(knob):
                _env_file_refusal([launch], knob, a.text)
            return Selection(state, [], [launch])
    listed = ", ".join(f"line {s.line}" for s in places) or "none"
    raise FormatError(f"line {line}: no place of {knob} there (its places: {listed})")


# -- applying ------------------------------------------------------------------------
def _unset_at(a: Analysis, site: Site) -> tuple[int, int, str]:
    if site.kind == "unset":
        return site.start, site.start, ""
    if site.kind in _LAUNCH_KINDS:
        if site.kind == "docker-env":
            launch = a.launches[site.launch - 1]  # type: ignore[operator]
            _env_file_refusal([launch], site.knob, a.text)
        start, end = launch_word_cut(a.text, site)
        return start, end, ""
    if site.statement is None:
        raise FormatError(
            f"line {site.line}: {site.knob} shares its statement with other assignments; "
            "edit that line by hand"
        )
    return site.start, site.end, f"unset {site.knob}"


def apply_edits(a: Analysis, knob: str, edits: list[PlaceEdit], remove_all: bool = False) -> str:
    """Apply place edits to ``a.text`` and verify them; raises FormatError."""
    text = a.text
    state = a.knobs.get(knob)
    if remove_all:
        out = remove_everywhere(a, knob)
        return _verify(a, analyse(out), knob, "absent")
    splices, put_backs, done = _splices(a, knob, edits)
    out = _spliced(text, splices)
    for e in put_backs:
        out = _put_back(out, knob, e)
    if out == text:
        return text
    expected = None if put_backs else _expected(a, state, done) if state else None
    return _verify(a, analyse(out), knob, expected, put_backs)


def _splices(a: Analysis, knob: str, edits: list[PlaceEdit]):
    """The text replacements of ``edits`` in ``a.text``, the places to put back at their
    anchors, and the edits by place key."""
    text = a.text
    state = a.knobs.get(knob)
    lookup = flag_lookup(a.launches[0].engine if a.launches else None)
    by_key = {state.key(s): s for s in state.places} if state else {}
    splices: list[tuple[int, int, str]] = []
    put_backs: list[PlaceEdit] = []
    done: dict[str, PlaceEdit] = {}
    for e in edits:
        site = by_key.get(e.key)
        if site is None:
            if e.value is not None:
                if not e.anchor:
                    raise FormatError(f"{knob}: its place {e.key!r} is no longer in the file")
                put_backs.append(e)
            continue
        done[e.key] = e
        if e.value is None:
            splices.append(_unset_at(a, site))
        elif e.raw is not None:
            splices.append((site.start, site.end, e.raw))
        elif site.value != e.value or site.kind == "unset":
            new = write_value(text, site, e.value, _lookup_for(a, site) or lookup)
            delta = len(new) - len(text)
            splices.append((site.start, site.end, new[site.start : site.end + delta]))
    return splices, put_backs, done


def _spliced(text: str, splices: list[tuple[int, int, str]]) -> str:
    out = text
    for start, end, new in sorted(splices, key=lambda s: -s[0]):
        out = out[:start] + new + out[end:]
    return out


def _lookup_for(a: Analysis, site: Site):
    launch = a.launches[site.launch - 1] if site.launch else None
    return flag_lookup(launch.engine) if launch else None


def _put_back(text: str, knob: str, e: PlaceEdit) -> str:
    anchor = e.anchor or {}
    span = find_container(analyse(text), str(anchor.get("container", "")))
    out = put_back(text, span, anchor) if span else None
    if out is None:
        raise FormatError(
            f"{knob}: cannot put its place {e.key!r} back: the text around it "
            f"({anchor.get('before', '')!r}) changed; edit it by hand"
        )
    return out


def _expected(a: Analysis, state: KnobState, done: dict[str, PlaceEdit]) -> tuple:
    def change(item):
        if item is None or item[0] not in done:
            return item
        e = done[item[0]]
        site = next(s for s in state.places if state.key(s) == item[0])
        if e.value is not None:
            return (item[0], e.value, False)
        if site.kind in _LAUNCH_KINDS:
            return None
        return (item[0], None, "unset")

    return tuple((launch, frozenset(change(i) for i in seen)) for launch, seen in fingerprint(state))


def remove_everywhere(a: Analysis, knob: str) -> str:
    """``unset`` without a selection: the one place and the dead assignments behind it."""
    cuts, _ = _removal_cuts(a, knob)
    return _applied(a.text, cuts)


def _removal_cuts(a: Analysis, knob: str) -> tuple[list[tuple[int, int, bool]], set[int]]:
    """What :func:`remove_everywhere` takes out of ``a.text`` (spans, each a whole
    statement's lines or one word), and the assignment statements (by id) it touches."""
    text = a.text
    # APPTAINERENV_K sets K behind `apptainer exec --cleanenv`: removed with K
    names = {knob} | {p + knob for l in a.launches if l.shape for p in l.shape.env_prefixes}
    defs = {id(d): d for v in a.visits for d in v.state.hist if d.name in names and d.kind != "unset"}
    if a.launches and not any(a.script_reaches(l, knob) for l in a.launches):
        # behind `docker run`, `apptainer exec --cleanenv` (no `-e K`) K's own reach nothing
        defs = {i: d for i, d in defs.items() if d.name != knob}
    cuts: list[tuple[int, int, bool]] = []
    by_statement: dict[int, list[Def]] = {}
    for d in defs.values():
        by_statement.setdefault(id(d.simple), []).append(d)
    for group in by_statement.values():
        simple = group[0].simple
        operands = [w for w in simple.words if w.assignment()]
        if len(operands) == len(group) and group[0].kind != "prefix" and not simple.redirs:
            if not _alone(text, simple.start, simple.end):
                raise FormatError(
                    f"line {line_of(text, simple.start)}: {knob} is set on a line shared with "
                    "other commands; edit that line by hand"
                )
            cuts.append((simple.start, simple.end, True))
        else:
            cuts.extend((*removal_span(text, d.word.start, d.word.end, lines=False), False) for d in group)
    state = a.knobs.get(knob)
    touched = set(by_statement)
    for site in state.places if state else []:
        if site.kind in _LAUNCH_KINDS:
            if site.kind == "docker-env":
                _env_file_refusal([a.launches[site.launch - 1]], knob, text)  # type: ignore[operator]
            cuts.append((*launch_word_cut(text, site), False))
    return cuts, touched


def edit_batch(a: Analysis, removals: list[str], changes: dict[str, str]) -> str | None:
    """Several knobs removed (as :func:`remove_everywhere` removes each) and others given
    new values, in one pass over ``a.text`` and verified once: every removed knob
    reaches no launch, every changed one reads as asked on every path, every other knob
    as before.  A changed knob must have one place that takes effect.

    None when the batch cannot be made that way: a removal sharing a statement or a
    line with another edit (one at a time could then write other text), a changed knob
    without a single place, splices that overlap, a refusal, or a verification that does
    not hold.  The caller then edits one knob at a time, which says precisely why."""
    text = a.text
    edits: list[tuple[int, int, str | bool]] = []  # (start, end, new text | whole lines?)
    removed_lines: set[int] = set()
    statements: set[int] = set()
    for knob in removals:
        try:
            cuts, touched = _removal_cuts(a, knob)
        except FormatError:
            return None
        lines = _lines(text, cuts)
        if lines & removed_lines or touched & statements:
            return None
        removed_lines |= lines
        statements |= touched
        edits += cuts
    found = _change_splices(a, changes)
    if found is None:
        return None
    splices, expected = found
    if removed_lines & _lines(text, splices):
        return None
    spans = sorted(splices)
    if any(b[0] < a_[1] for a_, b in zip(spans, spans[1:])):
        return None
    out = _applied(text, edits + splices)
    if out == text:
        return out
    after = analyse(out)
    old, new = fingerprints(a), fingerprints(after)
    gone = set(removals)
    for k in set(old) | set(new):
        if k in gone:
            continue
        want = expected.get(k)
        if want is None:
            if old.get(k) != new.get(k):
                return None
        elif _absent_as_none(new.get(k)) != _absent_as_none(want):
            return None
    for knob in removals:
        st = after.knobs.get(knob)
        if st is not None and any(e is not None and e[2] != "unset" for _, s in fingerprint(st) for e in s):
            return None
    return out


def _change_splices(a: Analysis, changes: dict[str, str]):
    """The splices giving each knob of ``changes`` its value at its one place, and what
    each then reads as; None where a knob has not one plain place."""
    splices: list[tuple[int, int, str]] = []
    expected: dict[str, tuple] = {}
    for knob, value in changes.items():
        state = a.knobs.get(knob)
        if state is None or len(state.places) != 1 or state.conditional:
            return None
        site = state.places[0]
        if site.kind == "unset" or site.computed:
            return None
        try:
            found, put_backs, done = _splices(a, knob, [PlaceEdit(state.key(site), value)])
        except FormatError:
            return None  # one at a time, the same edit says why
        if put_backs:
            return None
        splices += found
        expected[knob] = _expected(a, state, done)
    return splices, expected


def _lines(text: str, spans) -> set[int]:
    return {n for start, end, _ in spans for n in range(line_of(text, start), line_of(text, end) + 1)}


def _applied(text: str, edits: list[tuple[int, int, str | bool]]) -> str:
    """``edits`` made from the last to the first: a text replaces its span, ``True``
    removes the span's whole lines, ``False`` the span."""
    out = text
    for start, end, new in sorted(set(edits), key=lambda c: -c[0]):
        if new is True:
            out = remove_lines(out, start, end)
        elif new is False:
            out = out[:start] + out[end:]
        else:
            out = out[:start] + new + out[end:]
    return out


def _alone(text: str, start: int, end: int) -> bool:
    from envknobs.formats.common.text import line_end
    from envknobs.formats.common.text import line_start

    head = text[line_start(text, start) : start]
    tail = text[end : line_end(text, end)].strip(" \t\r\n")
    return head.strip(" \t") == "" and (tail == "" or tail.startswith("#"))


def _verify(before: Analysis, after: Analysis, knob: str, expected, put_backs=()) -> str:
    old, new = fingerprints(before), fingerprints(after)
    wrong = sorted(k for k in set(old) | set(new) if k != knob and old.get(k) != new.get(k))
    if expected == "absent":
        st = after.knobs.get(knob)
        if st is not None and any(e is not None and e[2] != "unset" for _, s in fingerprint(st) for e in s):
            wrong.append(knob)
    elif put_backs:
        st = after.knobs.get(knob)
        from envknobs.formats.bash.write import computed_text

        keys = {st.key(s): s.value if s.value is not None else computed_text(after.text, s)
                for s in st.places} if st else {}
        if any(keys.get(e.key, object()) != e.value for e in put_backs):
            wrong.append(knob)
    elif expected is not None and _absent_as_none(new.get(knob)) != _absent_as_none(expected):
        wrong.append(knob)
    if wrong:
        raise FormatError(_explain(before, after, knob, wrong))
    return after.text


def _absent_as_none(fp: tuple | None) -> tuple:
    """An ``unset K`` seen reads like no K at all (the launch gets no K either way), and
    a visit that sees no K says nothing (a flag is only listed where it appears)."""
    out = []
    for launch, seen in fp or ():
        seen = frozenset(None if e is not None and e[2] == "unset" else e for e in seen)
        if seen != {None}:
            out.append((launch, seen))
    return tuple(out)


def _explain(before: Analysis, after: Analysis, knob: str, wrong: list[str]) -> str:
    if wrong == [knob]:
        st = after.knobs.get(knob)
        seen = sorted(
            {f"line {s.line}" for _, group in (st.per_visit if st else []) for s in group if s is not None}
        )
        return (
            f"cannot change {knob} safely: after the edit a launch would still see it from "
            f"{', '.join(seen) or 'nowhere'} (select those places too with --all, or edit by hand)"
        )
    if all(k in before.knobs and k not in after.knobs for k in wrong):  # `--model "$MODEL"`
        return (f"cannot change {knob} safely: after the edit nothing would read "
                f"{', '.join(wrong)}, which only {knob} reads (they go only together, in one "
                "revert or restore of the entries of both, or by hand)")
    return (f"cannot change {knob} safely: re-reading the edited file changes "
            f"{', '.join(wrong)} (is there an unclosed quote or block near the edit?)")


def verify_added(before: Analysis, after: Analysis, knob: str, value: str, launches: list[Launch]) -> str:
    """A new place of ``knob``: every visit of ``launches`` (all, for a top-level line)
    sees exactly it, with ``value``; nothing else changed."""
    st = after.knobs.get(knob)
    ordinals = {l.ordinal for l in launches}
    ok = st is not None
    if ok:
        for launch, seen in fingerprint(st):  # type: ignore[arg-type]
            if launches and launch not in ordinals:
                continue
            values = [e for e in seen if e is not None]
            ok &= len(seen) == 1 and len(values) == 1 and values[0][1] == value and values[0][2] is False
        ok &= not launches or ordinals <= {launch for launch, _ in fingerprint(st)}  # type: ignore[arg-type]
    old, new = fingerprints(before), fingerprints(after)
    wrong = sorted(k for k in set(old) | set(new) if k != knob and old.get(k) != new.get(k))
    if not ok:
        wrong.append(knob)
    if wrong:
        raise FormatError(
            f"cannot add {knob} safely: re-reading the edited file changes "
            f"{', '.join(wrong)} (is there an unclosed quote or block near the edit?)"
        )
    return after.text

