"""Reports of an analysed script: places, the summary, fingerprints, where a new knob goes."""

from __future__ import annotations

from envknobs.formats.common import FormatError
from envknobs.formats.bash.flow import Cmd
from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.bash.analysis import KnobState
from envknobs.formats.bash.tree import Simple
from envknobs.formats.common.launch import ALL_ARGS
from envknobs.formats.common.launch import array_expansion
from envknobs.formats.common.launch import flag_spelling
from envknobs.formats.common.launch import word_text
from envknobs.formats.common.text import indent_at
from envknobs.formats.common.text import line_end
from envknobs.formats.common.text import line_of
from envknobs.formats.common.text import line_start
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import LaunchInfo
from envknobs.formats.common.places import Place
from envknobs.formats.common.places import Summary


def to_places(a: Analysis, state: KnobState) -> tuple[Place, ...]:
    from envknobs.formats.bash.write import anchor_for_site
    from envknobs.formats.bash.write import computed_text

    return tuple(
        Place(
            knob=state.knob, key=state.key(s), line=s.line, kind=s.kind, scope=s.scope,
            value=s.value, computed=s.computed, launch=s.launch,
            raw=a.text[s.start : s.end], anchor=anchor_for_site(a, s),
            seen_by=tuple(sorted({n for n, seen in state.per_visit if s in seen})),
            expr=computed_text(a.text, s),
        )
        for s in state.places
    )


def summarize(a: Analysis) -> Summary:
    """What ``target show`` reports of an analysed script (made once per analysis)."""
    if a.summary is None:
        a.summary = _summarize(a)
    return a.summary


def _summarize(a: Analysis) -> Summary:
    knobs = tuple(
        KnobSummary(
            k, to_places(a, st), st.conditional, st.repeated, k.startswith("-"),
            tuple(sorted({n for n, seen in st.per_visit if None in seen})),
        )
        for k, st in sorted(a.knobs.items(), key=lambda kv: _first(kv[1]))
    )
    launches = tuple(_launch_info(a, launch) for launch in a.launches)
    notes = []
    if not a.launches:
        notes.append("no launch command found: knobs are read as the end of the script sees them")
    notes += _unrecognised(a)
    for info in launches:
        if not info.reached:
            notes.append(f"the launch command at line {info.line} is never reached")
        for path, line in info.env_files:
            notes.append(
                f"line {line}: the container's env also comes from --env-file {path}: "
                "manage that file as a dotenv target"
            )
        if info.opaque:
            notes.append(
                f"line {info.line}: the launch also takes {', '.join(info.opaque)}, "
                "which the ledger cannot see into"
            )
    return Summary(knobs, launches, tuple(notes))


# Commands that take --options but start no server: never named as a launch.
_UTILITIES = frozenset("""echo printf curl wget pip pip3 mkdir cp mv rm ln chmod chown sleep
    kill wait cd source . set test [ nvidia-smi tee cat grep sed awk git huggingface-cli hf
    ray docker kubectl uv conda apt-get apt yum tar unzip ls sort head tail""".split())


def _unrecognised(a: Analysis) -> list[str]:
    """Commands that look like a launch (they pass ``--flags``) but that the reader does
    not recognise as a server (see :mod:`.wrappers`): named, never guessed at."""
    from envknobs.formats.common.launch import skip_wrappers

    found = []
    shaped = {id(launch.simple) for launch in a.launches if launch.shape is not None}
    for s in a.tree.simples:
        cmd = a.cmds[id(s)]
        if cmd.kind not in ("command", "exec") or id(s) in shaped:
            continue
        k = skip_wrappers(s.words, len(cmd.prefixes), [])
        texts = [word_text(w) or w.text for w in s.words[k:]]
        program = texts[0].rsplit("/", 1)[-1] if texts else ""
        if program in _UTILITIES or not any(t.startswith("--") for t in texts[1:]):
            continue
        found.append(f"line {line_of(a.text, s.start)}: {texts[0]!r} passes flags but is no "
                     "server launch the ledger recognises (vllm serve, python -m "
                     "sglang.launch_server, the wrappers in front of them ...): its flags "
                     "are not read")
    return found[:5]


