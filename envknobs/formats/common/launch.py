"""Launch commands: which commands of a serve script start a server, and their flags.

A *launch command* is a simple command that starts a server.  Recognized, wherever they
are in the script (a PD launcher has two, prefill and decode):

* ``python -m sglang.launch_server`` (any interpreter word, ``"$PYTHON"`` included),
  ``sglang_router.launch_server`` / ``launch_router``, ``sglang serve``;
* ``vllm serve [MODEL]`` and ``python -m vllm.entrypoints.openai.api_server``;
* ``python3 -m dynamo.vllm`` / ``dynamo.sglang`` (Dynamo workers: the engine's flags);
* ``python -m engine serve`` (the bundled engine);
* ``docker run`` / ``podman run``: the container's env is its ``-e``/``--env`` options
  only (the script's exports reach it through ``-e K`` alone), and the server's flags follow the image (after a recognized server command inside,
  or directly after an image whose name says ``vllm``, whose entrypoint is the server).

Wrappers in front are stepped over, each with its own options (the table is in
:mod:`.wrappers`): ``exec``, ``env`` (its ``K=V`` arguments count as prefixes),
``nohup``, ``setsid``, ``time``, ``stdbuf``, ``numactl``, ``taskset``, ``srun``,
``mpirun``/``mpiexec``, ``torchrun ... -m MODULE``, ``uv run``, ``uvx``.

Flags are read like argparse does: ``--flag value`` / ``--flag=value``; a catalog flag
that is a switch takes no value word, an ``nargs`` flag takes every following word that
is not a flag; an unknown flag takes the next word as its value unless that word looks
like a flag.  A word after ``--`` is positional.  The last occurrence of a flag on one
command line wins (argparse keeps the last), so earlier ones are dead.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from dataclasses import field
from typing import Callable

from envknobs.formats.common import FormatError
from envknobs.formats.common.shellwords import decode_value
from envknobs.formats.common.shellwords import quote_value
from envknobs.formats.common.wrappers import WRAPPERS
from envknobs.formats.common.wrappers import TWO_WORDS
from envknobs.formats.common.wrappers import env_dropped
from envknobs.formats.common.wrappers import skip_options
from envknobs.formats.common.wrappers import wrapper_at
from envknobs.formats.common.shell_lexer import Word
from envknobs.registry import FALSE_WORDS
from envknobs.registry import TRUE_WORDS

_MODULES = {
    "sglang.launch_server": "sglang",
    "sglang_router.launch_server": "sglang",
    "sglang_router.launch_router": "sglang",
    "vllm.entrypoints.openai.api_server": "vllm",
    "vllm.entrypoints.api_server": "vllm",
    # NVIDIA Dynamo's workers take the engine's own server arguments
    "dynamo.vllm": "vllm",
    "dynamo.sglang": "sglang",
}
_NEGATIVE = re.compile(r"-\.?\d")
_ARRAY_EXPANSION = re.compile(r'"?\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}"?\Z')


def word_text(word: Word) -> str | None:
    """The word as the command receives it; None when the shell computes it."""
    return decode_value(word.text, word=True)


def is_flag_word(text: str | None) -> bool:
    return text is not None and text.startswith("-") and len(text) > 1 and not _NEGATIVE.match(text)


def array_expansion(word: Word) -> str | None:
    """``NAME`` if the word is ``"${NAME[@]}"`` (an array expanded into arguments)."""
    m = _ARRAY_EXPANSION.match(word.text)
    return m.group(1) if m else None


@dataclass
class DockerEnv:
    """One ``-e K=V`` / ``--env K=V`` / ``--env=K=V`` of a docker launch."""

    name: str
    option: Word  # the -e / --env word (the same word as ``word`` for --env=K=V)
    word: Word  # the word holding K=V (or just K: the shell's value is passed through)
    value_start: int  # offset of V in the text (in ``word``)
    passthrough: bool


@dataclass
class Shape:
    """What a launch command is made of."""

    engine: str | None  # sglang | vllm | engine | None (a docker image we cannot tell)
    prefixes: list[Word] = field(default_factory=list)  # K=V in front, and `env K=V`
    args: list[Word] = field(default_factory=list)  # the server's argument words
    docker: bool = False
    env: list[DockerEnv] = field(default_factory=list)
    env_files: list[Word] = field(default_factory=list)
    env_anchor: Word | None = None  # the `run` word: new --env options go after it
    env_option: str = "-e"  # how a new one is spelled (``--env`` for apptainer)
    clean: bool = False  # only its env options reach the server (the script's exports do not)
    container: str = ""  # that wrapper, as ``target show`` names it
    runs: Word | None = None  # the command it runs when that is no server (``bash -lc ...``)
    passes_script_env: bool = True  # an ``-e K`` gets the script's K (not behind ``sudo``)
    env_prefixes: tuple[str, ...] = ()  # APPTAINERENV_K in the script is K inside


def skip_wrappers(words: list[Word], k: int, prefixes: list[Word],
                  clearing: list[tuple[int, int, int]] | None = None) -> int:
    """The index after the wrappers at ``words[k]``; ``env K=V`` words go to ``prefixes``,
    and ``clearing`` gets ``(name, options, command)`` indices of each wrapper that gives
    the command none of the script's environment (``apptainer exec --cleanenv``)."""
    while k < len(words):
        text = word_text(words[k])
        if text is not None and text != "exec":
            text = text.rsplit("/", 1)[-1]  # /usr/bin/env, /usr/bin/numactl
        if text == "exec":
            k += 1
            while k < len(words) and (word_text(words[k]) or "").startswith("-"):
                k += 2 if word_text(words[k]) == "-a" else 1
        elif text == "env":
            k += 1
            while k < len(words):
                t = word_text(words[k]) or ""
                if t in ("-u", "--unset", "-C", "--chdir", "-S"):
                    k += 2
                elif t.startswith("-"):
                    k += 1
                elif words[k].assignment():
                    prefixes.append(words[k])
                    k += 1
                else:
                    break
        else:
            if text not in WRAPPERS and text not in TWO_WORDS:
                return k
            texts = [word_text(w) for w in words]
            found = wrapper_at(texts, k)
            if found is None or found[0].container:  # docker run: read by launch_shape
                return k
            names: list[str] = []
            end = skip_options(texts, found[1], found[0], lambda t: t.startswith("-"), names)
            if clearing is not None and found[0].clears & set(names):
                clearing.append((k, found[1], end))
            k = end
    return k


