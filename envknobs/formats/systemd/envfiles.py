"""The files a unit's ``EnvironmentFile=`` lines name: what they give the service.

systemd reads them just before the start, and a variable they set wins over the
unit's ``Environment=`` lines.  An env knob edited in the unit while such a file sets
it would take no effect, so the systemd format reads those files (when they are on this
machine) and refuses the edit, naming ``file:line`` and the way to reach the knob: the
file itself as a ``dotenv`` target (:mod:`envknobs.formats.dotenv` reads the ``K=V``
lines systemd reads).  Where it cannot tell -- a required file that is not on this
machine, a path with a specifier (``%h/.env``), an unreadable file -- it refuses too,
saying why: never a silent guess that the file does not set the knob.  An optional
file (``EnvironmentFile=-PATH``) that does not exist is skipped, as systemd skips it;
a relative path is ignored by systemd (it warns) and here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from envknobs.formats.common import FormatError
from envknobs.formats.systemd.service import EnvFile
from envknobs.formats.systemd.service import Service

Reader = Callable[[str], "dict[str, int] | None"]  # path -> knob -> line (None: no file)


def file_reader(bindings: Callable[[str], dict[str, int]]) -> Reader:
    """A :data:`Reader` of real files, their ``K=V`` lines read by ``bindings`` (the dotenv
    format's reader, handed in by :func:`envknobs.formats.get_format`: this package does
    not import its parent's modules)."""
    def read(path: str) -> dict[str, int] | None:
        text = read_file(path)
        return None if text is None else bindings(text)

    return read


def read_file(path: str) -> str | None:
    """The text of ``path`` (None: no such file); FormatError when it cannot be read."""
    try:
        return Path(path).read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise FormatError(f"cannot read {path}: {e.strerror}") from None


def file_knobs(f: EnvFile, read: Reader) -> dict[str, int] | None:
    """Knob -> line of ``f``'s file; None when systemd skips the file (optional and
    missing, or a relative path); FormatError when the ledger cannot tell."""
    if not f.path.startswith("/"):
        return None
    if "%" in f.path:
        raise FormatError(f"line {f.line}: EnvironmentFile={f.path} holds a specifier the "
                          "ledger cannot resolve")
    found = read(f.path)
    if found is None and not f.optional:
        raise FormatError(f"line {f.line}: EnvironmentFile={f.path} is required but not on "
                          "this machine")
    return found


def refuse_shadowed(svc: Service, knob: str, read: Reader) -> None:
    """FormatError when an EnvironmentFile= sets ``knob`` (or may: the ledger cannot tell)."""
    for f in svc.env_files:
        try:
            found = file_knobs(f, read)
        except FormatError as e:
            raise FormatError(f"{e}: cannot tell whether it sets {knob}, which would win over "
                              "Environment=; edit by hand, or manage that file as a dotenv "
                              "target") from None
        if found is not None and knob in found:
            raise FormatError(
                f"{knob} is set in {f.path}:{found[knob]} (EnvironmentFile= at line {f.line}), "
                f"which wins over Environment=: a change in the unit would take no effect; "
                f"manage {f.path} as a dotenv target (ledger target add NAME {f.path} "
                "--format dotenv)")


def env_file_notes(svc: Service, read: Reader) -> list[str]:
    """For ``target show``: each EnvironmentFile= with the knobs it gives the service."""
    notes = []
    for f in svc.env_files:
        head = f"line {f.line}: EnvironmentFile={'-' if f.optional else ''}{f.path}"
        try:
            found = file_knobs(f, read)
        except FormatError as e:
            notes.append(f"{head}: {str(e).split(': ', 1)[-1]}; its knobs would win over "
                         "Environment=")
            continue
        if found is None:
            why = "a relative path, ignored by systemd" if not f.path.startswith("/") else \
                "not on this machine (optional: systemd skips it)"
            notes.append(f"{head}: {why}")
            continue
        given = ", ".join(f"{k} (line {n})" for k, n in found.items()) or "no knobs"
        notes.append(f"{head} gives {given}; they win over Environment=: manage that "
                     "file as a dotenv target")
    return notes
