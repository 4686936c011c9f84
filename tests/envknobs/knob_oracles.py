"""Real oracles for the format tests: bash, python-dotenv, YAML loaders; and value strategies."""

from __future__ import annotations

import dataclasses
import io
import shlex
import subprocess
from pathlib import Path

from hypothesis import strategies as st

from envknobs.formats.common.text import holds_flags

BASH = "/bin/bash"

# Values a knob may hold: anything but NUL and line breaks (and lone surrogates, which
# are not text).  Shell and quoting hazards are mixed in on purpose.
HAZARDS = [
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "${HOME}",
    "$HOME",
    "'",
    '"',
    "\\",
    "\\\\",
    "a b",
    " lead",
    "trail ",
    "#x",
    "x #y",
    "~",
    "~/x",
    "a:~/b",
    "*",
    "!x",
    "é✓",
    "",
    "no",
    "on",
    "0777",
    "1e3",
    "~",
    "null",
    "512",
    "-1",
    "a=b",
    "{x}",
    "[1]",
    "x: y",
    "- z",
    "%s",
    "\t",
]
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\n\r")
values = st.one_of(
    st.sampled_from(HAZARDS),
    st.text(_chars, max_size=24),
    st.lists(st.sampled_from(HAZARDS + ["a", "1", "x_y"]), max_size=4).map("".join),
)
# The values a knob holds as itself: a value that reads as a string of launch flags
# (``--x 1``) makes a k8s or .env variable a holder of flags, knobs of their own (refused
# as a new value, read as flags where it is found: their own tests).
plain_values = values.filter(lambda v: not holds_flags(v))
knob_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True)


def bash_source_values(path: Path, names: list[str], prelude: str = "") -> dict[str, str | None]:
    """Source ``path`` in real bash and print each variable (None when unset)."""
    script = (
        prelude
        + 'source "$1"; shift; for k in "$@"; do printf "%s\\0%s\\0" "${!k+x}" "${!k-}"; done'
    )
    out = subprocess.run(
        [BASH, "-c", script, "_", str(path), *names],
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=20,
    ).stdout
    parts = out.split(b"\0")
    found: dict[str, str | None] = {}
    for i, name in enumerate(names):
        is_set, value = parts[2 * i], parts[2 * i + 1]
        found[name] = value.decode("utf-8", "surrogateescape") if is_set else None
    return found


def bash_launch_env(path: Path) -> dict[str, str]:
    """Run a script whose launch command is ``exec env -0``; the launched environment."""
    out = subprocess.run(
        [BASH, str(path)],
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=20,
    ).stdout
    env = {}
    for entry in out.split(b"\0"):
        if entry:
            k, _, v = entry.partition(b"=")
            env[k.decode()] = v.decode("utf-8", "surrogateescape")
    return env


def dotenv_read(text: str) -> dict[str, str | None]:
    from dotenv import dotenv_values

    return dict(dotenv_values(stream=io.StringIO(text)))


def yaml11_env(text: str, container: str) -> dict[str, str]:
    """The env of ``container`` as PyYAML (a YAML 1.1 loader) reads it."""
    import yaml

    found: dict[str, str] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key in ("containers", "initContainers"):
                for c in node.get(key) or []:
                    if isinstance(c, dict) and c.get("name") == container:
                        for item in c.get("env") or []:
                            if "value" in item:
                                found[item["name"]] = item["value"]
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for doc in yaml.safe_load_all(text):
        walk(doc)
    return found