def _first(state: KnobState) -> int:
    return min((s.start for s in state.places), default=0)


def _launch_info(a: Analysis, launch) -> LaunchInfo:
    shape = launch.shape
    text = a.text
    env_files: tuple = ()
    opaque: list[str] = []
    if shape is not None:
        env_files = tuple((word_text(w), line_of(text, w.start)) for w in shape.env_files)
        values: set[int] = set()
        for visit in a.visits:
            if visit.launch == launch.ordinal:
                for uses in a.flags_seen(visit):
                    for site in uses.values():
                        values.update(id(w) for w in site.obj.values)  # type: ignore[attr-defined]
        for w in shape.args:
            if id(w) in values or array_expansion(w) is not None:
                continue
            # A quoted "$X" is one argument; $X unquoted, "$@" may be any number of flags.
            splits = w.text[:1] not in "'\"" and word_text(w) is None
            if w.text in ALL_ARGS or (splits and flag_spelling(w) is None):
                opaque.append(w.text)
    return LaunchInfo(
        ordinal=launch.ordinal,
        line=line_of(text, launch.simple.start),
        end_line=line_of(text, launch.simple.end),
        engine=launch.engine,
        docker=bool(shape and shape.docker),
        env_files=env_files,
        opaque=tuple(dict.fromkeys(opaque)),
        reached=any(v.launch == launch.ordinal for v in a.visits),
        container=shape.container if shape is not None else "",
    )


def entry(state: KnobState, site) -> tuple | None:
    if site is None:
        return None
    if site.kind == "unset":
        return (state.key(site), None, "unset")
    return (state.key(site), site.value, site.computed)


def fingerprint(state: KnobState) -> tuple:
    return tuple((launch, frozenset(entry(state, s) for s in seen)) for launch, seen in state.per_visit)


def fingerprints(a: Analysis) -> dict[str, tuple]:
    """Knob -> what every visit sees (keys, values): equal before and after an edit of
    another knob, whatever lines moved."""
    return {k: fingerprint(st) for k, st in a.knobs.items()}


def fingerprints_except(before: Analysis, after: Analysis, knob: str) -> list[str]:
    """The knobs other than ``knob`` that read differently in ``after``."""
    old, new = fingerprints(before), fingerprints(after)
    return sorted(k for k in set(old) | set(new) if k != knob and old.get(k) != new.get(k))


def insertion_point(a: Analysis, knob: str) -> tuple[int, str]:
    """Where a new ``export`` line goes (offset, indentation): at top level, before every
    launch.  FormatError when the launches sit inside the script's first command."""
    text, items = a.text, a.tree.root.items
    boundary = min((v.root_item for v in a.visits if v.launch), default=len(items))
    starts = a.tree.root.starts
    limit = len(text) if boundary >= len(items) else line_start(text, starts[boundary])
    top = [s for s in a.tree.simples if not s.scope and s.end <= limit]
    cmds: dict[int, Cmd] = a.cmds
    exports = [s for s in top if cmds[id(s)].kind == "assign" and s.words[0].text == "export"]
    if exports:
        anchor = exports[-1]
        pos = line_end(text, anchor.end)
        for s in top:  # a later `unset K` would cancel the new line: go after it
            c = cmds[id(s)]
            if c.kind == "unset" and any(d.name == knob for d in c.defs) and s.start >= pos:
                anchor, pos = s, line_end(text, s.end)
        return pos, indent_at(text, anchor.start)
    for index, item in enumerate(items[: boundary + 1]):
        start = starts[index]
        is_assign = isinstance(item, Simple) and cmds[id(item)].kind in ("assign", "unset")
        if is_assign and index < boundary:
            continue
        if index == boundary and not isinstance(item, Simple):
            raise FormatError(
                f"line {line_of(text, start)}: no top-level place before the launch commands "
                f"for a new {knob}: they are inside the compound command starting here; "
                "add it by hand, or put it on a launch line with --at LINE"
            )
        return line_start(text, start), ""
    return len(text), ""