def _server_start(words: list[Word], k: int) -> tuple[str, int] | None:
    """(engine, index of the first argument word) if words[k:] start a known server."""
    texts = [word_text(w) for w in words[k : k + 6]]
    program = (texts[0] or "").rsplit("/", 1)[-1] if texts else ""
    if program in ("vllm", "sglang") and len(texts) > 1 and texts[1] == "serve":
        return program, k + 2
    for j in range(1, len(texts) - 1):
        if texts[j] == "-m":
            module = texts[j + 1] or ""
            if module in _MODULES:
                return _MODULES[module], k + j + 2
            if module == "engine" and j + 2 < len(texts) and texts[j + 2] == "serve":
                return "engine", k + j + 3
            return None
    return None


def launch_shape(words: list[Word]) -> Shape | None:
    """The shape of a launch command, or None when the command starts no known server."""
    k = 0
    prefixes: list[Word] = []
    while k < len(words) and words[k].assignment():
        prefixes.append(words[k])
        k += 1
    clearing: list[tuple[int, int, int]] = []
    start, k = k, skip_wrappers(words, k, prefixes, clearing)
    if clearing:
        return container_shape(words, clearing[-1], prefixes)
    if k >= len(words):
        return None
    program = (word_text(words[k]) or "").rsplit("/", 1)[-1]
    if program in ("docker", "podman") and k + 1 < len(words) and word_text(words[k + 1]) == "run":
        shape = _docker_shape(words, k + 1, prefixes)
        # `sudo docker run -e K`: sudo gave docker none of the script's K to pass on
        dropped = env_dropped([word_text(w) for w in words], start, lambda t: t.startswith("-"))
        shape.passes_script_env = dropped is None or dropped[0] >= k
        return shape
    found = _server_start(words, k)
    if found is None:
        return None
    engine, first = found
    return Shape(engine, prefixes, words[first:], env_prefixes=_env_prefixes(words, start, k))


