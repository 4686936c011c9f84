"""Which assignments reach which launch command, on every path through a serve script.

A reaching-definitions analysis over the tree of :mod:`envknobs.formats.bash.tree`.  The
state at a point of the script maps each variable to the set of its possible histories
(a tuple of the assignments that built its value: one for ``K=V``, more for ``A+=(...)``;
the empty tuple when the script has not set it).  Compound commands combine the states
of their paths:

* ``if``/``elif``/``else`` and ``case``: the union of the branches (plus "no branch ran"
  without ``else`` / ``*)``);
* loops: the union of zero, one, two... iterations (to a fixpoint), ``break``/``continue``
  included;
* ``a && b`` / ``a || b``: ``b`` may or may not run;
* subshells, pipelines and background jobs see the state but do not change it;
* function bodies run where the function is called (prefix assignments and ``local``
  last for the call), never where they are defined;
* ``exit`` ends a path; ``exec CMD`` runs CMD and ends it.

Every time the walk reaches a launch command it records a *visit*: the launch and the
state there.  A script without a launch command has one visit at its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from functools import cached_property
from typing import Mapping

from envknobs.formats.common import FormatError
from envknobs.formats.bash.tree import AndOr
from envknobs.formats.bash.tree import Background
from envknobs.formats.bash.tree import Case
from envknobs.formats.bash.tree import FuncDef
from envknobs.formats.bash.tree import Group
from envknobs.formats.bash.tree import If
from envknobs.formats.bash.tree import Loop
from envknobs.formats.bash.tree import Pipe
from envknobs.formats.bash.tree import Seq
from envknobs.formats.bash.tree import Simple
from envknobs.formats.bash.tree import Tree
from envknobs.formats.common.shellwords import decode_value
from envknobs.formats.common.shell_lexer import Word

_DECLARE = frozenset({"declare", "typeset", "readonly", "local"})
_PLAIN_DECLARE_OPTIONS = frozenset({"-x", "-g", "-r", "-gx", "-xg", "-rx", "-xr", "--"})
MAX_CALL_DEPTH = 8
MAX_STEPS = 200_000

History = tuple  # tuple[Def, ...]


@dataclass(eq=False)
class Def:
    """One assignment (or ``unset``) of a variable in the script."""

    name: str
    simple: Simple
    word: Word  # the K=V word (the NAME operand for unset)
    kind: str  # assign | export | declare | local | unset | prefix
    append: bool = False
    computed: bool = False

    @cached_property
    def value(self) -> str | None:
        """The static value; None when unset, computed, or an array (decoded once: a
        definition is read by every visit that sees it)."""
        if self.kind == "unset" or self.computed or self.append or self.word.array is not None:
            return None
        parsed = self.word.assignment()
        return None if parsed is None else decode_value(self.word.text[parsed[2] - self.word.start :])

    @property
    def is_computed(self) -> bool:
        return self.kind != "unset" and self.word.array is None and self.value is None


@dataclass
class Cmd:
    """What a simple command does to variables."""

    kind: str  # assign | unset | call | exit | return | break | continue | exec | command | other
    defs: list[Def] = field(default_factory=list)
    prefixes: list[Def] = field(default_factory=list)
    name: str | None = None


def classify(simple: Simple, functions: Mapping[str, FuncDef]) -> Cmd:
    words = simple.words
    if not words:
        return Cmd("other")  # only redirections
    k = 0
    while k < len(words) and words[k].assignment():
        k += 1
    prefix_words, rest = words[:k], words[k:]
    if not rest:
        return Cmd("assign", [_def(simple, w, "assign") for w in prefix_words])
    prefixes = [_def(simple, w, "prefix") for w in prefix_words]
    verb, args = rest[0].text, rest[1:]
    if verb in ("export", "unset") or verb in _DECLARE:
        options = [w.text for w in args if w.text.startswith("-")]
        operands = [w for w in args if not w.text.startswith("-")]
        if verb == "unset":
            if any(o not in ("--", "-v") for o in options):
                return Cmd("other", prefixes=prefixes)  # unset -f: functions
            return Cmd("unset", [Def(w.text, simple, w, "unset") for w in operands])
        if verb == "export" and any(o not in ("--",) for o in options):
            return Cmd("other", prefixes=prefixes)  # export -n / -f / -p
        kind = "export" if verb == "export" else ("local" if verb == "local" else "declare")
        odd = verb in _DECLARE and any(o not in _PLAIN_DECLARE_OPTIONS for o in options)
        defs = [_def(simple, w, kind, computed=odd) for w in operands if w.assignment()]
        return Cmd("assign", defs, prefixes)
    if verb in ("exit", "return", "break", "continue"):
        return Cmd(verb)
    if verb == "exec":
        if len(rest) == 1:
            return Cmd("other", prefixes=prefixes)  # `exec >log 2>&1`: only redirections
        return Cmd("exec", prefixes=prefixes, name=verb)
    if verb in functions:
        return Cmd("call", prefixes=prefixes, name=verb)
    return Cmd("command", prefixes=prefixes, name=verb)


def _def(simple: Simple, word: Word, kind: str, computed: bool = False) -> Def:
    name, append, _ = word.assignment()  # type: ignore[misc]
    return Def(name, simple, word, kind, append=append, computed=computed)


class State:
    """Variable -> its possible histories; and every assignment run so far."""

    __slots__ = ("vars", "hist")

    def __init__(self, vars: dict[str, frozenset] | None = None, hist: frozenset = frozenset()):
        self.vars = vars or {}
        self.hist = hist

    def get(self, name: str) -> frozenset:
        return self.vars.get(name, frozenset({()}))

    def assigned(self, defs: list[Def]) -> State:
        out = dict(self.vars)
        for d in defs:
            if d.append:
                # An append run again (in a loop) adds the same words again; keeping only
                # its last run keeps the order that decides which flag occurrence is last.
                out[d.name] = frozenset(
                    tuple(x for x in h if x is not d) + (d,) for h in out.get(d.name, frozenset({()}))
                )
            else:
                out[d.name] = frozenset({(d,)})
        return State(out, self.hist | frozenset(defs))

    def with_vars(self, names: Mapping[str, frozenset]) -> State:
        out = dict(self.vars)
        out.update(names)
        return State(out, self.hist)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.vars == other.vars and self.hist == other.hist

    __hash__ = None  # type: ignore[assignment]


def merge(*states: State | None) -> State | None:
    live = [s for s in states if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]
    names = set().union(*(s.vars for s in live))
    vars = {n: frozenset().union(*(s.get(n) for s in live)) for n in names}
    return State(vars, frozenset().union(*(s.hist for s in live)))


@dataclass
class Visit:
    launch: int  # ordinal of the launch command (1-based); 0: the end of the script
    state: State
    root_item: int  # index of the top-level item being run when it happened


class _Walker:
    def __init__(self, tree: Tree, launches: Mapping[int, int], cmds: Mapping[int, Cmd]) -> None:
        self.tree = tree
        self.launches = launches  # id(simple) -> ordinal
        self.cmds = cmds  # id(simple) -> Cmd
        self.visits: list[Visit] = []
        self.root_item = 0
        self.calls: list[str] = []
        self.loops: list[tuple[list, list]] = []  # (breaks, continues)
        self.returns: list[list] = []
        self.locals: list[set[str]] = []
        self.steps = 0

    def walk(self, node: object, st: State | None) -> State | None:
        if st is None:
            return None
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise FormatError("the script is too intricate to follow (functions calling each other?)")
        return getattr(self, "walk_" + type(node).__name__.lower())(node, st)

    def walk_seq(self, node: Seq, st: State | None) -> State | None:
        for item in node.items:
            st = self.walk(item, st)
            if st is None:
                return None
        return st

    def walk_andor(self, node: AndOr, st: State) -> State | None:
        st = self.walk(node.first, st)
        for part in node.rest:
            st = merge(st, self.walk(part, st))
        return st

    def walk_pipe(self, node: Pipe, st: State) -> State:
        for part in node.parts:
            self.walk(part, st)
        return st

    def walk_background(self, node: Background, st: State) -> State:
        self.walk(node.body, st)
        return st

    def walk_group(self, node: Group, st: State) -> State | None:
        out = self.walk(node.body, st)
        return st if node.subshell else out

    def walk_funcdef(self, node: FuncDef, st: State) -> State:
        return st  # runs where it is called

    def walk_if(self, node: If, st: State) -> State | None:
        outs = []
        rest: State | None = st
        for cond, body in node.arms:
            rest = self.walk(cond, rest)
            outs.append(self.walk(body, rest))
        outs.append(self.walk(node.orelse, rest) if node.orelse is not None else rest)
        return merge(*outs)

    def walk_case(self, node: Case, st: State) -> State | None:
        outs = [self.walk(arm, st) for arm in node.arms]
        if not node.has_default:
            outs.append(st)
        return merge(*outs)

    def walk_loop(self, node: Loop, st: State) -> State | None:
        breaks: list = []
        continues: list = []
        self.loops.append((breaks, continues))
        head: State | None = st
        try:
            for _ in range(8):
                entry = self.walk(node.cond, head) if node.cond is not None else head
                body = self.walk(node.body, entry)
                new_head = merge(head, body, *continues)
                if new_head == head:
                    break
                head = new_head
        finally:
            self.loops.pop()
        out = self.walk(node.cond, head) if node.cond is not None else head
        return merge(out, *breaks)

    def walk_simple(self, node: Simple, st: State) -> State | None:
        cmd = self.cmds[id(node)]
        ordinal = self.launches.get(id(node))
        if ordinal is not None:
            self.visits.append(Visit(ordinal, st, self.root_item))
        if cmd.kind == "assign":
            if self.locals and any(d.kind == "local" for d in cmd.defs):
                self.locals[-1].update(d.name for d in cmd.defs if d.kind == "local")
            return st.assigned(cmd.defs)
        if cmd.kind == "unset":
            return st.assigned(cmd.defs)
        if cmd.kind == "exit" or cmd.kind == "exec":
            return None
        if cmd.kind == "return" and self.returns:
            self.returns[-1].append(st)
            return None
        if cmd.kind in ("break", "continue") and self.loops:
            self.loops[-1][0 if cmd.kind == "break" else 1].append(st)
            return None
        if cmd.kind == "call":
            return self.call(cmd, st)
        return st

    def call(self, cmd: Cmd, st: State) -> State | None:
        name = cmd.name or ""
        if name in self.calls or len(self.calls) >= MAX_CALL_DEPTH:
            return st
        saved = {d.name: st.get(d.name) for d in cmd.prefixes}
        inner = st.assigned(cmd.prefixes)
        self.calls.append(name)
        self.returns.append([])
        self.locals.append(set())
        loops, self.loops = self.loops, []
        try:
            out = self.walk(self.tree.functions[name].body, inner)
            out = merge(out, *self.returns[-1])
        finally:
            self.loops = loops
            self.calls.pop()
            self.returns.pop()
            local_names = self.locals.pop()
        if out is None:
            return None
        restore = dict(saved)
        restore.update({n: st.get(n) for n in local_names})
        return out.with_vars(restore)


def walk_script(tree: Tree, launches: Mapping[int, int], cmds: Mapping[int, Cmd]) -> list[Visit]:
    """Every visit of a launch command; one at the end when there are no launches."""
    walker = _Walker(tree, launches, cmds)
    st: State | None = State()
    for index, item in enumerate(tree.root.items):
        walker.root_item = index
        st = walker.walk(item, st)
        if st is None:
            break
    if not launches and st is not None:
        walker.visits.append(Visit(0, st, len(tree.root.items)))
    return _unique(walker.visits)


def _unique(visits: list[Visit]) -> list[Visit]:
    out: list[Visit] = []
    for v in visits:
        if not any(o.launch == v.launch and o.state == v.state for o in out):
            out.append(v)
    return out
