"""The edits of the bash format, one place at a time: values, removals, new places.

Each function takes the text and an analysed site and returns the new text; none of
them decides *which* place to edit (that is :mod:`envknobs.formats.bash`), and every
result is re-read and verified by the caller.
"""

from __future__ import annotations

from envknobs.formats.common import FormatError
from envknobs.formats.common.word_edit import anchor_of
from envknobs.formats.common.word_edit import insert_continuation_line
from envknobs.formats.common.word_edit import insert_line_before
from envknobs.formats.common.word_edit import insert_words
from envknobs.formats.common.word_edit import removal_span
from envknobs.formats.bash.flow import Def
from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.bash.analysis import Launch
from envknobs.formats.bash.analysis import Site
from envknobs.formats.common.shellwords import quote_value
from envknobs.formats.common.launch import ALL_ARGS
from envknobs.formats.common.launch import DockerEnv
from envknobs.formats.common.launch import FlagUse
from envknobs.formats.common.launch import array_expansion
from envknobs.formats.common.launch import bool_of
from envknobs.formats.common.launch import flag_text
from envknobs.formats.common.launch import flag_spelling
from envknobs.formats.common.text import line_of


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def computed_error(text: str, site: Site) -> FormatError:
    return FormatError(
        f"line {site.line}: {site.knob} is computed by the shell "
        f"({text[site.start:site.end].strip()!r}); make it a literal value or edit it by hand"
    )


def value_span(text: str, site: Site) -> tuple[int, int] | None:
    """The span of ``site``'s value as written (an assignment's text after ``=``, a
    flag's value word or the part after ``--x=``, a docker ``-e K=V``'s V); None where
    the site has no value word (a switch, an ``unset``, a list of words)."""
    obj = site.obj
    if isinstance(obj, Def):
        found = obj.word.assignment() if site.kind != "unset" else None
        return (found[2], obj.word.end) if found else None
    if isinstance(obj, DockerEnv):
        return (obj.value_start, obj.word.end) if obj.value_start >= 0 else _quoted_env(obj)
    if isinstance(obj, FlagUse):
        if obj.form == "space" and len(obj.values) == 1:
            return obj.values[0].start, obj.values[0].end
        if obj.form == "equals" and "=" in obj.word.text:
            return obj.word.start + obj.word.text.index("=") + 1, obj.word.end
    return None


def _quoted_env(env: DockerEnv) -> tuple[int, int] | None:
    """V's span inside a double-quoted ``-e "K=V"`` (``--env "HF_TOKEN=$HF_TOKEN"``, as
    vLLM's and SGLang's docker commands write it), where V holds no quote of its own."""
    word = env.word
    cut = word.text.index("=") + 1 if env.option is word else 0  # --env="K=V"
    pair = word.text[cut:]
    head = f'"{env.name}='
    if not (pair.startswith(head) and pair.endswith('"') and len(pair) > len(head)):
        return None
    inner = pair[len(head):-1]
    if '"' in inner or "\\" in inner:
        return None
    return word.start + cut + len(head), word.end - 1


def with_source(text: str, site: Site, source: str) -> str | None:
    """``text`` with ``site``'s value written as the shell text ``source`` (what a revert
    of a computed value writes back); None where the site has no value word.  A docker
    ``-e 'K=V'`` whose V went in quoted whole gets ``"K=SOURCE"`` back, the form that
    held an expansion."""
    span = value_span(text, site)
    if span is not None:
        return text[: span[0]] + source + text[span[1]:]
    env = site.obj
    if not isinstance(env, DockerEnv) or '"' in source or "\\" in source:
        return None
    word = env.word
    start = word.start + (word.text.index("=") + 1 if env.option is word else 0)
    return text[:start] + f'"{env.name}={source}"' + text[word.end:]


def computed_text(text: str, site: Site) -> str | None:
    """The shell text a computed ``site`` takes its value from (``${MEM_FRACTION}``,
    ``"$(nproc)"``): what the ledger records as its value, and what a revert writes back
    byte for byte.  None for a static site, or one without a single value word."""
    if not site.computed:
        return None
    span = value_span(text, site)
    return text[span[0] : span[1]] if span else None


