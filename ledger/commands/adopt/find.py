"""The versions `ledger adopt` reads a managed file's history from: backup copies, or the
commits of a deploy repo, then the live file.

Decisions (the issue is silent):

* **Which files are backups.**  In a directory, the files whose name is the target's file
  name followed by ``.``, ``-``, ``_`` or ``~`` and more (``serve_decode.sh.bak.20261202-1414``,
  ``serve_decode.sh.orig``, ``serve_decode.sh~``, ``serve_decode.sh-2026-12-01``); a file
  named on the command line is taken whatever its name.
* **A backup's date** is the first date in what its name adds to the target's name
  (``20261202-1414``, ``2026-12-02``, ``2026-12-02T14:14``), else its mtime.  A backup is
  the copy taken just before an edit (``cp f f.bak.$(date +%Y%m%d-%H%M)``, ``sed -i.bak``),
  so the change from one copy to the next version is dated with that copy's time; the
  plan shows every date and the operator corrects any there.
* **Not a version of the target** (named in the plan and skipped): unreadable, not UTF-8
  text, not readable as the target's format (a k8s copy without the container), or
  sharing under half its lines with the live file and with every other copy.
* **Commits**: those of ``git log --follow -M -C -- PATH`` (oldest first): renames and
  copies followed, each version read at the path it had in its commit (the origin names
  it), dated by its author date, with its author and subject; the first is the base.
  The live file comes last, dated by its mtime, in case it holds edits not committed —
  unless the history ends in a deletion (an old path given): then the plan says where
  the file went and today's file is not compared with a deleted one.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone
from pathlib import Path
from typing import Sequence

from ledger.core.adopt import Version
from ledger.core.identifiers import RELEASE_KNOB
from ledger.core.when import parse_time
from ledger.core.when import stamp
from ledger.errors import LedgerError
from ledger.errors import UsageError
from ledger.git_runner import check_sha

# the date in a backup's name: 20261202-1414[05], 20261202, 2026-12-02[T_ ]14:14[:05]
_NAME_DATE = re.compile(r"\d{8}(?:[-T_]\d{4}(?:\d{2})?)?|\d{4}-\d{2}-\d{2}(?:[T_ ]\d{2}:?\d{2}(?::?\d{2})?)?")
MIN_SHARED = 0.5  # of the lines: less, and a copy is not a version of the target


@dataclass
class Copy:
    """A version read from a file or a commit: its knob values, or why it was skipped."""

    origin: str
    when: str
    text: str = ""
    tf: object = None  # the parsed TargetFile
    skipped: str = ""
    dated: str = ""  # "name", "mtime", "commit"
    author: str = ""
    subject: str = ""

    def version(self, when: str, dated_by: str = "", is_revert: bool = True) -> Version:
        from ledger.core.identifiers import split_place

        summary = getattr(self.tf, "summary", None)
        values = {k: v for k, v in self.tf.values.items() if split_place(k)[1] is None}
        unclear: dict[str, str] = {}
        if summary is not None:
            values, unclear = read_values(summary, self.text)
        release = _release_of(self.tf)
        if release is not None:  # an image tag or pin bump: proposed as an upgrade
            values = {**values, RELEASE_KNOB: release}
        return Version(self.origin, when, values, unclear, self.author, self.subject,
                       dated_by, is_revert)


def _release_of(tf) -> str | None:
    """The one engine release a version names (``vllm==0.30.0``), else None."""
    live = getattr(tf, "live", None)
    return live(RELEASE_KNOB) if live is not None else None


def read_values(summary, text: str) -> tuple[dict[str, str], dict[str, str]]:
    """Every knob of a bash summary with a value to compare between versions: a static
    value; a shell expression's text (``$((8192 * TP))``, ``${CONC}``); a place inside an
    ``if``/``case`` branch as ``KNOB when CONDITION`` (several launch lines: ``KNOB at
    launch N``).  What cannot be read (a branch whose condition is not on its line) goes
    to the second mapping, key -> ``line N: text``, named in the plan's ``unclear:``."""
    values, unclear, _, _ = _read(summary, text)
    return values, unclear


def read_places(copy: Copy) -> dict[str, object]:
    """``KNOB when COND`` -> its place in ``copy`` (the live file: where an entry edits)."""
    summary = getattr(copy.tf, "summary", None)
    return {} if summary is None else _read(summary, copy.text)[2]


def computed_keys(copy: Copy) -> set[tuple[str, str]]:
    """``(key, text)`` of each value the shell computes in ``copy``."""
    summary = getattr(copy.tf, "summary", None)
    return set() if summary is None else _read(summary, copy.text)[3]


