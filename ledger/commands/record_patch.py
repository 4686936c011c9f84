"""`ledger record patch`: apply a patch to the engine repo and record it, or adopt a
commit already there (its subject the default title, its date the change's real time)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.commands.live import LiveOutcome
from ledger.commands.live import restartable
from ledger.commands.record import new_entry
from ledger.commands.record import when_trailers
from ledger.commands.session import writing
from ledger.core import planner
from ledger.core.model import Entry
from ledger.core.when import parse_when
from ledger.errors import PatchError
from ledger.errors import UsageError
from ledger.store.apply import Applied
from ledger.store.apply import EnginePlan
from ledger.store.apply import apply_plan
from ledger.store.patch_entries import PATCH_DIR
from ledger.store.patch_entries import engine_repo


@dataclass
class RecordedPatch:
    entry: Entry
    applied: Applied
    live: LiveOutcome | None = None  # the running services (set by `restartable`)


@restartable
def record_patch(
    s, *, patch_file: str | None, rev: str | None, cls: str, title: str | None, why: str = "",
    dry_run: bool = False, when: str = "",
) -> RecordedPatch:
    """Apply a patch file to the engine repo and record it — or adopt commit ``rev``.

    An adopted commit's subject is the title and its (committer) date the real time of
    the change unless ``title`` / ``when`` are given; the entry keeps the commit's sha."""
    from ledger.patches.stack import parse_patch_files
    from ledger.patches.stack import patch_sha256

    when = parse_when(when, s.now) if when else ""
    if rev is None and not (title or "").strip():
        raise UsageError("--title is needed for a patch file (an adopted --commit has its "
                         "subject)")
    repo = engine_repo(s.ws)
    with writing(s, dry_run):
        if rev is not None:
            text, commit = repo.adopt_commit(rev)
            info = repo.commit_info(commit)
            title = title or info["subject"]
            when = when or parse_when(info["date"], s.now, f"the date of commit {commit[:12]}")
        else:
            text, commit = _read_patch_file(Path(patch_file)), None
        files = tuple(parse_patch_files(text))
        entry = new_entry(
            s, kind="patch", cls=cls, title=str(title), why=why, adopt=rev is not None,
            when=when, patch=f"{PATCH_DIR}/{{id}}.patch", sha256=patch_sha256(text),
            files=files, commit=commit,
        )
        entry = _with_patch_path(entry)
        engine = None
        if rev is None:
            repo.require_clean()
            repo.plan_record(text, entry_id=entry.id, title=entry.title, cls=cls)

            def engine(entries, plan):
                def step() -> None:
                    repo.commit_patch(text, entry_id=entry.id, title=entry.title, cls=cls)

                return EnginePlan(Path(repo.path), repo.head(), step, text,
                                  tuple(Path(repo.path) / f for f in files))

        verb = "adopt" if rev else "record"
        message = f"{verb} {cls} patch: {entry.title}\n\n- {entry.id} [{cls}] {entry.title}\n" + \
            "".join(f"  {f}\n" for f in files) + when_trailers(entry.history)
        applied = apply_plan(
            s.ws, planner.plan_record(entry, adopt=rev is not None), command=s.command,
            now=s.now, message=message, dry_run=dry_run, engine=engine,
            extra_ledger_writes={entry.patch: text.encode("utf-8", "surrogateescape")},
        )
        return RecordedPatch(applied.changed[-1], applied)


def _with_patch_path(entry: Entry) -> Entry:
    from dataclasses import replace

    return replace(entry, patch=f"{PATCH_DIR}/{entry.id}.patch")


def _read_patch_file(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PatchError(f"{path}: no such patch file") from None
    except OSError as e:
        raise PatchError(f"{path}: cannot read: {e.strerror}") from e
    if not data.strip():
        raise PatchError(f"{path}: the patch is empty")
    return data.decode("utf-8", "surrogateescape")
