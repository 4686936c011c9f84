"""Places: every spot of a serve script where a knob's value can take effect.

An :class:`Analysis` of a script puts the parser, the launch recognizer and the
reaching-definitions walk together, and answers, for every env knob and every launch
flag, which *sites* (assignment words, ``unset`` statements, launch prefixes, docker
``--env`` options, flag words on a launch line or in an ``args=(...)`` array) each visit
of each launch command can see.  From that follow the knob's places (every site some
visit sees), whether it is ``conditional`` (one visit can see more than one site: the
value depends on a branch) or ``repeated`` (different launches see different sites).

A place's *key* stays the same while the file is edited elsewhere: ``launch N`` for a
site on the N-th launch command itself, else ``at N`` for the N-th of the knob's other
places in file order.  Lines move; keys do not.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from envknobs.formats.bash.flow import Cmd
from envknobs.formats.bash.flow import Def
from envknobs.formats.bash.flow import Visit
from envknobs.formats.bash.flow import classify
from envknobs.formats.bash.flow import walk_script
from envknobs.formats.bash.tree import Simple
from envknobs.formats.bash.tree import parse_tree
from envknobs.formats.common.launch import DockerEnv
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.launch import Shape
from envknobs.formats.common.launch import skip_wrappers
from envknobs.formats.common.launch import array_expansion
from envknobs.formats.common.launch import flag_lookup
from envknobs.formats.common.launch import launch_shape
from envknobs.formats.common.launch import scan_flags
from envknobs.formats.common.shell_lexer import Word
from envknobs.formats.common.shellwords import expanded_names
from envknobs.formats.common.wrappers import CONTAINER_ENV_PREFIXES
from envknobs.formats.common.text import line_of

MAX_ARGV_COMBINATIONS = 64


@dataclass(eq=False)
class Site:
    """One spot in the file where a knob gets a value (or is unset)."""

    knob: str
    kind: str  # export|assign|declare|local|unset|prefix|docker-env|flag|array-flag
    start: int  # the editable span (a word, the flag and its value words, or a statement)
    end: int
    line: int
    value: str | None
    computed: bool
    scope: str
    launch: int | None  # ordinal of the launch command the site is written on
    obj: object  # Def | DockerEnv | FlagUse
    statement: Simple | None = None  # the statement when the site is all of it


@dataclass
class Launch:
    ordinal: int
    simple: Simple
    shape: Shape | None  # None: a launch by position only (`exec CMD`), without flags
    prefixes: list[Word]

    @property
    def engine(self) -> str | None:
        return self.shape.engine if self.shape else None


@dataclass
class KnobState:
    """What the analysis knows about one knob."""

    knob: str
    places: list[Site]
    keys: dict[int, str]  # id(site) -> key
    per_visit: list[tuple[int, frozenset]]  # (launch ordinal, sites seen; None = absent)

    @property
    def conditional(self) -> bool:
        return any(len(seen) > 1 for _, seen in self.per_visit)

    @property
    def repeated(self) -> bool:
        return len(self.places) > 1 and not self.conditional

    def key(self, site: Site) -> str:
        return self.keys[id(site)]


def describe_scope(scope: tuple[tuple[str, int], ...]) -> str:
    if not scope:
        return "top level"
    return " > ".join(f"{kind} (line {line})" for kind, line in scope)


class Analysis:
    """A serve script, read: launches, visits, and the sites of every knob."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = parse_tree(text)
        self.cmds: dict[int, Cmd] = {
            id(s): classify(s, self.tree.functions) for s in self.tree.simples
        }
        self.launches = self._find_launches()
        self.visits: list[Visit] = walk_script(
            self.tree, {id(l.simple): l.ordinal for l in self.launches}, self.cmds
        )
        self._sites: dict[tuple[str, int], Site] = {}
        self.summary = None  # the Summary, made once (envknobs.formats.bash.summary)
        self._array_owner = {
            id(w): d
            for c in self.cmds.values()
            for d in c.defs
            if d.word.array is not None
            for w in d.word.array
        }

    # -- launches -------------------------------------------------------------------
    def _find_launches(self) -> list[Launch]:
        simples = self.tree.simples
        found = []
        for s in simples:
            if self.cmds[id(s)].kind in ("command", "exec"):
                shape = launch_shape(s.words)
                if shape is not None:
                    found.append((s, shape))
        if not found:
            execs = [s for s in simples if self.cmds[id(s)].kind == "exec"]
            prefixed = [
                s for s in simples if self.cmds[id(s)].kind == "command" and self.cmds[id(s)].prefixes
            ]
            chosen = execs[-1:] or prefixed[-1:]
            found = [(s, None) for s in chosen]
        launches = []
        for ordinal, (s, shape) in enumerate(found, 1):
            if shape is not None:
                prefixes = shape.prefixes
            else:
                prefixes = []
                k = 0
                while k < len(s.words) and s.words[k].assignment():
                    prefixes.append(s.words[k])
                    k += 1
                skip_wrappers(s.words, k, prefixes)
            launches.append(Launch(ordinal, s, shape, prefixes))
        return launches

    def launch_of(self, line: int) -> Launch | None:
        """The launch command spanning ``line``."""
        for launch in self.launches:
            if line_of(self.text, launch.simple.start) <= line <= line_of(self.text, launch.simple.end):
                return launch
        return None

    # -- sites --------------------------------------------------------------------------
    def _site(self, kind: str, obj: object, make: Callable[[], Site]) -> Site:
        key = (kind, id(obj))
        if key not in self._sites:
            self._sites[key] = make()
        return self._sites[key]

    def def_site(self, d: Def, launch: int | None = None) -> Site:
        def make() -> Site:
            simple = d.simple
            alone = len(simple.words) == (1 if d.kind in ("assign", "prefix") else 2) and not simple.redirs
            whole = alone and d.kind != "prefix"
            start, end = (simple.start, simple.end) if whole else (d.word.start, d.word.end)
            return Site(
                d.name, d.kind, start, end, line_of(self.text, d.word.start), d.value,
                d.is_computed, describe_scope(simple.scope), launch, d,
                simple if whole else None,
            )

        return self._site("def", d, make)

    def env_site(self, env: DockerEnv, launch: int) -> Site:
        def make() -> Site:
            from envknobs.formats.common.launch import word_text

            text = word_text(env.word) if env.option is not env.word else None
            value = text.partition("=")[2] if text is not None else None
            if env.option is env.word:  # --env=K=V
                from envknobs.formats.common.shellwords import decode_value

                raw = env.word.text[env.word.text.index("=") + 1 :]
                decoded = decode_value(raw, word=True)
                value = decoded.partition("=")[2] if decoded is not None else None
            start = env.option.start
            return Site(
                env.name, "docker-env", start, env.word.end, line_of(self.text, start),
                value, value is None, describe_scope(self.launches[launch - 1].simple.scope),
                launch, env,
            )

        return self._site("env", env.word, make)

    def flag_site(self, use: FlagUse, launch: Launch) -> Site:
        def make() -> Site:
            owner = self._array_owner.get(id(use.word))
            on_launch = owner is None
            scope = launch.simple.scope if on_launch else owner.simple.scope  # type: ignore[union-attr]
            where = describe_scope(scope)
            if owner is not None:
                where += f", array {owner.name} (line {line_of(self.text, owner.word.start)})"
            return Site(
                use.knob, "flag" if on_launch else "array-flag", use.word.start, use.end,
                line_of(self.text, use.word.start), use.value, use.value is None, where,
                launch.ordinal if on_launch else None, use,
            )

        return self._site("flag", use.word, make)

    # -- what each visit sees ------------------------------------------------------------
    def env_seen(self, visit: Visit, name: str) -> frozenset:
        launch = self.launches[visit.launch - 1] if visit.launch else None
        if launch is not None:
            if launch.shape is not None and launch.shape.docker:
                env = [e for e in launch.shape.env if e.name == name]
                if env and not env[-1].passthrough:
                    return frozenset({self.env_site(env[-1], launch.ordinal)})
                if not self.script_reaches(launch, name):  # only its env options reach it
                    return self._prefixed_seen(visit, launch, name)
                if launch.shape.clean and not env:  # `--tp $TP`: the script's TP, no prefix
                    return self._script_seen(visit, name)
            if launch.shape is not None and launch.shape.env_prefixes:  # apptainer exec
                if name.startswith(launch.shape.env_prefixes):
                    return frozenset({None})  # apptainer takes it in as the name after it
                prefixed = self._prefixed_seen(visit, launch, name)  # APPTAINERENV_K wins
                if prefixed - {None}:
                    return prefixed
            return self._launch_seen(visit, launch, name)
        return self._script_seen(visit, name)

    def _launch_seen(self, visit: Visit, launch: Launch, name: str) -> frozenset:
        prefixes = [w for w in launch.prefixes if w.assignment()[0] == name]  # type: ignore[index]
        if prefixes:
            d = next(d for d in self._prefix_defs(launch) if d.word is prefixes[-1])
            return frozenset({self.def_site(d, launch.ordinal)})
        return self._script_seen(visit, name)

    def _prefixed_seen(self, visit: Visit, launch: Launch, name: str) -> frozenset:
        """What a ``--cleanenv`` apptainer launch gets as ``name`` from the script's
        ``APPTAINERENV_name`` (else ``SINGULARITYENV_name``), which apptainer passes in as
        ``name`` whatever the wrapper clears; an ``--env name=V`` wins over both (read
        before this), and APPTAINERENV_ over SINGULARITYENV_ (apptainer's order)."""
        for prefix in launch.shape.env_prefixes:  # type: ignore[union-attr]
            seen = self._launch_seen(visit, launch, prefix + name)
            if seen - {None}:
                return seen
        return frozenset({None})

    def _script_seen(self, visit: Visit, name: str) -> frozenset:
        seen = set()
        for history in visit.state.get(name):
            if not history:
                seen.add(None)
            elif history[-1].word.array is None:
                seen.add(self.def_site(history[-1]))
        return frozenset(seen)

    def env_prefix_in_use(self, launch: Launch) -> str:
        """The prefix (``APPTAINERENV_``) of the script's exports that set the container's
        env of this ``--cleanenv`` launch, where it has such exports ("" where not: a new
        knob is then an ``--env K=V`` option)."""
        shape = launch.shape
        for prefix in shape.env_prefixes if shape is not None else ():
            if any(d.name.startswith(prefix) and d.kind == "export" and d.name != prefix
                   for v in self.visits if v.launch == launch.ordinal for d in v.state.hist):
                return prefix
        return ""

    def script_reaches(self, launch: Launch, name: str) -> bool:
        """Whether the script's own assignments of ``name`` are what ``launch`` takes: always,
        but on a container launch that takes only its ``-e``/``--env`` options (``docker
        run``, ``apptainer exec --cleanenv``): there only through an ``-e K`` pass-through
        or the line's own ``$K`` (``--tp $TP``), and never where an ``-e K=V`` sets it
        (nor through ``-e K`` behind ``sudo``, which hands docker none of the script's K)."""
        shape = launch.shape
        if shape is None or not shape.clean:
            return True
        env = [e for e in shape.env if e.name == name]
        if env:
            return env[-1].passthrough and shape.passes_script_env
        return name in self.host_refs(launch)

    def host_refs(self, launch: Launch) -> set[str]:
        """The script variables the launch line expands in the server's own command
        (``--tp $TP``, ``bash -lc "vllm serve $MODEL"``): a container launch takes their
        values even where the variable never reaches the container's environment.  Those
        in the wrapper's options (``--name $NAME``, ``-B "$HF_HOME:$HF_HOME"``) are not
        the server's."""
        cached = getattr(launch, "_refs", None)
        if cached is None:
            shape, words = launch.shape, launch.simple.words
            first = (shape.runs or (shape.args[0] if shape.args else None)) if shape else None
            at = next((i for i, w in enumerate(words) if w is first), len(words))
            cached = set().union(*(expanded_names(w.text) for w in words[at:]))
            launch._refs = cached  # type: ignore[attr-defined]
        return cached

    def _prefix_defs(self, launch: Launch) -> list[Def]:
        cached = getattr(launch, "_defs", None)
        if cached is None:
            cached = [
                Def(w.assignment()[0], launch.simple, w, "prefix", append=w.assignment()[1])  # type: ignore[index]
                for w in launch.prefixes
            ]
            launch._defs = cached  # type: ignore[attr-defined]
        return cached

    def argv_options(self, visit: Visit) -> list[list[Word]]:
        """The launch's argument words with ``"${A[@]}"`` expanded, one list per possibility."""
        launch = self.launches[visit.launch - 1] if visit.launch else None
        if launch is None or launch.shape is None:
            return []
        pieces: list[list[list[Word]]] = []
        for word in launch.shape.args:
            name = array_expansion(word)
            if name is None:
                pieces.append([[word]])
                continue
            options = []
            for history in visit.state.get(name):
                words: list[Word] = []
                for d in history:
                    words.extend(d.word.array or [])
                options.append(words)
            pieces.append(options or [[]])
        combos = list(itertools.islice(itertools.product(*pieces), MAX_ARGV_COMBINATIONS + 1))
        if len(combos) > MAX_ARGV_COMBINATIONS:
            from envknobs.formats.common import FormatError

            raise FormatError(
                f"line {line_of(self.text, launch.simple.start)}: the launch command's "
                "argument arrays have too many possible contents to follow"
            )
        return [[w for piece in combo for w in piece] for combo in combos]

    def flags_seen(self, visit: Visit) -> list[dict[str, Site]]:
        launch = self.launches[visit.launch - 1] if visit.launch else None
        if launch is None:
            return []
        lookup = flag_lookup(launch.engine)
        out = []
        for argv in self.argv_options(visit):
            last: dict[str, Site] = {}
            for use in scan_flags(argv, lookup):
                last[use.knob] = self.flag_site(use, launch)
            out.append(last)
        return out

    # -- knobs ----------------------------------------------------------------------------
    @cached_property
    def knobs(self) -> dict[str, KnobState]:
        """Every knob some visit sees, in order of its first place."""
        names: list[str] = []
        for v in self.visits:
            names.extend(d.name for d in v.state.hist if d.word.array is None)
            launch = self.launches[v.launch - 1] if v.launch else None
            if launch is not None:
                names.extend(w.assignment()[0] for w in launch.prefixes)  # type: ignore[index]
                if launch.shape is not None:
                    names.extend(e.name for e in launch.shape.env)
        # APPTAINERENV_K sets K in the container (see _prefixed_seen)
        names.extend(n[len(p):] for n in list(names) for p in CONTAINER_ENV_PREFIXES
                     if n.startswith(p) and len(n) > len(p))
        per_knob: dict[str, list[tuple[int, frozenset]]] = {}
        for name in dict.fromkeys(names):
            seen = [(v.launch, self.env_seen(v, name)) for v in self.visits]
            if any(s - {None} for _, s in seen):
                per_knob[name] = seen
        for v in self.visits:
            options = self.flags_seen(v)
            for knob in dict.fromkeys(k for o in options for k in o):
                seen = frozenset(o.get(knob) for o in options)
                per_knob.setdefault(knob, []).append((v.launch, seen))
        return {k: self._state(k, seen) for k, seen in per_knob.items()}

    def _state(self, knob: str, per_visit: list[tuple[int, frozenset]]) -> KnobState:
        places = sorted({id(s): s for _, seen in per_visit for s in seen if s is not None}.values(),
                        key=lambda s: s.start)
        keys: dict[int, str] = {}
        others = 0
        for site in places:
            if site.launch is not None:
                keys[id(site)] = f"launch {site.launch}"
            else:
                others += 1
                keys[id(site)] = f"at {others}"
        return KnobState(knob, places, keys, per_visit)


# One analysis per exact text: a command reads a script, checks it, edits it and verifies
# the edit, and each step asks about the same text (or the text the step before produced).
# Analyses are never changed after they are made (their memos only fill in), and what
# they say depends on the text alone (the flag catalogs are fixed for a process), so
# the text is the whole key.  The last 256 texts are kept: a bulk revert reads every
# target before it edits any.
_ANALYSES: OrderedDict[str, Analysis] = OrderedDict()
_KEPT = 256


def analyse(text: str) -> Analysis:
    """The :class:`Analysis` of ``text``, made once per exact text (see above)."""
    found = _ANALYSES.get(text)
    if found is not None:
        _ANALYSES.move_to_end(text)
        return found
    found = Analysis(text)
    _ANALYSES[text] = found
    if len(_ANALYSES) > _KEPT:
        _ANALYSES.popitem(last=False)
    return found