def _read(summary, text: str):
    from ledger.core.adopt import AT
    from ledger.core.adopt import WHEN

    lines = text.splitlines()
    values: dict[str, str] = {}
    unclear: dict[str, str] = {}
    places: dict[str, object] = {}
    computed: set[tuple[str, str]] = set()
    for k in summary.knobs:
        if not k.needs_selection:
            value = k.value if not k.computed else _written(k.places[0]) if k.places else None
            if value is not None:
                values[k.knob] = value
                if k.computed:
                    computed.add((k.knob, value))
            continue
        for p in k.places:
            cond = place_condition(lines, p)
            key = f"{k.knob}{WHEN}{cond}" if cond else f"{k.knob} {p.key}" \
                if p.key.startswith("at ") else f"{k.knob}{AT}{p.key}"
            if cond is None and ("if (" in p.scope or "case (" in p.scope):
                unclear[key] = f"line {p.line}: {p.raw.strip()}"
                continue
            value = _written(p) if p.computed else p.value
            if value is not None:
                n, base = 2, key
                while key in values:  # the same branch sets it twice: both kept
                    key, n = f"{base} ({n})", n + 1
                values[key] = value
                places[key] = p
                if p.computed:
                    computed.add((key, value))
    return values, unclear, places, computed


def _written(place) -> str | None:
    """A computed value as written: the text after the flag or the ``=``."""
    from envknobs.formats.common.shell_lexer import lex
    from envknobs.formats.common import FormatError

    raw = place.raw.strip()
    if place.kind in ("flag", "array-flag"):
        _, _, rest = raw.partition("=") if raw.split(None, 1)[0].count("=") else \
            raw.partition(raw.split(None, 1)[0])
    else:
        _, _, rest = raw.partition("=")
    try:  # the first shell word of what follows: quotes and $((...)) kept whole
        words = [t for t in lex(rest.lstrip()).tokens if t.kind == "word"]
    except FormatError:
        return rest.strip() or None
    return words[0].text if words else None


_IF = re.compile(r"\s*(if|elif)\s+(.*?)\s*(?:;?\s*\bthen\b.*)?$")
_CASE = re.compile(r"\s*case\s+(.*?)\s+in\b")
_PATTERN = re.compile(r"\s*\(?\s*([^()]*?)\s*\)")
_BLOCK_OPEN = re.compile(r"\s*(if|case)\b")
_BLOCK_CLOSE = re.compile(r"\s*(fi|esac)\b")


def place_condition(lines: list[str], place) -> str | None:
    """The branch condition a place sits under, as an operator reads it
    (``DP_ATTENTION == true``, ``not (DP_ATTENTION == true)``, ``MODE is decode|both``;
    nested branches joined by `` and ``), or None at top level or when a branch's
    condition is not on its own line."""
    found = re.findall(r"(if|case) \(line (\d+)\)", place.scope)
    if not found:
        return None
    conds = []
    for kind, start in found:
        cond = (_if_branch if kind == "if" else _case_branch)(lines, int(start), place.line)
        if cond is None:
            return None
        conds.append(cond)
    return " and ".join(conds)


def _tidy(cond: str) -> str:
    cond = re.sub(r"^\[\[?\s*|\s*\]\]?$", "", cond.strip())
    cond = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", cond)
    return cond.replace('"', "").replace("'", "").strip()


def _if_branch(lines: list[str], start: int, line: int) -> str | None:
    m = _IF.match(lines[start - 1]) if start <= len(lines) else None
    if m is None or m.group(1) != "if":
        return None
    if line == start and re.search(r"\b(else|elif)\b", lines[start - 1]):
        return None  # branches on one line: which one a place is in is not told by lines
    conds, depth, current = [_tidy(m.group(2))], 0, _tidy(m.group(2))
    for text in lines[start:line - 1]:
        if _BLOCK_OPEN.match(text) and not re.search(r"\b(fi|esac)\s*$", text):
            depth += 1
        elif _BLOCK_CLOSE.match(text):
            depth -= 1
        elif depth == 0 and (e := _IF.match(text)) and e.group(1) == "elif":
            current = _tidy(e.group(2))
            conds.append(current)
        elif depth == 0 and re.match(r"\s*else\b", text):
            current = "not (" + " or ".join(conds) + ")"
    return current


