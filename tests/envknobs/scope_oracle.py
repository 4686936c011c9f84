"""Check what the bash format reports against what real bash does, path by path."""

from __future__ import annotations

from pathlib import Path

from envknobs.catalog import lookup_flag
from envknobs.formats import get_format
from envknobs.formats.common.places import KnobSummary
from envknobs.formats.common.places import Summary
from tests.envknobs.knob_oracles import LaunchRecord
from tests.envknobs.knob_oracles import argv_flags
from tests.envknobs.knob_oracles import bash_launch_grid

BASH = get_format("bash")
ABSENT = None


def launch_of(summary: Summary, line: int) -> int:
    for launch in summary.launches:
        if launch.line == line:
            return launch.ordinal
    raise AssertionError(f"bash launched from line {line}, the format knows no launch there")


def docker_env(argv: list[str]) -> dict[str, str | None]:
    """The container env of a ``docker run`` argv (-e K=V, --env K=V, --env=K=V)."""
    env: dict[str, str | None] = {}
    k = 2
    while k < len(argv) and argv[k].startswith("-"):
        word = argv[k]
        option, eq, inline = word.partition("=")
        pair = None
        if option in ("-e", "--env"):
            pair = inline if eq else argv[k + 1]
        if pair is not None:
            name, has, value = pair.partition("=")
            env[name] = value if has else None
        k += 1 if eq or option in ("--rm", "--privileged", "-it", "-d", "--init") else 2
    return env


def observed(record: LaunchRecord, knob: KnobSummary, docker: bool, engine: str | None) -> str | None:
    """The knob's value in one launch bash made."""
    if knob.is_flag:
        value = ABSENT
        for name, v in argv_flags(record.argv):
            flag = lookup_flag(name, engine)
            negated = lookup_flag("--" + name[5:], engine) if name.startswith("--no-") else None
            if negated is not None and negated.negatable and negated.name == knob.knob:
                value = "false"
            elif (flag.name if flag else name) == knob.knob:
                value = v
        return value
    if docker and any(p.kind == "docker-env" for p in knob.places):
        return docker_env(record.argv).get(knob.knob, ABSENT)
    return record.values.get(knob.knob)


def possible(knob: KnobSummary, launch: int) -> set[str | None]:
    """Values the format says launch ``launch`` can see ("?" for a computed place)."""
    values = {("?" if p.computed else p.value) for p in knob.places if launch in p.seen_by}
    if launch in knob.absent_on or not values:
        values.add(ABSENT)
    return values


def check_reading(text: str, path: Path, grid: list[dict[str, str]]) -> None:
    """For every knob and every path: the format's value is bash's, or it says conditional
    (and then bash's value is still one of the places it names)."""
    path.write_text(text)
    summary = BASH.summary(text)
    names = [k.knob for k in summary.knobs if not k.is_flag]
    for conditions, records in zip(grid, bash_launch_grid(path, names, grid)):
        for record in records:
            ordinal = launch_of(summary, record.line)
            info = summary.launches[ordinal - 1]
            for knob in summary.knobs:
                got = observed(record, knob, info.docker, info.engine)
                can = possible(knob, ordinal)
                where = f"{knob.knob} at launch line {record.line} with {conditions}"
                if "?" in can:
                    continue
                assert got in can, f"{where}: bash sees {got!r}, the format says {can}"
                if not knob.conditional:
                    assert len(can) == 1 or knob.repeated or ABSENT in can, where
        parsed = BASH.parse(text)
        for knob in summary.knobs:
            if knob.knob in parsed:
                assert not knob.needs_selection and knob.value == parsed[knob.knob]