def _env_prefixes(words: list[Word], start: int, end: int) -> tuple[str, ...]:
    """``APPTAINERENV_``... where an ``apptainer exec`` without ``--cleanenv`` is among the
    wrappers at ``words[start:end]``: its ``APPTAINERENV_K`` wins over the script's K."""
    texts = [word_text(w) for w in words]
    for i in range(start, end):
        found = wrapper_at(texts, i)
        if found is not None and found[0].env_prefixes:
            return found[0].env_prefixes
    return ()


def _docker_shape(words: list[Word], run: int, prefixes: list[Word]) -> Shape:
    """``docker run`` / ``podman run``: only its ``-e`` options reach the container
    (``clean``; the rule is the wrappers table's), unless podman's ``--env-host``."""
    rule = WRAPPERS["docker run"]
    shape = Shape(None, prefixes, docker=True, env_anchor=words[run], clean=True)
    k = run + 1
    while k < len(words):
        text = word_text(words[k])
        if not is_flag_word(text):
            break
        option, eq, inline = (text or "").partition("=")
        if option in rule.keeps:
            shape.clean = False
        if option in ("-e", "--env"):
            holder = words[k] if eq else (words[k + 1] if k + 1 < len(words) else None)
            if holder is not None:
                _add_env(shape, words[k], holder, bool(eq))
        elif option == "--env-file":
            shape.env_files.append(words[k] if eq else words[min(k + 1, len(words) - 1)])
        k += 1 if eq or option not in rule.valued else 2
    if k >= len(words):
        return shape
    image = word_text(words[k]) or ""
    found = _server_start(words, k + 1)
    if found is not None:
        shape.engine, first = found
        shape.args = words[first:]
    else:
        shape.engine = "vllm" if "vllm" in image else ("sglang" if "sglang" in image else None)
        shape.args = words[k + 1 :]
    return shape


def container_shape(words: list[Word], wrapper: tuple[int, int, int],
                    prefixes: list[Word]) -> Shape | None:
    """The launch of ``apptainer exec --cleanenv [--env K=V ...] IMAGE CMD``: like a
    ``docker run``, only its ``--env`` options reach the command, so they are the
    launch's env and a new knob becomes one more ``--env K=V`` (issue 50).  The server is
    the command after the image when it is one; a ``bash -lc "vllm serve ..."`` script
    tells the engine by its text (its flags are the script's, not read here).  None when
    the command is no server at all."""
    name, options, command = wrapper
    said = [word_text(w) or w.text for w in words[name:command - 1]]
    clears = next(t for t in said if t in WRAPPERS["apptainer exec"].clears)
    label = f"{' '.join(said[:options - name])} {clears}"
    shape = Shape(None, prefixes, docker=True, clean=True, env_anchor=words[options - 1],
                  env_option="--env", container=label,
                  env_prefixes=WRAPPERS["apptainer exec"].env_prefixes)
    k = options
    while k < command - 1:
        text = word_text(words[k]) or ""
        option, eq, _ = text.partition("=")
        holder = words[k] if eq else words[k + 1] if k + 1 < command - 1 else None
        if option == "--env" and holder is not None and _ENV_LIST.search(holder.text):
            shape.env_files.append(holder)  # `--env A=1,B=2`: several, opaque like a file
        elif option == "--env" and holder is not None:
            _add_env(shape, words[k], holder, bool(eq))
        elif option == "--env-file":
            shape.env_files.append(words[k] if eq else words[k + 1])
        k += 1 if eq or not is_flag_word(text) or not _apptainer_valued(option) else 2
    found = _server_start(words, command) if command < len(words) else None
    if found is not None:
        shape.engine, first = found
        shape.args = words[first:]
        return shape
    script = " ".join(w.text for w in words[command:])
    for engine, said in (("vllm", "vllm"), ("sglang", "sglang")):
        if said in script:
            shape.engine, shape.runs = engine, words[command]
            return shape
    return None


