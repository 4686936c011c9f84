"""`ledger doctor`: check the workspace end to end; repair what is safe to repair.

Checks, each reporting every problem it finds (a doctor never stops at the first, and
never crashes on a damaged file — that is what it is for):

* ``config``   ledger.yaml parses;
* ``entries``  every line of entries.jsonl: UTF-8, JSON, schema and types, ids unique,
  seqs unique and in record order;
* ``patch``    every patch entry's stored patch exists and matches its sha256;
* ``backup``   every backup manifest parses, every object it names exists and has its hash;
* ``evidence`` every evidence run's runs.csv, meta.yaml and summary.yaml parse;
* ``git-lock`` lock files left in the workspace repo or the engine repo;
* ``temp``     temporary files of the ledger (``.ledger-tmp-…``, and the older
  ``.NAME.XXXXXXXX.tmp``) in the workspace, next to the targets, and half-written
  backup or evidence directories;
* ``intent``   an intent record left by an interrupted command (readable or not);
* ``bisect``   a bisect that was killed mid-search (its marker ``.ledger/bisect.json``);
* ``restart``  a ``--restart`` killed before its health check passed
  (``.ledger/restart.json``);
* ``target``   every target readable, and matching the ledger (drift);
* ``git``      uncommitted changes to the workspace's own files.

``--repair`` (under the writer lock; ``--dry-run`` says what it would do) repairs only
what cannot lose anything: it finishes an interrupted operation exactly as the next
command would (rollback or roll-forward; a killed bisect's starting state put back, a
killed ``--restart``'s mutation rolled back), sets a damaged intent record aside
(``intent.json`` → ``intent.damaged-<time>.json``, for the operator to read), removes git
locks no running git holds (:mod:`ledger.store.gitlocks`), removes temporaries of dead
writers (:mod:`ledger.store.leftovers`) and empty half-written backup directories, and
sets a damaged backup manifest or object aside (``*.damaged``) so the rest of the store
works and the next backup of the same content writes a good object.  Entries, config,
patches, evidence, targets and the git history are never changed by the doctor: each
such finding says what to do.  Exit status 1 while findings remain.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Callable

from backups.fsio import temp_owner
from ledger.commands.doctor.checks import Finding
from ledger.commands.doctor.checks import check_backups
from ledger.commands.doctor.checks import check_engine_defaults
from ledger.commands.doctor.checks import check_entries
from ledger.commands.doctor.checks import check_evidence
from ledger.commands.doctor.checks import check_patches
from ledger.commands.doctor.checks import check_targets
from ledger.errors import LedgerError
from ledger.store import bisect_state
from ledger.store import gitlocks
from ledger.store import leftovers
from ledger.store import wsgit
from ledger.store.config_file import Config
from ledger.store.config_file import load_config
from ledger.store.recovery import BACKUPS
from ledger.store.recovery import checked_intent
from ledger.store.recovery import recover
from ledger.store.txn import LOCK
from ledger.store.txn import WriterLock
from ledger.store.workspace import Workspace
from ledger.store.workspace import find_root


@dataclass
class Report:
    root: str
    findings: list[Finding] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict:
        return {"root": self.root, "ok": self.ok, "dry_run": self.dry_run,
                "repaired": self.repaired,
                "findings": [f.to_dict() for f in self.findings]}


FINISH = "finish the interrupted operation"


def writer_running(ws: Workspace) -> bool:
    """Whether a ledger command holds the writer lock now (without taking it)."""
    import fcntl

    try:
        fd = os.open(ws.state_dir / LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _open(explicit: str | None, cwd: Path | None) -> tuple[Workspace, list[Finding]]:
    root = find_root(cwd, explicit)
    try:
        config, found = load_config(root / "ledger.yaml"), []
    except LedgerError as e:
        config, found = Config(), [Finding("config", str(root / "ledger.yaml"), str(e),
                                           "fix ledger.yaml by hand (see `git -C WS diff`)")]
    return Workspace.with_config(root, config), found


def check(ws: Workspace) -> list[Finding]:
    """Every finding in the workspace (no changes)."""
    running = writer_running(ws)
    found: list[Finding] = []
    found += _check_intent(ws)
    found += _check_bisect(ws, running)
    found += _check_restart(ws, running)
    # Mid-operation, files differ from the ledger because of that operation: drift and
    # uncommitted changes are checked once it is finished (--repair, or any command).  A
    # record that nothing will act on (a damaged intent, set aside by --repair) explains
    # no difference: the targets are checked through it, whatever else is wrong.
    pending = any(f.check in INTERRUPTED and f.repair in PUTS_BACK for f in found) or running
    entries, problems = check_entries(ws)
    found += problems
    found += check_patches(ws, entries)
    found += check_engine_defaults(ws, entries)
    found += check_backups(ws)
    found += check_evidence(ws, entries)
    found += _check_locks(ws)
    found += _check_temps(ws, running)
    if not pending:
        found += check_targets(ws, entries)
        found += _check_git(ws)
    return found


def doctor(explicit: str | None = None, cwd: Path | None = None, *, repair: bool = False,
           dry_run: bool = False) -> Report:
    """Check the workspace; with ``repair``, repair what is safe and check again."""
    ws, config_findings = _open(explicit, cwd)
    found = config_findings + check(ws)
    report = Report(str(ws.root), found, dry_run=dry_run)
    fixable = [f for f in found if f.fix is not None]
    if not repair or not fixable:
        return report
    if dry_run:
        report.repaired = [f"would {f.repair}: {f.path}" for f in fixable]
        return report
    with WriterLock(ws, "doctor --repair", recover=False):
        for f in _in_repair_order(fixable):
            try:
                report.repaired.append(f"{f.path}: {f.fix()}")
            except (LedgerError, OSError) as e:
                report.repaired.append(f"{f.path}: could not {f.repair}: {e}")
    ws, config_findings = _open(explicit, cwd)
    report.findings = config_findings + check(ws)
    return report


def _in_repair_order(fixable: list[Finding]) -> list[Finding]:
    """The interrupted operation first (it clears its own locks and temporaries), then
    stale locks (so git works), then the rest; each fix skips what is gone already."""
    order = {"intent": 0, "git-lock": 1, "bisect": 2, "restart": 3}
    return sorted(fixable, key=lambda f: order.get(f.check, 4))


INTERRUPTED = ("intent", "bisect", "restart")
# The repairs of an interrupted command that move target files (see check()).
BISECT_BACK = "restore its starting state"
RESTART_BACK = "roll the change back"
PUTS_BACK = (FINISH, BISECT_BACK, RESTART_BACK)


def _check_bisect(ws: Workspace, running: bool) -> list[Finding]:
    path = bisect_state.state_path(ws)
    try:
        state = bisect_state.in_progress(ws)
    except LedgerError as e:
        return [Finding("bisect", str(path), str(e), "see the message")]
    if state is None:
        return []
    what = f"bisect {state.id} (started {state.started} by `ledger {state.command}`)"
    if running:
        return [Finding("bisect", str(path), f"{what} is running now", "wait")]
    return [Finding("bisect", str(path), f"{what} was interrupted mid-search",
                    "`ledger doctor --repair` or `ledger bisect reset` puts its starting "
                    "configuration back (its record is kept)", BISECT_BACK,
                    lambda: _recover_bisect(ws))]


def _recover_bisect(ws: Workspace) -> str:
    from ledger.store.workspace import utc_now

    return bisect_state.recover_bisect(ws, utc_now()) or "nothing to do"


def _check_restart(ws: Workspace, running: bool) -> list[Finding]:
    from ledger.live import RESTART_RECORD
    from ledger.live.rollback import RestartRecord

    path = ws.state_dir / RESTART_RECORD
    try:
        rec = RestartRecord.load(ws)
    except LedgerError as e:
        return [Finding("restart", str(path), str(e), "see the message")]
    if rec is None:
        return []
    targets = ", ".join(rec.targets) or "its targets"
    what = f"`ledger {rec.command}` (started {rec.time}) restarting {targets}"
    if running:
        return [Finding("restart", str(path), f"{what} is running now", "wait")]
    return [Finding("restart", str(path), f"{what} was interrupted before its health check "
                    "passed", "`ledger doctor --repair` (or any ledger command) rolls the "
                    "change back; then check `ledger status --live`", RESTART_BACK,
                    lambda: _recover_restart(ws))]


def _recover_restart(ws: Workspace) -> str:
    from ledger.live.rollback import recover_restart
    from ledger.store.workspace import utc_now

    return recover_restart(ws, command="doctor --repair", at=utc_now()) or "nothing to do"


# -- the checks that find leftovers of killed commands ------------------------------------

def _check_intent(ws: Workspace) -> list[Finding]:
    path = ws.state_dir / "intent.json"
    try:
        intent = checked_intent(ws)
    except LedgerError as e:
        aside = path.with_name(f"intent.damaged-{ws_stamp()}.json")
        return [Finding("intent", str(path), getattr(e, "problem", str(e)),
                        "read it; restore files with `ledger backups restore B` if needed",
                        f"set it aside as {aside.name}", lambda: _move(path, aside))]
    if intent is None:
        return []
    if writer_running(ws):
        return [Finding("intent", str(path), f"{intent.describe()} is running now", "wait")]
    return [Finding("intent", str(path), f"an interrupted {intent.describe()} was not finished",
                    "`ledger doctor --repair` (or any ledger command) finishes it; targets "
                    "and uncommitted changes are checked after that", FINISH,
                    lambda: _recover(ws))]


def _recover(ws: Workspace) -> str:
    return recover(ws) or "nothing to do"


def ws_stamp() -> str:
    from ledger.store.workspace import utc_now

    return utc_now().replace(":", "").replace("-", "")


def _move(src: Path, dst: Path) -> str:
    os.replace(src, dst)
    return f"moved to {dst.name}"


def _repos(ws: Workspace) -> list[Path]:
    engine = ws.engine_repo_path
    return [ws.root] + ([engine] if engine is not None and engine.exists() else [])


def _check_locks(ws: Workspace) -> list[Finding]:
    out = []
    for repo in _repos(ws):
        dirs = gitlocks.git_dirs(repo)
        if dirs is None:
            continue
        stale = set(gitlocks.stale_locks(dirs))
        for lock in gitlocks.find_locks(dirs):
            fix = _unlinker(lock) if lock in stale else None
            out.append(Finding(
                "git-lock", str(lock), "git lock file left behind",
                "remove it once no git command runs in " + str(repo),
                "remove the stale lock" if fix else None, fix))
    return out


def _unlinker(path: Path) -> Callable[[], str]:
    def fix() -> str:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        return "removed"

    return fix


def _temp_files(ws: Workspace) -> list[Path]:
    found = []
    for base, dirs, files in os.walk(ws.root):
        dirs[:] = [d for d in dirs if d != ".git"]
        found += [Path(base) / f for f in files if temp_owner(f) is not None]
        found += [Path(base) / d for d in dirs if d.startswith(".tmp-") and "evidence" in base]
    for t in ws.config.targets.values():
        path = ws.target_path(t)
        found += [p for p in leftovers.temps_in(path.parent) if p.name.endswith("-" + path.name)]
        found += leftovers.legacy_temps_of(path)
    found += leftovers.legacy_temps_of(ws.entries_path)
    return sorted(set(found))


def _check_temps(ws: Workspace, running: bool) -> list[Finding]:
    out = []
    for p in _temp_files(ws):
        owner = temp_owner(p.name)
        dead = not running if owner is None else leftovers.is_orphan(p, running)
        out.append(Finding("temp", str(p), "temporary file of a killed ledger command",
                           "remove it once no ledger command runs",
                           "remove the temporary" if dead else None,
                           _unlinker(p) if dead else None))
    store = ws.state_dir / BACKUPS
    if store.is_dir() and not running:
        for d in sorted(store.iterdir()):
            if d.name != "objects" and d.is_dir() and not (d / "manifest.json").exists() \
                    and not any(d.iterdir()):
                out.append(Finding("temp", str(d), "half-written backup directory",
                                   "remove it", "remove the empty directory", _unlinker(d)))
    return out


def _check_git(ws: Workspace) -> list[Finding]:
    try:
        lines = wsgit.dirty(ws.root)
    except LedgerError as e:
        return [Finding("git", str(ws.root / ".git"), str(e), "check the workspace repository")]
    out = []
    for line in lines:
        rel, code = line[3:], line[:2].strip()
        if temp_owner(os.path.basename(rel)) is not None or _adopt_plan(rel, code):
            continue
        out.append(Finding("git", str(ws.root / rel), f"uncommitted change ({code})",
                           _git_fix(ws.root, rel, code)))
    return out


def _adopt_plan(rel: str, code: str) -> bool:
    """An untracked ``adopt-TARGET.yaml`` in the workspace: the plan `ledger adopt` told the
    operator to write and review there.  It is the operator's file, not a change to the
    ledger, so doctor does not report it."""
    name = os.path.basename(rel)
    return code == "??" and "/" not in rel.rstrip("/") and name.startswith("adopt-") \
        and name.endswith((".yaml", ".yml"))


def _git_fix(root, rel: str, code: str) -> str:
    """The commands that settle one dirty path: an untracked file is added or removed
    (``git checkout`` cannot remove it); a tracked one is committed or checked out."""
    import shlex

    git = f"git -C {shlex.quote(str(root))}"
    path = shlex.quote(rel.rstrip("/"))
    if code == "??":
        return (f"commit it (`{git} add {path} && {git} commit`) or remove it "
                f"(`rm -r {shlex.quote(str(root / rel.rstrip('/')))}`)")
    return f"commit it (`{git} commit {path}`) or drop it (`{git} checkout -- {path}`)"


__all__ = ["Finding", "Report", "check", "doctor", "writer_running"]