# -- launch harness: real bash runs a serve script, the launchers only report ------------
LAUNCHERS = ("python", "python3", "vllm", "sglang", "docker", "podman")
_HARNESS = r"""
__script=$1; __out=$2; shift 2
__report() {
    local i line=0 rec k
    for ((i = 0; i < ${#BASH_SOURCE[@]} - 1; i++)); do
        if [[ ${BASH_SOURCE[i+1]} == "$__script" ]]; then line=${BASH_LINENO[i]}; break; fi
    done
    printf -v rec '%s\x1f' "$__run" "$line" "$#" "$@"
    for k in "${__names[@]}"; do
        if [[ -n ${!k+x} ]]; then printf -v rec '%s1\x1f%s\x1f' "$rec" "${!k}"
        else printf -v rec '%s0\x1f\x1f' "$rec"; fi
    done
    printf '%s\x1e' "$rec" >>"$__out"
}
for __p in LAUNCHERS; do eval "$__p() { __report $__p \"\$@\"; }"; done
exec() { if (($#)); then "$@"; exit 0; fi; }
sleep() { :; }; curl() { :; }; nvidia-smi() { :; }
"""


@dataclasses.dataclass
class LaunchRecord:
    line: int  # first line of the launch command in the script
    argv: list[str]  # program and arguments, as bash passed them
    values: dict[str, str | None]  # each asked variable at the launch (None: unset)


def bash_launches(
    path: Path, names: list[str], conditions: dict[str, str] | None = None
) -> list[LaunchRecord]:
    """Source ``path`` in real bash with ``conditions`` set; every launch it reaches.

    The launch programs (python, vllm, docker, ...) are shell functions that report the
    launch line, the argv bash built and the variables ``names`` instead of starting a
    server; ``exec`` runs the command and ends the script, as it would.
    """
    return bash_launch_grid(path, names, [conditions or {}])[0]


def bash_launch_grid(
    path: Path, names: list[str], grid: list[dict[str, str]]
) -> list[list[LaunchRecord]]:
    """:func:`bash_launches` for each conditions of ``grid``, in one bash process
    (each run in its own subshell)."""
    names_decl = "__names=(" + " ".join(shlex.quote(n) for n in names) + ")\n"
    harness = _HARNESS.replace("LAUNCHERS", " ".join(LAUNCHERS))
    runs = []
    for i, conditions in enumerate(grid):
        prelude = "".join(f"{k}={shlex.quote(v)}; " for k, v in conditions.items())
        runs.append(f'( {prelude}__run={i}; source "$__script"; wait ) </dev/null\n')
    script = harness + names_decl + "".join(runs)
    report = path.with_name(path.name + ".launches")
    report.write_bytes(b"")
    subprocess.run(
        [BASH, "-c", script, "_", str(path), str(report)],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    out = report.read_bytes().decode("utf-8", "surrogateescape")
    found: list[list[LaunchRecord]] = [[] for _ in grid]
    for rec in out.split("\x1e"):
        if not rec:
            continue
        fields = rec.split("\x1f")
        run, line, argc = int(fields[0]), int(fields[1]), int(fields[2])
        argv = fields[3 : 3 + argc]
        rest = fields[3 + argc :]
        values = {n: (rest[2 * i + 1] if rest[2 * i] == "1" else None) for i, n in enumerate(names)}
        found[run].append(LaunchRecord(line, argv, values))
    return [sorted(r, key=lambda r: (r.line, r.argv)) for r in found]


def bash_syntax_ok(text: str) -> bool:
    return subprocess.run([BASH, "-n"], input=text.encode("utf-8", "surrogateescape"),
                          capture_output=True, timeout=20).returncode == 0


def argv_flags(argv: list[str]) -> list[tuple[str, str]]:
    """Every ``(flag, value)`` of an argv in order (argparse keeps the last of each).

    Independent of the format's own reader: ``--x=v``, ``--x v``, and a switch
    (``true``) when the next word is another flag or the end.
    """
    found: list[tuple[str, str]] = []
    k = 0
    while k < len(argv):
        word = argv[k]
        if word.startswith("-") and len(word) > 1 and not word[1].isdigit():
            name, eq, value = word.partition("=")
            if eq:
                found.append((name, value))
            elif k + 1 < len(argv) and not argv[k + 1].startswith("-"):
                found.append((name, argv[k + 1]))
                k += 1
            else:
                found.append((name, "true"))
        k += 1
    return found