_ENV_LIST = re.compile(r",[A-Za-z_][A-Za-z0-9_]*=")


def _apptainer_valued(option: str) -> bool:
    return option in WRAPPERS["apptainer exec"].valued


_ENV_NAME = re.compile(r"""["']?([A-Za-z_][A-Za-z0-9_]*)(=|["']?\Z)""")


def _add_env(shape: Shape, option: Word, holder: Word, inline: bool) -> None:
    raw, offset = holder.text, holder.start
    if inline:  # --env=K=V: the K=V part starts after the first '='
        cut = raw.index("=") + 1
        raw, offset = raw[cut:], holder.start + cut
    m = _ENV_NAME.match(raw)
    if m is None:
        return  # -e "$X": the name itself is computed
    name = m.group(1)
    # Where V starts in the source: right after `NAME=` when the word spells it plainly;
    # else (a quoted "K=V") the whole pair is rewritten on an edit.
    value_start = offset + len(name) + 1 if raw.startswith(name + "=") else -1
    shape.env.append(DockerEnv(name, option, holder, value_start, passthrough=m.group(2) != "="))


@dataclass
class FlagUse:
    """One occurrence of a flag among a launch's argument words."""

    knob: str  # the flag's knob name (--canonical-name)
    word: Word  # the flag word
    values: list[Word]  # separate value words (empty for --x=v and switches)
    form: str  # "space" | "equals" | "switch" | "negated" | "nargs"
    value: str | None  # None: computed by the shell

    @property
    def end(self) -> int:
        return (self.values[-1] if self.values else self.word).end


Lookup = Callable[[str], object]


def scan_flags(args: list[Word], lookup: Lookup) -> list[FlagUse]:
    """Every flag among ``args`` (words already expanded), in order.

    ``lookup(name)`` returns the catalog's Flag for a spelling, or None.
    """
    uses: list[FlagUse] = []
    k = 0
    while k < len(args):
        spelled = flag_spelling(args[k])
        if spelled is None:
            if word_text(args[k]) == "--":
                break
            k += 1
            continue
        use, k = _read_flag(args, k, spelled, lookup)
        uses.append(use)
    return uses


_LITERAL_FLAG = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9_.-]*)(=|\Z)")
ALL_ARGS = frozenset({'"$@"', "$@", '"$*"', "$*", '"${@}"', "${@}"})


def flag_spelling(word: Word) -> tuple[str, bool, str | None] | None:
    """``(name, has '=', inline value)`` if the word is a flag; the value None when computed."""
    m = _LITERAL_FLAG.match(word.text)
    if m is not None and not _NEGATIVE.match(word.text):
        if m.group(2):
            return m.group(1), True, decode_value(word.text[m.end() :], word=True)
        return m.group(1), False, None
    text = word_text(word)
    if not is_flag_word(text):
        return None
    name, eq, inline = text.partition("=")  # type: ignore[union-attr]
    return name, bool(eq), inline if eq else None


def _takes_value(word: Word | None) -> bool:
    if word is None or word.text in ALL_ARGS or array_expansion(word) is not None:
        return False
    return flag_spelling(word) is None


