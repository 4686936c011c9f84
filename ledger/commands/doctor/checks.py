"""The content checks of `ledger doctor`: entries, patches, backups, evidence, targets.

Each returns findings and never raises on a damaged file (see :mod:`ledger.commands.doctor`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from typing import Sequence

from ledger.core.model import Entry
from ledger.errors import ConfigError
from ledger.errors import LedgerError
from ledger.store.config_file import read_text
from ledger.store.entries_file import parse_entries
from ledger.store.recovery import backup_store
from ledger.store.workspace import Workspace


@dataclass
class Finding:
    """One problem: which check, which file (``path[:line]``), what, what to do, and — when
    it is safe — what ``--repair`` does (``repair``) and the function that does it."""

    check: str
    path: str
    problem: str
    advice: str
    repair: str | None = None
    fix: Callable[[], str] | None = None

    def to_dict(self) -> dict:
        return {"check": self.check, "path": self.path, "problem": self.problem,
                "advice": self.advice, "repair": self.repair}


EDIT_ENTRIES = "fix the line by hand (its last good version: `git -C WS log -p entries.jsonl`)"


def check_entries(ws: Workspace) -> tuple[list[Entry], list[Finding]]:
    """The entries that parse, and a finding for every line that does not."""
    path = ws.entries_path
    if not path.exists():
        return [], []
    try:
        text = read_text(path)
    except ConfigError as e:
        return [], [Finding("entries", _where(e), e.problem, EDIT_ENTRIES)]
    entries: list[Entry] = []
    found: list[Finding] = []
    ids: dict[str, int] = {}
    seqs: dict[int, int] = {}
    last_seq = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            (e,) = parse_entries(line, str(path))
        except ConfigError as err:
            found.append(Finding("entries", f"{path}:{lineno}", err.problem, EDIT_ENTRIES))
            continue
        where = f"{path}:{lineno}"
        if e.id in ids:
            found.append(Finding("entries", where, f"id {e.id} is also used on line {ids[e.id]}",
                                 EDIT_ENTRIES))
        elif e.seq in seqs:
            found.append(Finding("entries", where,
                                 f"seq {e.seq} is also used on line {seqs[e.seq]}", EDIT_ENTRIES))
        else:
            if e.seq < last_seq:
                found.append(Finding("entries", where, f"seq {e.seq} comes after seq {last_seq}: "
                                     "lines are out of record order", EDIT_ENTRIES))
            ids[e.id], seqs[e.seq] = lineno, lineno
            last_seq = max(last_seq, e.seq)
            entries.append(e)
    return sorted(entries, key=lambda e: e.seq), found


def _where(e: ConfigError) -> str:
    return f"{e.path}:{e.line}" if e.line else e.path


def check_patches(ws: Workspace, entries: Sequence[Entry]) -> list[Finding]:
    from ledger.patches.stack import patch_sha256

    out = []
    for e in entries:
        if e.kind != "patch":
            continue
        path = ws.root / (e.patch or "")
        try:
            text = path.read_bytes().decode("utf-8", "surrogateescape")
        except OSError as err:
            out.append(Finding("patch", str(path), f"entry {e.id}: cannot read its patch "
                               f"({err.strerror})", "restore it from the workspace history"))
            continue
        if patch_sha256(text) != e.sha256:
            out.append(Finding("patch", str(path), f"entry {e.id}: the patch does not match its "
                               "sha256", "restore it: `git -C WS checkout -- " + str(e.patch) + "`"))
    return out


def check_backups(ws: Workspace) -> list[Finding]:
    """Every manifest parses; every object it names exists with its hash."""
    store = backup_store(ws)
    out: list[Finding] = []
    checked: dict[str, bool] = {}
    for manifest in store.manifests():
        try:
            backup = store._load(manifest)
        except LedgerError as e:
            aside = manifest.with_name("manifest.damaged.json")
            out.append(Finding("backup", str(manifest), str(e).split(": ", 1)[-1],
                               "the files of this backup cannot be restored from it",
                               f"set it aside as {aside.name}", _mover(manifest, aside)))
            continue
        for f in backup.files:
            if f.sha256 is None or f.sha256 in checked:
                continue
            blob = store.objects / f.sha256
            try:
                good = hashlib.sha256(blob.read_bytes()).hexdigest() == f.sha256
            except OSError:
                checked[f.sha256] = False
                out.append(Finding("backup", str(blob), f"object of {f.path} (backup {backup.id}) "
                                   "is missing", "this copy is lost; the live file is unaffected"))
                continue
            checked[f.sha256] = good
            if not good:
                aside = blob.with_name(blob.name + ".damaged")
                out.append(Finding("backup", str(blob), f"object of {f.path} (backup {backup.id}) "
                                   "does not match its hash", "this copy is lost",
                                   f"set it aside as {aside.name}", _mover(blob, aside)))
    return out


def _mover(src: Path, dst: Path) -> Callable[[], str]:
    def fix() -> str:
        os.replace(src, dst)
        return f"moved to {dst.name}"

    return fix


def check_evidence(ws: Workspace, entries: Sequence[Entry]) -> list[Finding]:
    from ledger.evidence.store import RUN_ID_RE
    from ledger.evidence.store import load_run

    root = ws.evidence_dir
    if not root.is_dir():
        return []
    known = {e.id for e in entries}
    out = []
    for entry_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if entry_dir.name not in known:
            out.append(Finding("evidence", str(entry_dir), "evidence of no entry in the ledger",
                               "remove it, or restore the entry it belongs to"))
        for run in sorted(p for p in entry_dir.iterdir() if p.is_dir() and RUN_ID_RE.match(p.name)):
            try:
                load_run(ws.root, entry_dir.name, run.name)
            except Exception as e:  # the doctor reports a damaged file, whatever broke
                out.append(Finding("evidence", str(run), f"{type(e).__name__}: {e}"[:300],
                                   "re-import or re-run the evidence, or remove the run"))
    return out


def check_targets(ws: Workspace, entries: Sequence[Entry]) -> list[Finding]:
    from ledger.store.apply import drift_in
    from ledger.store.targets import read_target

    files, out = {}, []
    for name, t in sorted(ws.config.targets.items()):
        try:
            files[name] = read_target(ws, t)
        except LedgerError as e:
            out.append(Finding("target", str(ws.target_path(t)), str(e).split(": ", 1)[-1],
                               "fix the file, or put it back (`ledger backups list`)"))
    try:
        drifts = drift_in(ws, entries, files)
    except LedgerError as e:
        return out + [Finding("target", str(ws.root), str(e), "see `ledger status`")]
    for d in drifts:
        out.append(Finding("target", d.path, d.describe().split(": ", 1)[-1],
                           "record it (`ledger record knob --adopt`), put the file back, or "
                           "pass --force to the next command"))
    return out + _engine_findings(ws, files)


def _engine_findings(ws: Workspace, files: dict) -> list[Finding]:
    """Each knob and flag of a target that its declared engine release does not take as is."""
    from envknobs.catalog_release import release_findings
    from envknobs.registry import KnobError
    from ledger.commands.catalog import engine_findings
    from ledger.commands.catalog import engine_of

    out = []
    for name, tf in sorted(files.items()):
        for problem in engine_findings(ws, tf.target, tf.text):
            out.append(Finding("engine", str(tf.path), f"{name}: {problem}",
                               "name the release the file runs"))
        spec = engine_of(ws, tf.target, tf.text)
        if spec is None:
            continue
        try:
            problems = release_findings(spec, tf.values)
        except KnobError as e:
            problems = [str(e)]
        for problem in problems:
            out.append(Finding("engine", str(tf.path), f"{name} ({spec}): {problem}",
                               "change the knob (`ledger record knob`), or the engine declared "
                               "for the target in ledger.yaml"))
    return out


def check_engine_defaults(ws: Workspace, entries: Sequence[Entry]) -> list[Finding]:
    """An engine-repo commit that moved a knob's default and that no entry records: every
    target leaving that knob unset runs a value the ledger cannot revert or explain
    (ledger.commands.repo_defaults)."""
    from ledger.commands.repo_defaults import engine_defaults

    moved, _ = engine_defaults(ws, entries)
    return [Finding("engine", str(ws.engine_repo_path), d.describe(),
                    f"record it: `ledger record patch --commit {d.mover[:12]} --class "
                    "perf|bugfix --title ...`, or pin the knob in the targets")
            for d in moved if d.mover is not None and not d.recorded]

