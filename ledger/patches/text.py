"""Patch text: reading a unified diff's headers as untrusted input.

:func:`parse_patch` reads every header itself (``diff --git``, ``---``/``+++``,
rename/copy from/to, modes, hunk counts) and refuses paths that are absolute, contain
``..`` or empty components, control characters, or a ``.git`` component; symlinks that
the patch creates pointing outside the repo or into ``.git``; and any path below a
symlink the patch creates.  The repo-side checks (symlinks already in the tree, git's
own reading of the patch) are :meth:`ledger.patches.stack.EngineRepo.check_patch`'s.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.errors import PatchError

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
SYMLINK_MODE = "120000"
MODE_RE = re.compile(r"[0-7]{6}\Z")
QUOTED_RE = re.compile(r'"(?:[^"\\]|\\.)*"')
HUNK_RE = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
EXT_HEADERS = (
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "copy from ",
    "copy to ",
    "rename from ",
    "rename to ",
    "rename old ",
    "rename new ",
    "similarity index ",
    "dissimilarity index ",
    "index ",
)


# -- patch text ------------------------------------------------------------------------


def patch_sha256(text: str) -> str:
    """The sha256 (hex) of the patch text as stored (UTF-8, undecodable bytes kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def verify_sha256(text: str, expected: str, *, entry_id: str = "") -> None:
    """Raise PatchError naming the entry when the stored patch no longer has its sha256."""
    found = patch_sha256(text)
    if found != expected:
        who = f"entry {entry_id}: " if entry_id else ""
        raise PatchError(
            f"{who}stored patch sha256 is {found}, the ledger recorded {expected}: the patch "
            "file was changed after it was recorded; put it back (workspace git history) "
            "before reverting or restoring it"
        )


@dataclass(frozen=True)
class PatchFile:
    """One file section of a patch: ``old_path`` None = created, ``new_path`` None = deleted."""

    old_path: str | None
    new_path: str | None
    new_mode: str | None = None
    symlink_target: str | None = None  # when the result is a symlink: where it points

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


def _unquote(name: str) -> str:
    """Undo git's C-style quoting of a path ("a/t\\303\\251st" -> a/tést)."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    out = bytearray()
    body, i = name[1:-1], 0
    simple = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1 : i + 2] in simple:
            out.append(simple[body[i + 1]])
            i += 2
        elif re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            raise PatchError(f"malformed quoted path in patch: {name}")
    return out.decode("utf-8", "surrogateescape")


def check_path(path: str, raw: str | None = None) -> str:
    """Return ``path`` if it is a safe repo-relative path, else raise PatchError."""
    shown = raw if raw is not None else path
    if not path or path.startswith("/"):
        raise PatchError(f"patch touches an absolute or empty path: {shown!r}")
    if CONTROL_RE.search(path):
        raise PatchError(f"patch touches a path with control characters: {shown!r}")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise PatchError(f"patch touches a path outside the repository: {shown!r}")
        # rstrip: '.git.' and '.git ' name .git itself on some filesystems.
        if part.lower().rstrip(". ") == ".git":
            raise PatchError(f"patch touches the repository's .git directory: {shown!r}")
    return path


def _strip_prefix(raw: str) -> str | None:
    """A ---/+++ name with its timestamp and first component (-p1) removed; None = /dev/null."""
    # git ends a name that has spaces with a tab; traditional diffs put a date after one.
    quoted = QUOTED_RE.match(raw)
    if quoted and raw[quoted.end() :][:1] in ("", "\t"):
        raw = quoted.group(0)
    else:
        raw = raw.split("\t", 1)[0]
    name = _unquote(raw)
    if name == "/dev/null":
        return None
    if name.startswith("/"):
        raise PatchError(f"patch touches an absolute path: {name!r}")
    _, slash, rest = name.partition("/")
    if not slash:
        raise PatchError(f"patch file name has no a/ or b/ prefix: {name!r}")
    return check_path(rest, name)


def _git_line_names(rest: str) -> tuple[str | None, str | None]:
    """The a/ and b/ names of a ``diff --git`` line, when they can be told apart."""
    if rest.startswith('"'):
        m = QUOTED_RE.match(rest)
        if m and rest[m.end() : m.end() + 1] == " ":
            return _strip_prefix(m.group(0)), _strip_prefix(rest[m.end() + 1 :])
        return None, None
    # Unquoted names may contain spaces; only the symmetric "a/X b/X" form is unambiguous.
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        name = _strip_prefix(rest[:half])
        return name, name
    return None, None


class _Section:
    """Mutable state of one file section while parsing."""

    def __init__(self, git_names: tuple[str | None, str | None] = (None, None)) -> None:
        self.old, self.new = git_names
        self.created = self.deleted = False
        self.mode: str | None = None
        self.added: list[str] = []
        self.is_git = False
        self.body_seen = False  # ---/+++ names or hunks read: later headers start anew

    def finish(self) -> PatchFile:
        old = None if self.created else self.old
        new = None if self.deleted else self.new
        if old is None and new is None:
            raise PatchError("patch has a file section that names no file")
        target = "\n".join(self.added) if self.mode == SYMLINK_MODE else None
        return PatchFile(old, new, self.mode, target)


def _mode(value: str) -> str:
    value = value.strip()
    if not MODE_RE.match(value):
        raise PatchError(f"malformed file mode in patch: {value!r}")
    return value


def parse_patch(text: str) -> list[PatchFile]:
    """Read a unified diff (git or traditional) into its file sections, refusing unsafe ones.

    Raises PatchError for malformed patches, unsafe paths (see the module docstring),
    symlinks pointing outside the repo or into .git, and paths below a symlink that the
    patch itself creates.  Text outside file sections (mail headers, a commit message,
    a signature) is ignored, as ``git apply`` ignores it.
    """
    lines = text.split("\n")
    files: list[PatchFile] = []
    sec: _Section | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            if sec is not None:
                files.append(sec.finish())
            sec = _Section(_git_line_names(line[len("diff --git ") :]))
            sec.is_git = True
            i += 1
            while i < len(lines) and lines[i].startswith(EXT_HEADERS):
                _ext_header(sec, lines[i])
                i += 1
            continue
        if line.startswith("--- ") and lines[i + 1 : i + 2] and lines[i + 1].startswith("+++ "):
            in_git_header = sec is not None and sec.is_git and not sec.body_seen
            hunk_follows = i + 2 < len(lines) and lines[i + 2].startswith("@@ -")
            if not in_git_header and not hunk_follows:
                i += 1  # not a patch header: git apply ignores it too
                continue
            old, new = _strip_prefix(line[4:]), _strip_prefix(lines[i + 1][4:])
            if sec is None or not in_git_header:
                if sec is not None:
                    files.append(sec.finish())
                sec = _Section()
                sec.created, sec.deleted = old is None, new is None
            sec.old = old if old is not None else sec.old
            sec.new = new if new is not None else sec.new
            sec.body_seen = True
            i += 2
            continue
        if line.startswith("@@ -") and sec is not None:
            sec.body_seen = True
            i = _hunk(sec, lines, i)
            continue
        if line.startswith("GIT binary patch") and sec is not None:
            sec.body_seen = True
            if sec.mode == SYMLINK_MODE:
                raise PatchError("patch writes a symlink as binary data")
        i += 1
    if sec is not None:
        files.append(sec.finish())
    if not files:
        raise PatchError("no file changes found: is this a unified diff?")
    _check_symlinks(files)
    return files


def _ext_header(sec: _Section, line: str) -> None:
    for key in ("rename from ", "rename old ", "copy from "):
        if line.startswith(key):
            sec.old = check_path(_unquote(line[len(key) :]))
    for key in ("rename to ", "rename new ", "copy to "):
        if line.startswith(key):
            sec.new = check_path(_unquote(line[len(key) :]))
    if line.startswith("new file mode "):
        sec.created, sec.mode = True, _mode(line[len("new file mode ") :])
    elif line.startswith("deleted file mode "):
        sec.deleted = True
    elif line.startswith("new mode "):
        sec.mode = _mode(line[len("new mode ") :])
    elif line.startswith("index ") and " " in line[len("index ") :]:
        sec.mode = _mode(line.rsplit(" ", 1)[1])


def _hunk(sec: _Section, lines: list[str], i: int) -> int:
    """Consume one hunk starting at ``lines[i]``; return the index after it."""
    m = HUNK_RE.match(lines[i])
    if not m:
        raise PatchError(f"malformed hunk header in patch: {lines[i][:80]!r}")
    old_left = 1 if m.group(2) is None else int(m.group(2))
    new_left = 1 if m.group(4) is None else int(m.group(4))
    i += 1
    while (old_left > 0 or new_left > 0) and i < len(lines):
        line = lines[i]
        tag = line[:1]
        if tag in (" ", ""):
            old_left, new_left = old_left - 1, new_left - 1
        elif tag == "-":
            old_left -= 1
        elif tag == "+":
            new_left -= 1
            sec.added.append(line[1:])
        elif tag != "\\":
            raise PatchError(f"malformed hunk in patch near line {i + 1}: {line[:80]!r}")
        i += 1
    if old_left < 0 or new_left < 0 or old_left + new_left > 0:
        raise PatchError(f"hunk line counts do not match its header near line {i}")
    return i


def _check_symlinks(files: Sequence[PatchFile]) -> None:
    links = {f.new_path for f in files if f.new_path and f.new_mode == SYMLINK_MODE}
    for f in files:
        if f.symlink_target is not None and f.new_path:
            t = f.symlink_target
            joined = os.path.normpath(os.path.join(os.path.dirname(f.new_path), t))
            if not t or t.startswith("/") or joined == ".." or joined.startswith("../"):
                raise PatchError(
                    f"patch creates symlink {f.new_path} pointing outside the repository ({t!r})"
                )
            if any(p.lower().rstrip(". ") == ".git" for p in joined.split("/")):
                raise PatchError(f"patch creates symlink {f.new_path} into .git ({t!r})")
        for p in f.paths:
            for link in links:
                if p.startswith(link + "/"):
                    raise PatchError(f"patch writes {p} through symlink {link} it creates")


def parse_patch_files(text: str) -> list[str]:
    """The repo-relative paths a patch touches, sorted; PatchError on unsafe/malformed."""
    return sorted({p for f in parse_patch(text) for p in f.paths})
