"""Whether the script's environment reaches the server at all (issue 50).

A launch wrapper may give the command it runs none of the script's environment:
``apptainer exec --cleanenv``, ``env -i``, ``sudo`` (see the env rules of
:mod:`.wrappers`).  An ``export K=V`` (or a ``K=V`` prefix in front of such a wrapper)
then changes the file and nothing the server reads; the write is refused, naming the
line, why, and how that wrapper passes one variable, so the ledger never exits 0 after
a change the server never sees.

Which commands are looked at: the script's launch commands when it has any (a wrapper in
front of a recognised server); else every command (a launch the reader cannot see into,
``apptainer exec ... bash -lc "vllm serve ..."``, is still the command that runs it).

Where the wrapper is ``docker``/``podman run`` or ``apptainer``/``singularity exec
--cleanenv`` the launch is read as a container launch (:func:`.launch.launch_shape`): its
``-e K=V`` / ``--env K=V`` options are the server's env and a knob is written there, so no
refusal is needed; ``target show`` names the exports above it that do not reach the
server (an ``-e K`` passes the script's K through: that export is the knob's place).
"""

from __future__ import annotations

from envknobs.formats.bash.analysis import Analysis
from envknobs.formats.common.launch import word_text
from envknobs.formats.common.wrappers import env_dropped
from envknobs.formats.common import FormatError
from envknobs.formats.common.text import line_of


def env_barriers(a: Analysis) -> list[tuple[int, str, str]]:
    """(line, what drops the env, how to pass one variable) of each command that runs the
    server (see the module docstring) with a wrapper giving it none of the script's env."""
    # a clearing wrapper read as a container launch takes its own --env options instead
    simples = [launch.simple for launch in a.launches
               if launch.shape is None or not launch.shape.clean] if a.launches \
        else list(a.tree.simples)
    out = []
    for simple in simples:
        words = simple.words
        k = 0
        while k < len(words) and words[k].assignment():
            k += 1
        found = env_dropped([word_text(w) for w in words], k, lambda t: t.startswith("-"))
        if found is not None:
            i, what, passes = found
            out.append((line_of(a.text, words[i].start), what, passes))
    return out


def barrier_notes(a: Analysis) -> list[str]:
    """``target show``'s note for each such command, and for each container launch that
    takes only its own ``--env`` options: the exports that do not reach it."""
    notes = [f"line {line}: `{what}` gives the command none of the script's environment "
             f"(only {passes} reach it): env knobs of this script are not the server's"
             for line, what, passes in env_barriers(a)]
    for launch in a.launches:
        if launch.shape is None or not launch.shape.clean:
            continue
        exported = {d.name: d for v in a.visits for d in v.state.hist
                    if d.kind == "export" and not a.script_reaches(launch, d.name)
                    and not d.name.startswith(launch.shape.env_prefixes or ("\0",))}
        named = {e.name: e.passthrough for e in launch.shape.env}
        opt, line = launch.shape.env_option, line_of(a.text, launch.simple.start)
        plain = [n for n in exported if n not in named]
        prefix = a.env_prefix_in_use(launch)
        writes = f"an export {prefix}K line" if prefix else f"an {opt} option"
        if plain:
            also = f" and its {prefix}K exports" if prefix else ""
            notes.append(f"line {line}: the server gets only this launch's {opt} options{also}; "
                         f"not the script's exports {_listed(a, exported, plain)} (recording "
                         f"one of them writes {writes})")
        dropped = [n for n in exported if named.get(n)]
        if dropped:
            notes.append(f"line {line}: its {opt} K options pass on nothing of the script's "
                         f"(the wrapper in front of it drops the environment): not its exports "
                         f"{_listed(a, exported, dropped)}")
    return notes


def _listed(a: Analysis, defs: dict, names: list[str]) -> str:
    return ", ".join(f"{n} (line {line_of(a.text, defs[n].word.start)})" for n in sorted(names))


def refuse_unreached(a: Analysis, knob: str) -> None:
    """FormatError where a wrapper keeps the script's env var ``knob`` from the server."""
    for line, what, passes in env_barriers(a)[:1]:
        raise FormatError(
            f"line {line}: `{what}` gives the command it runs none of the script's "
            f"environment, so {knob} set in the script would never reach the server; pass "
            f"it on that line instead ({passes}), by hand: the ledger does not edit a "
            "wrapper's options yet; or let the wrapper pass the environment on")