def _case_branch(lines: list[str], start: int, line: int) -> str | None:
    m = _CASE.match(lines[start - 1]) if start <= len(lines) else None
    if m is None:
        return None
    word, pattern, depth = _tidy(m.group(1)), None, 0
    for text in lines[start:line]:
        if _BLOCK_OPEN.match(text) and not re.search(r"\b(fi|esac)\s*$", text):
            depth += 1
        elif _BLOCK_CLOSE.match(text):
            depth -= 1
        elif depth == 0 and (p := _PATTERN.match(text)) and not text.strip().startswith("#"):
            pattern = p.group(1)
    return None if pattern is None else f"{word} is {pattern}"


def backup_files(target_path: Path, sources: Sequence[str]) -> list[Path]:
    """The backup files named by ``sources`` (files, and directories searched one level)."""
    name = target_path.name
    found: list[Path] = []
    for src in sources:
        p = Path(src)
        if p.is_dir():
            found += sorted(f for f in p.iterdir() if f.is_file() and f.name != name
                            and f.name.startswith(name) and f.name[len(name)] in ".-_~")
        elif p.is_file():
            found.append(p)
        else:
            raise UsageError(f"{p}: no such backup file or directory")
    live = target_path.resolve()
    return [f for f in dict.fromkeys(found) if f.resolve() != live]


def name_date(path: Path, target_name: str) -> str:
    """The time a backup's name says (``serve_decode.sh.bak.20261202-1414``), or ""."""
    tail = path.name[len(target_name):] if path.name.startswith(target_name) else path.name
    for m in _NAME_DATE.finditer(tail):
        moment = parse_time(m.group(0).replace("_", "T"))
        if moment is not None:
            return stamp(moment)
    return ""


def mtime_of(path: Path) -> str:
    return stamp(datetime.fromtimestamp(path.stat().st_mtime, timezone.utc))


def read_copy(target, path: Path, origin: str, when: str, raw: bytes | None = None,
              shown_as: str | None = None) -> Copy:
    """``path`` (or ``raw``, its content) parsed as ``target``'s format; skipped with the
    reason when it is not text or not that format, naming the file as ``shown_as`` (a
    commit's version: its path in the repo and the commit, not a work-tree file)."""
    from ledger.store.targets import parse_target

    copy = Copy(origin, when)
    try:
        raw = path.read_bytes() if raw is None else raw
    except OSError as e:
        copy.skipped = f"cannot read: {e.strerror}"
        return copy
    try:
        copy.text = raw.decode("utf-8")
    except UnicodeDecodeError:
        copy.skipped = "not UTF-8 text"
        return copy
    if "\x00" in copy.text:
        copy.skipped = "not text (it holds NUL bytes)"
        return copy
    try:
        copy.tf = parse_target(target, path, raw)
    except LedgerError as e:
        reason = str(e) if shown_as is None else str(e).replace(str(path), shown_as)
        copy.skipped = f"not readable as a {target.format} target: {reason}"
    return copy


def backup_copies(target, target_path: Path, sources: Sequence[str]) -> list[Copy]:
    """Every backup named by ``sources``, read and dated, oldest first; those that are no
    version of the target keep the reason they are skipped."""
    copies = []
    for f in backup_files(target_path, sources):
        when, dated = name_date(f, target_path.name), "name"
        if not when:
            when, dated = mtime_of(f), "mtime"
        copy = read_copy(target, f, f.name, when)
        copy.dated = dated
        copies.append(copy)
    copies.sort(key=lambda c: (c.when, c.origin))
    return copies


def refuse_strangers(copies: list[Copy], live_text: str, target_name: str) -> None:
    """Mark the copies that share under :data:`MIN_SHARED` of their lines with the live
    file and with every other copy: not versions of the target."""
    readable = [c for c in copies if not c.skipped]
    for c in readable:
        others = [live_text] + [o.text for o in readable if o is not c]
        best = max(_shared(c.text, o) for o in others)
        if best < MIN_SHARED:
            c.skipped = (f"not a version of {target_name}: it shares {best:.0%} of its lines "
                         "with the live file and the other copies")


def _shared(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.splitlines(), b.splitlines(), autojunk=False).ratio()


