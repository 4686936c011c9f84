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
    def __init__(self, ref: str, close: Sequence[str] = ()) -> None:
        super().__init__()
        self.ref = ref
        self.close = list(close)

    def __str__(self) -> str:
        hint = f"did you mean {' or '.join(self.close)}? " if self.close else ""
        return f"no entry matches {self.ref!r} ({hint}see `ledger list`)"


class AmbiguousEntry(LedgerError):
    def __init__(self, ref: str, candidates: Sequence[str]) -> None:
        super().__init__()
        self.ref = ref
        self.candidates = list(candidates)

    def __str__(self) -> str:
        shown = ", ".join(self.candidates[:8])
        more = " …" if len(self.candidates) > 8 else ""
        return (f"{self.ref!r} is ambiguous: it matches {shown}{more}; give more of the id "
                "or the whole slug")


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


_UNPLANNED = object()


class Drift:
    """One live value that differs from what the ledger expects.

    :meth:`planned` adds what the refused command would write there, so the message can
    say what ``--force`` really does: only mark a value the file already holds, overwrite
    a hand edit (whose value is then recorded), or go ahead leaving it as it is.
    """

    __slots__ = ("path", "knob", "expected", "found", "target", "writes", "op")

    def __init__(self, path: str, knob: str, expected: str | None, found: str | None,
                 target: str = "") -> None:
        self.path = path
        self.knob = knob
        self.expected = expected
        self.found = found
        self.target = target
        self.writes: object = _UNPLANNED
        self.op = ""

    def planned(self, op: str, writes: object) -> Drift:
        """This drift, knowing the command (``op``) and the value it writes here
        (:data:`KEEPS` when it leaves this knob alone)."""
        d = Drift(self.path, self.knob, self.expected, self.found, self.target)
        d.op, d.writes = op, writes
        return d

    @property
    def outcome(self) -> str:
        """What --force does here: ``marks``, ``overwrites``, ``keeps``, or ``""`` (unknown)."""
        if self.writes is _UNPLANNED:
            return ""
        if self.writes is KEEPS:
            return "keeps"
        return "marks" if self.writes == self.found else "overwrites"

    def to_dict(self) -> dict:
        d = {"path": self.path, "knob": self.knob, "expected": self.expected,
             "found": self.found}
        if self.outcome:
            d["force"] = self.outcome
        if self.outcome in ("marks", "overwrites"):
            d["writes"] = self.writes
        return d

    def describe(self) -> str:
        base = (f"{self.path}: {self.knob} expected {value_text(self.expected, quote=True)}, "
                f"found {value_text(self.found, quote=True)}")
        op = self.op or "command"
        if self.outcome == "marks":
            return base + f" — already holds the value the {op} writes: --force only marks it"
        if self.outcome == "overwrites":
            return base + (f" — --force overwrites it with {value_text(self.writes, quote=True)}"
                           " (the value found is kept in the entry's history and the commit)")
        if self.outcome == "keeps":
            return base + f" — the {op} does not change this knob: --force leaves it as found"
        return base

    def adopt_hint(self) -> str:
        """The command that keeps this hand edit as a recorded change."""
        import shlex

        target = self.target or "TARGET"
        before = ("--before-unset" if self.expected is None
                  else f"--before {shlex.quote(self.expected)}")
        if self.found is None:
            return f"ledger record knob {target} {self.knob} --unset --adopt {before}"
        return (f"ledger record knob {target} {shlex.quote(f'{self.knob}={self.found}')} "
                f"--adopt {before}")


KEEPS = object()  # Drift.planned: the command leaves this knob as it is


class DriftError(LedgerError):
    """Live files differ from the ledger; mutating commands refuse unless --force."""

    def __init__(self, drifts: Sequence[Drift]) -> None:
        super().__init__()
        self.drifts = list(drifts)

    def __str__(self) -> str:
        lines = [d.describe() for d in self.drifts]
        outcomes = {d.outcome for d in self.drifts}
        if outcomes == {"marks"}:
            advice = ("pass --force to take the file as it is (nothing in it changes; the "
                      "entry's history and the commit say it was found so)")
        elif outcomes == {"keeps"}:
            advice = ("pass --force to go ahead (the hand edit stays, and `ledger status` "
                      "keeps reporting it), or record it with `ledger record knob --adopt`")
        else:
            edit = next(d for d in self.drifts if d.outcome in ("overwrites", ""))
            advice = (f"keep the hand edit as a change (`{edit.adopt_hint()}`), put the file "
                      "back, or pass --force to overwrite it (the overwritten value is recorded)")
        return ("live configuration differs from the ledger (edited by hand?):\n  "
                + "\n  ".join(lines) + "\n" + advice)


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
