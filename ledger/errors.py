"""The one error hierarchy of the ledger.

Every failure the core reports is a :class:`LedgerError` subclass.  Each carries the
fields it is about and builds its message in ``__str__``; ``exit_code`` is what the
CLI exits with.  ``ledger/cli.py`` catches :class:`LedgerError` once, prints
``error: <message>`` on stderr and exits; ``--debug`` re-raises with the traceback.
"""

from __future__ import annotations

from typing import Sequence

from ledger.values import value_text


class LedgerError(Exception):
    """Base of every error the ledger reports to the operator."""

    exit_code = 1

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(LedgerError):
    """The command line asks for something that does not make sense."""

    exit_code = 2


class WorkspaceNotFound(LedgerError):
    def __init__(self, start: str) -> None:
        super().__init__()
        self.start = start

    def __str__(self) -> str:
        return (
            f"no ledger workspace found at or above {self.start} "
            "(run `ledger init`, pass -C DIR or set LEDGER_WORKSPACE)"
        )


class FileError(LedgerError):
    """Something is wrong with one file: ``path[:line]: problem``."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        super().__init__()
        self.path = path
        self.problem = problem
        self.line = line

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.problem}"


class ConfigError(FileError):
    """A workspace file (ledger.yaml, entries.jsonl) is malformed."""


class IntentError(FileError):
    """The intent record an interrupted command left behind cannot be trusted."""

    def __str__(self) -> str:
        return (super().__str__() + ". Run `ledger doctor` to see what the interrupted command "
                "touched; `ledger doctor --repair` sets the record aside")


class RecoveryError(LedgerError):
    """Recovery of an interrupted command cannot finish safely (the record stays)."""


class EntryNotFound(LedgerError):
    def __init__(self, ref: str) -> None:
        super().__init__()
        self.ref = ref

    def __str__(self) -> str:
        return f"no entry matches {self.ref!r} (see `ledger list`)"


class AmbiguousEntry(LedgerError):
    def __init__(self, ref: str, candidates: Sequence[str]) -> None:
        super().__init__()
        self.ref = ref
        self.candidates = list(candidates)

    def __str__(self) -> str:
        shown = ", ".join(self.candidates[:8])
        more = " …" if len(self.candidates) > 8 else ""
        return f"{self.ref!r} is ambiguous: it matches {shown}{more}"


class InvalidValue(LedgerError):
    """A knob name, knob value, class, target name or path the user gave is invalid."""


class TargetError(FileError):
    """A target file cannot be read, parsed or edited."""


class AmbiguousPlace(LedgerError):
    """A knob has several places that take effect (or none that always does) and the
    command did not say which: the message names every place as ``file:line``."""

    def __init__(self, message: str, places: Sequence[dict] = ()) -> None:
        super().__init__()
        self.message = message
        self.places = list(places)  # {"path", "line", "scope", "text"} per place

    def __str__(self) -> str:
        return self.message


class Drift:
    """One live value that differs from what the ledger expects."""

    __slots__ = ("path", "knob", "expected", "found")

    def __init__(self, path: str, knob: str, expected: str | None, found: str | None) -> None:
        self.path = path
        self.knob = knob
        self.expected = expected
        self.found = found

    def to_dict(self) -> dict:
        return {"path": self.path, "knob": self.knob, "expected": self.expected,
                "found": self.found}

    def describe(self) -> str:
        return (f"{self.path}: {self.knob} expected {value_text(self.expected, quote=True)}, "
                f"found {value_text(self.found, quote=True)}")


class DriftError(LedgerError):
    """Live files differ from the ledger; mutating commands refuse unless --force."""

    def __init__(self, drifts: Sequence[Drift]) -> None:
        super().__init__()
        self.drifts = list(drifts)

    def __str__(self) -> str:
        lines = [d.describe() for d in self.drifts]
        return (
            "live configuration differs from the ledger (edited by hand?):\n  "
            + "\n  ".join(lines)
            + "\nrecord the change with `ledger record knob --adopt`, put the file back, "
            "or pass --force to overwrite"
        )


class Refused(LedgerError):
    """The command is valid but the ledger's rules say no (stated in the message)."""


class LockHeld(LedgerError):
    def __init__(self, path: str, holder: str) -> None:
        super().__init__()
        self.path = path
        self.holder = holder

    def __str__(self) -> str:
        return (
            f"another ledger command is changing this workspace ({self.holder}); "
            f"lock file {self.path}. Try again when it has finished."
        )


class PatchError(LedgerError):
    """A patch cannot be stored, applied, reverted or restored."""


class GitError(LedgerError):
    """A git operation on the workspace or the engine repo failed."""


class EvidenceError(LedgerError):
    """Evidence cannot be collected, imported or read."""


class BackupError(LedgerError):
    """The backup store cannot snapshot, find or restore a backup."""


class MergeConflict(LedgerError):
    """Two ledgers cannot be merged without a choice only the operators can make.

    ``pairs``: (remote entry, local entry, what they both touch) per conflict, each entry
    described with its id, slug, and who recorded it when; ``hint``: the commands that
    resolve it.  Nothing was changed.
    """

    def __init__(self, pairs: Sequence[tuple[str, str, str]], hint: str = "",
                 where: str = "") -> None:
        super().__init__()
        self.pairs = list(pairs)
        self.hint = hint
        self.where = where

    def __str__(self) -> str:
        head = f"cannot merge {self.where}: " if self.where else "cannot merge the ledgers: "
        lines = [f"both sides changed {what}:\n    remote: {theirs}\n    local:  {ours}"
                 for theirs, ours, what in self.pairs]
        text = head + f"{len(lines)} conflict(s); nothing was changed\n  " + "\n  ".join(lines)
        return text + (f"\n{self.hint}" if self.hint else "")


class Interrupted(LedgerError):
    """Ctrl-C or SIGTERM stopped a command: what it put back, and what it kept.

    Exit 130 (128 + SIGINT), as a shell reports a command stopped by Ctrl-C.  Raised by the
    layer that knows what a stop leaves behind (a transaction, a bisect, an A/B run);
    the CLI words a bare interrupt that no layer claimed.
    """

    exit_code = 130

    def __init__(self, what: str, put_back: str, kept: str = "") -> None:
        super().__init__()
        self.what = what
        self.put_back = put_back
        self.kept = kept

    def __str__(self) -> str:
        return f"interrupted: {self.what}: {self.put_back}" + (f"; {self.kept}" if self.kept
                                                                else "")
