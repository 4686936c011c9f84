"""A unit's drop-ins: ``NAME.service.d/*.conf`` beside the unit, read by systemd after it.

systemd reads every ``*.conf`` of the unit's ``.d`` directory in file-name order after
the unit itself, so a drop-in's ``Environment=`` wins over the unit's, its empty
``Environment=`` resets the unit's, its ``UnsetEnvironment=`` removes a knob, its
``EnvironmentFile=`` adds a file that wins, and its ``ExecStart=`` adds a command (or,
after an empty ``ExecStart=``, replaces the unit's).  The ledger does not edit drop-ins;
it names them (``target show``) and refuses an edit of the unit that one of them would
override, naming the drop-in's ``file:line``.  The directory read is the one next to the
unit file (where the unit is installed, the directory systemd reads); drop-ins in other
search paths (``/run/systemd/system``, ``/usr/lib/systemd/system``) are not read.  Like
``EnvironmentFile=`` files, drop-ins change on their own: they are read when asked, never
cached with the unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envknobs.formats.common import FormatError
from envknobs.formats.systemd.envfiles import Reader
from envknobs.formats.systemd.envfiles import file_knobs
from envknobs.formats.systemd.envfiles import read_file
from envknobs.formats.systemd.service import EnvFile
from envknobs.formats.systemd.unit import directives
from envknobs.formats.systemd.unit import split_words

_KEYS = ("Environment", "UnsetEnvironment", "EnvironmentFile", "ExecStart")


@dataclass(frozen=True)
class Override:
    """One directive of a drop-in that reaches what the unit sets."""

    path: str
    line: int
    key: str
    value: str
    names: tuple[str, ...]  # the env names it sets or removes (Environment=, Unset...)

    def where(self) -> str:
        return f"{self.path}:{self.line} ({self.key}={self.value})"


def drop_in_files(unit_path: str) -> list[Path]:
    """The ``*.conf`` files of the unit's drop-in directory, in the order systemd reads them."""
    unit = Path(unit_path)
    folder = unit.parent / f"{unit.name}.d"
    return sorted(p for p in folder.glob("*.conf") if p.is_file()) if folder.is_dir() else []


def overrides(unit_path: str) -> list[Override]:
    """Every ``[Service]`` directive of the drop-ins that can override the unit's env or
    command."""
    out = []
    for path in drop_in_files(unit_path):
        text = read_file(str(path)) or ""
        for d in directives(text):
            if d.section != "Service" or d.key not in _KEYS:
                continue
            names: tuple[str, ...] = ()
            if d.key in ("Environment", "UnsetEnvironment"):
                words = [w.text for w in split_words(d, relax=False) if w.error is None]
                names = tuple(w.partition("=")[0] for w in words)
            out.append(Override(str(path), d.line, d.key, d.value, names))
    return out


def _overrides_env(o: Override, knob: str, read: Reader) -> bool:
    if o.key in ("Environment", "UnsetEnvironment"):
        return knob in o.names or (o.key == "Environment" and not o.value)
    if o.key == "EnvironmentFile" and o.value:
        path = o.value[1:] if o.value.startswith("-") else o.value
        try:
            found = file_knobs(EnvFile(path.strip(), o.value.startswith("-"), o.line), read)
        except FormatError:
            return True  # it cannot tell: never a silent guess that it does not
        return found is not None and knob in found
    return False


def refuse_overridden(unit_path: str, knobs: list[tuple[str, bool]], read: Reader) -> None:
    """FormatError naming the drop-in line that would override an edit of the unit:
    ``knobs`` are (name, is a flag); a flag's edit is overridden by a drop-in's
    ``ExecStart=``, an env knob's by its ``Environment=`` / ``UnsetEnvironment=`` /
    ``EnvironmentFile=`` (a string of flags counts as the env knob it is written in)."""
    found = overrides(unit_path)
    for knob, is_flag in knobs:
        hits = [o for o in found if (o.key == "ExecStart" if is_flag else
                                     _overrides_env(o, knob, read))]
        if hits:
            raise FormatError(
                f"{knob}: the unit's drop-in {hits[0].where()} is read after the unit and "
                f"overrides it: a change in the unit would take no effect (or not the one "
                f"recorded); edit the drop-in by hand")


def drop_in_notes(unit_path: str) -> list[str]:
    """For ``target show``: each drop-in and what of the unit it overrides."""
    notes = []
    for path in drop_in_files(unit_path):
        mine = [o for o in overrides(unit_path) if o.path == str(path)]
        what = "; ".join(f"line {o.line}: {o.key}={o.value}" for o in mine) or \
            "nothing of the env or command"
        notes.append(f"drop-in {path} (read after the unit, not managed): {what}")
    return notes