def write_value(text: str, site: Site, value: str, lookup) -> str:
    """Give ``site`` the value ``value``, keeping its form and quoting style."""
    obj = site.obj
    if isinstance(obj, Def):
        if site.kind == "unset":
            if site.statement is None:
                raise FormatError(
                    f"line {site.line}: {site.knob} is unset among other names; edit it by hand"
                )
            return _splice(text, site.start, site.end, f"export {site.knob}={quote_value(value)}")
        # A computed value (``$(nproc)``) is replaced too: the entry records its shell
        # text as the value before, and a revert writes that text back (issue 50).
        # An append (``K+=x``) or an array keeps depending on what came before: refused.
        if site.computed and (obj.append or obj.word.array is not None):
            raise computed_error(text, site)
        _, _, value_start = obj.word.assignment()  # type: ignore[misc]
        raw = text[value_start : obj.word.end]
        return _splice(text, value_start, obj.word.end, quote_value(value, style_of=raw))
    if isinstance(obj, DockerEnv):
        return _write_docker_env(text, obj, value)
    if isinstance(obj, FlagUse):
        return _write_flag(text, site, obj, value, lookup)
    raise FormatError(f"line {site.line}: cannot edit {site.knob} here")  # pragma: no cover


def _write_docker_env(text: str, env: DockerEnv, value: str) -> str:
    word = env.word
    if env.value_start >= 0:
        raw = text[env.value_start : word.end]
        return _splice(text, env.value_start, word.end, quote_value(value, style_of=raw))
    start = word.start
    if env.option is word:  # --env="K=V": rewrite the part after --env=
        start = word.start + word.text.index("=") + 1
    raw = text[start : word.end]
    return _splice(text, start, word.end, quote_value(f"{env.name}={value}", style_of=raw))


def _write_flag(text: str, site: Site, use: FlagUse, value: str, lookup) -> str:
    word = use.word
    if use.form == "equals":
        spelled = flag_spelling(word)
        if word.text.startswith(spelled[0] + "="):  # type: ignore[index]
            start = word.start + len(spelled[0]) + 1  # type: ignore[index]
            raw = text[start : word.end]
            return _splice(text, start, word.end, quote_value(value, style_of=raw))
        return _splice(text, word.start, word.end, quote_value(f"{spelled[0]}={value}", style_of=word.text))  # type: ignore[index]
    if use.form == "space":
        v = use.values[0]
        return _splice(text, v.start, v.end, quote_value(value, style_of=v.text))
    if use.form == "nargs":
        new = " ".join(quote_value(w) for w in value.split())
        if not use.values:
            return insert_words(text, word.end, new)
        return _splice(text, use.values[0].start, use.values[-1].end, new)
    wanted = bool_of(value)
    flag = lookup(use.knob)
    if wanted is None:
        raise FormatError(
            f"line {site.line}: {use.knob} is a switch here (present or absent), not {value!r}"
        )
    if wanted == (use.form == "switch"):
        return text
    base = flag_spelling(word)[0]  # type: ignore[index]
    if wanted:  # --no-x -> --x
        return _splice(text, word.start, word.end, "--" + base[len("--no-") :])
    if flag is None or not getattr(flag, "negatable", False):
        raise FormatError(
            f"line {site.line}: {use.knob} is a switch without a --no- form; unset it instead"
        )
    return _splice(text, word.start, word.end, "--no-" + base.lstrip("-"))


# -- removals -----------------------------------------------------------------------
def launch_word_cut(text: str, site: Site) -> tuple[int, int]:
    return removal_span(
        text, site.start, site.end, in_array=site.kind == "array-flag", lines=site.kind != "prefix"
    )


def anchor_for_site(a: Analysis, site: Site) -> dict | None:
    """Where a launch word goes back after its removal (None for statement sites)."""
    if site.kind not in ("prefix", "docker-env", "flag", "array-flag"):
        return None
    cut = launch_word_cut(a.text, site)
    container = container_of(a, site)
    if container is None:
        return None
    ident, (lo, _), words = container
    previous = [w.start for w in words if w.end <= cut[0]]
    following = [w.end for w in words if w.start >= cut[1]]
    context_start = max(previous) if previous else lo
    context_end = min(following) if following else cut[1]
    return {"container": ident, **anchor_of(a.text, cut, context_start, context_end)}


def container_of(a: Analysis, site: Site):
    """(identifier, span, words) of the command or array a launch word belongs to."""
    if site.kind == "array-flag":
        owner = a._array_owner.get(id(site.obj.word))  # type: ignore[attr-defined]
        same = sorted(
            (d for c in a.cmds.values() for d in c.defs if d.name == owner.name and d.word.array is not None),
            key=lambda d: d.word.start,
        )
        index = next(i for i, d in enumerate(same) if d is owner)
        return f"array {owner.name} {index + 1}", (owner.word.start, owner.word.end), owner.word.array
    for launch in a.launches:
        s = launch.simple
        if s.start <= site.start < s.end + 1:
            return f"launch {launch.ordinal}", (s.start, s.end), s.words
    return None


