"""Real oracles for the format tests: bash, python-dotenv, YAML loaders; and value strategies."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

from hypothesis import strategies as st

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