def commit_copies(target, repo: Path, path: str) -> tuple[list[Copy], list[str]]:
    """Each commit of ``repo`` that changed the file now (or last) at ``path``, oldest
    first, each version read at the path it had in that commit (renames and copies
    followed, as ``git log --follow`` finds them), and the notes the plan shows: each
    rename, and a history that ends in a deletion (an old path: the file was removed or
    moved away, so the last version is not compared with today's file)."""
    from ledger.git_runner import GitRunner

    if path.startswith("-") or Path(path).is_absolute() or ".." in Path(path).parts:
        raise UsageError(f"--path {path!r}: give the file's path inside the repo")
    if not (repo / ".git").exists():
        raise UsageError(f"--git {repo}: not a git repository")
    git = GitRunner(repo)
    history = _follow(git, path)
    if not history:
        raise UsageError(f"--git {repo} --path {path}: no commit changed that file")
    copies, notes = [], []
    for sha, date, author, subject, status, old, at in history:
        origin = f"commit {sha[:12]} ({at})"
        when = stamp(parse_time(date)) if parse_time(date) else ""
        if status[0] in "RC":
            verb = "renamed" if status[0] == "R" else "copied"
            notes.append(f"commit {sha[:12]}: {verb} from {old} to {at} ({subject})")
        if status == "D":
            moved = _moved_to(git, sha, at)
            notes.append(f"commit {sha[:12]}: {at} deleted ({subject})" + (
                f"; it lives on as {moved}: give --path {moved} to follow it to today"
                if moved else "") + "; the last version is not compared with the live file")
            copies.append(Copy(origin, when, skipped=f"{at} is not in this commit (deleted)",
                               dated="deleted", author=author, subject=subject))
            continue
        shown = git.run("cat-file", "blob", f"{sha}:{at}", check=False)
        copy = read_copy(target, repo / at, origin, when, raw=shown.stdout,
                         shown_as=f"{repo / at} at commit {sha[:12]}")
        copy.dated, copy.author, copy.subject = "commit", author, subject
        copies.append(copy)
    first = history[0]
    gone = _deleted_in(git, first[0]) if first[4] == "A" else []
    if gone:
        notes.insert(0, f"the history git follows begins at commit {first[0][:12]}, which "
                        f"added {first[6]} and deleted {', '.join(gone)} ({first[3]}): if "
                        "that was this file under another name, too changed for git to "
                        "follow, give --path with that name to read its older versions")
    return copies, notes


def _deleted_in(git, sha: str) -> list[str]:
    """The files commit ``sha`` deleted (a rename git could not follow shows so)."""
    out = git.out("show", "--no-renames", "--name-status", "--format=", "--no-color", sha,
                  "--")
    return [line.split("\t", 1)[1] for line in out.splitlines() if line.startswith("D\t")]


def _follow(git, path: str) -> list[tuple[str, ...]]:
    """``(sha, author date, author, subject, status, old path, path)`` of each commit that
    changed the file, oldest first, as ``git log --follow --first-parent`` resolves its
    names: the line of work the file lives on, where a merged branch is one change (its
    commits named in the merge's subject; compared one by one across two lines of work,
    each would seem to take back the other's).  The path is data: it comes after ``--``."""
    out = git.out("log", "--follow", "--first-parent", "-M", "-C", "--name-status",
                  "--no-color", "--format=%x1e%H%x1f%P%x1f%aI%x1f%an <%ae>%x1f%s", "--", path)
    history = []
    for record in filter(None, out.split("\x1e")):
        head, _, body = record.partition("\n")
        sha, parents, date, author, subject = head.split("\x1f", 4)
        if " " in parents:  # a merge: its changes to the file, against the line it joined
            subject = _merged(git, parents.split(), subject, path)
        changes = [line.split("\t") for line in body.splitlines() if "\t" in line]
        if not changes:  # a merge git shows without a diff: no version of its own
            continue
        fields = changes[-1]
        status = fields[0]
        old, at = (fields[1], fields[2]) if status[0] in "RC" else (fields[1], fields[1])
        history.append((sha, date, author, subject, status[0] if status[0] in "AMDT" else
                        status, old, at))
    return history[::-1]


def _merged(git, parents: list[str], subject: str, path: str) -> str:
    """A merge commit's subject, with the branch commits it brought in that changed the
    file: the merge is one version (``--first-parent``), so changes made on a branch are
    proposed once, as the merge's, never compared across the two lines of work."""
    first, *others = (check_sha(p) for p in parents)
    found = []
    for other in others:
        log = git.out("log", "--follow", "--format=%h %s", f"{first}..{other}", "--", path)
        found += [line for line in log.splitlines() if line]
    return f"{subject} (brings in {'; '.join(found)})" if found else subject


def _moved_to(git, sha: str, old: str) -> str | None:
    """Where commit ``sha`` renamed ``old`` to, if it was a rename."""
    out = git.out("show", "-M", "--name-status", "--format=", "--no-color", sha, "--")
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0].startswith("R") and fields[1] == old:
            return fields[2]
    return None


__all__ = ["Copy", "backup_copies", "commit_copies", "name_date", "read_copy",
           "refuse_strangers"]