def find_container(a: Analysis, ident: str) -> tuple[int, int] | None:
    kind, _, rest = ident.partition(" ")
    if kind == "launch":
        n = int(rest)
        if 1 <= n <= len(a.launches):
            s = a.launches[n - 1].simple
            return s.start, s.end
        return None
    name, _, index = rest.partition(" ")
    same = sorted(
        (d for c in a.cmds.values() for d in c.defs if d.name == name and d.word.array is not None),
        key=lambda d: d.word.start,
    )
    k = int(index) - 1
    return (same[k].word.start, same[k].word.end) if 0 <= k < len(same) else None


# -- new places ------------------------------------------------------------------------
def add_flag(a: Analysis, launch: Launch, knob: str, value: str, lookup) -> str:
    """``knob`` on ``launch``: into its only ``args=(...)`` array, else on the command itself."""
    text = a.text
    shape = launch.shape
    assert shape is not None
    uses = []
    for visit in a.visits:
        if visit.launch == launch.ordinal:
            for argv in a.argv_options(visit):
                from envknobs.formats.common.launch import scan_flags

                uses.extend(scan_flags(argv, lookup))
    valued = [u for u in uses if u.form in ("space", "equals")]
    equals = sum(u.form == "equals" for u in valued) * 2 > len(valued)
    new = flag_text(knob, value, lookup, equals)
    array = _own_array(a, launch)
    if array is not None:
        return _add_to_array(text, array, new)
    args = [w for w in shape.args if w.text not in ALL_ARGS and array_expansion(w) is None]
    words = launch.simple.words
    last = args[-1] if args else (shape.args[-1] if shape.args else words[-1])
    first_line = line_of(text, words[0].start)
    # The last word may be a value on its own line (`--kv-transfer-config \` then the
    # JSON): the new line goes before its flag's line, never between the two.
    owner = next((u for u in uses if u.values and u.values[-1].start == last.start), None)
    anchor = owner.word if owner is not None else last
    if line_of(text, anchor.start) > first_line and _line_starts_with_arg(text, anchor, shape.args):
        return insert_continuation_line(text, anchor.start, new)
    return insert_words(text, last.end, new)


def _line_starts_with_arg(text: str, word, args) -> bool:
    line = line_of(text, word.start)
    on_line = [w for w in args if line_of(text, w.start) == line]
    from envknobs.formats.common.text import line_start

    return bool(on_line) and text[line_start(text, on_line[0].start) : on_line[0].start].strip() == ""


def _own_array(a: Analysis, launch: Launch) -> Def | None:
    """The one array literal expanded on ``launch`` that no other launch expands."""
    names = [n for n in (array_expansion(w) for w in launch.shape.args) if n]  # type: ignore[union-attr]
    if len(names) != 1:
        return None
    others = [
        l for l in a.launches
        if l is not launch and l.shape and any(array_expansion(w) == names[0] for w in l.shape.args)
    ]
    histories = {h for v in a.visits if v.launch == launch.ordinal for h in v.state.get(names[0])}
    if others or len(histories) != 1:
        return None
    (history,) = histories
    return history[0] if len(history) == 1 else None


def _add_to_array(text: str, array: Def, new: str) -> str:
    word = array.word
    close = word.end - 1  # the ')'
    elements = word.array or []
    from envknobs.formats.common.text import line_start

    if text[line_start(text, close) : close].strip() == "" and line_of(text, close) > line_of(text, word.start):
        indent = "    "
        if elements:
            from envknobs.formats.common.text import indent_at

            indent = indent_at(text, elements[-1].start)
        return insert_line_before(text, close, new, indent)
    if elements:
        return insert_words(text, elements[-1].end, new)
    return text[:close] + new + text[close:]


def add_docker_env(text: str, launch: Launch, knob: str, value: str) -> str:
    """A new ``-e K=V`` next to the launch's other ``--env`` options, in their form."""
    shape = launch.shape
    assert shape is not None and shape.docker
    if not shape.env:
        return insert_words(text, shape.env_anchor.end,  # type: ignore[union-attr]
                            f"{shape.env_option} {quote_value(f'{knob}={value}')}")
    last = shape.env[-1]
    holder = last.word
    style = holder.text if last.option is not holder else holder.text[holder.text.index("=") + 1 :]
    pair = quote_value(f"{knob}={value}", style_of=style if style[:1] in "'\"" else None)
    opt = last.option.text.split("=", 1)[0]
    new = f"{opt}={pair}" if last.option is holder else f"{opt} {pair}"
    from envknobs.formats.common.text import line_start

    alone = text[line_start(text, last.option.start) : last.option.start].strip() == ""
    if alone and line_of(text, last.option.start) > line_of(text, launch.simple.start):
        return insert_continuation_line(text, last.option.start, new)
    return insert_words(text, holder.end, new)


def add_prefix(text: str, launch: Launch, knob: str, value: str) -> str:
    start = launch.simple.start
    return text[:start] + f"{knob}={quote_value(value)} " + text[start:]