def _read_flag(
    args: list[Word], k: int, spelled: tuple[str, bool, str | None], lookup: Lookup
) -> tuple[FlagUse, int]:
    from envknobs.flags import canonical_flag

    word = args[k]
    name, eq, inline = spelled
    flag = lookup(name)
    if flag is None and name.startswith("--no-"):
        base = lookup("--" + name[5:])
        if base is not None and getattr(base, "negatable", False):
            return FlagUse(base.name, word, [], "negated", "false"), k + 1  # type: ignore[attr-defined]
    knob = flag.name if flag is not None else (canonical_flag(name) if name.startswith("--") else name)  # type: ignore[attr-defined]
    if eq:
        return FlagUse(knob, word, [], "equals", inline), k + 1
    nxt = args[k + 1] if k + 1 < len(args) else None
    nxt_text = word_text(nxt) if nxt is not None else None
    takes_value = _takes_value(nxt)
    if flag is not None and getattr(flag, "type", None) == "bool":
        return FlagUse(knob, word, [], "switch", "true"), k + 1
    if flag is not None and getattr(flag, "nargs", None):
        j = k + 1
        while j < len(args) and _takes_value(args[j]):
            j += 1
        values = args[k + 1 : j]
        texts = [word_text(w) for w in values]
        value = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
        return FlagUse(knob, word, values, "nargs", value), j
    if not takes_value:
        return FlagUse(knob, word, [], "switch", "true" if flag is None else None), k + 1
    return FlagUse(knob, word, [nxt], "space", nxt_text), k + 2  # type: ignore[list-item]


# -- flags as the catalogs know them, and as they are written ---------------------------
def flag_lookup(engine: str | None) -> Callable[[str], object]:
    """The catalog lookup for flags of an ``engine``'s launch line (None: any catalog)."""
    from envknobs.catalog import lookup_flag

    if engine == "engine":
        return lambda name: None  # the bundled engine's flags are not in the catalogs
    chosen = engine if engine in ("sglang", "vllm") else None

    def find(name: str):
        found = lookup_flag(name, chosen)
        if found is None and name.startswith("--") and "=" not in name:
            found = flag_by_prefix(name, chosen)
        return found

    return find


@functools.lru_cache(maxsize=1024)
def flag_by_prefix(name: str, engine: str | None):
    """argparse's abbreviation rule over the flag catalogs: ``--max-num-batched-token``
    is ``--max-num-batched-tokens``, where it is a prefix of that one flag only (of
    ``engine``'s catalog, or of every catalog naming one flag).  So one argument has one
    spelling in every format that reads flags through :func:`flag_lookup` (bash launch
    lines, YAML argument lists, compose commands, strings of flags), and an edit of the
    full name changes the word the file has instead of adding a second one (issue 50)."""
    from envknobs.catalog import flag_registries
    from envknobs.catalog_release import prefix_matches

    registries = flag_registries()
    names = [engine] if engine is not None else sorted(registries)
    hits = {}
    for e in names:
        registry = registries.get(e)
        if registry is None:
            continue
        for full in prefix_matches(registry, name):
            hits.setdefault(full, registry.get(full))
    return next(iter(hits.values())) if len(hits) == 1 else None


def bool_of(value: str) -> bool | None:
    word = value.strip().lower()
    return True if word in TRUE_WORDS else (False if word in FALSE_WORDS else None)


def flag_text(knob: str, value: str, lookup, equals: bool, quote=quote_value) -> str:
    """The words a new flag is written as (a switch alone, ``nargs`` values split), each
    value rendered by ``quote`` (a shell word here; the systemd format passes its own)."""
    flag = lookup(knob)
    wanted = bool_of(value)
    if flag is not None and flag.type == "bool" or flag is None and wanted is True:
        if wanted is None:
            raise FormatError(f"{knob} is a switch: true or false, not {value!r}")
        if wanted:
            return knob
        if flag is None or not flag.negatable:
            raise FormatError(f"{knob} is a switch without a --no- form: leave it out instead")
        return "--no-" + knob[2:]
    if flag is not None and flag.nargs:
        return " ".join([knob, *(quote(w) for w in value.split())])
    return f"{knob}={quote(value)}" if equals else f"{knob} {quote(value)}"
