"""`ledger check`: read base and head from git objects, and let the core judge the range.

Everything is read from the object database through the one hardened git runner
(:mod:`ledger.git_runner`): ``ledger.yaml`` and ``entries.jsonl`` at both commits, and each
target file that the range touches (its blob changed, its entries changed, or its
definition in ledger.yaml changed), with the target's own format reader
(:func:`ledger.store.targets.parse_target`) — never a checkout, never a text diff.  What is
read is what changed: one ``diff-tree`` says which blobs differ and one ``cat-file
--batch`` reads them all, so a repository of 100 targets where one file changed reads two
versions of that one file.  The rules are :mod:`ledger.core.check`'s.

Never writes: no checkout, no index refresh, no ref, no lock, no recovery of an
interrupted command (a read-only command must not roll anything back), nothing in the
repository or the workspace.  (Like every command it may fill the per-user parse cache,
``~/.cache/knob-ledger`` or ``$LEDGER_CACHE_DIR``; ``LEDGER_CACHE_DIR=`` turns it off.)  Typed revisions are checked and resolved after ``--end-of-options``; only full
object ids reach the later commands; paths go after ``--`` as literal pathspecs.

Defaults (the issue leaves them to us): ``--head`` is ``HEAD``; ``--base`` is the
pre-push range pre-commit hands a hook (``PRE_COMMIT_FROM_REF`` / ``PRE_COMMIT_TO_REF``),
else the branch's upstream (``@{upstream}``), else refused asking for ``--base``.  A
target file new in the range has no base: its knobs are its baseline (a new file is no
hand edit of a tuned one).  The layout: the workspace (ledger.yaml) is in the repository
(at its top or in a folder), and targets are files of the same repository; a target
outside it is the ``outside-repo`` rule.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from typing import Sequence

from ledger.core.check import check_range
from ledger.core.check import parse_checks
from ledger.core.check import range_entries
from ledger.core.findings import EvidenceView
from ledger.core.findings import Layout
from ledger.core.findings import Report
from ledger.core.findings import Side
from ledger.core.findings import TargetReading
from ledger.core.model import Entry
from ledger.errors import ConfigError
from ledger.errors import GitError
from ledger.errors import LedgerError
from ledger.errors import UsageError
from ledger.git_runner import GitRunner
from ledger.git_runner import check_rev
from ledger.git_runner import check_sha

CONFIG = "ledger.yaml"
ENTRIES = "entries.jsonl"
LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


@dataclass(frozen=True)
class Repo:
    """The repository holding the workspace: its runner, and where the workspace is in it."""

    git: GitRunner
    top: Path
    prefix: str  # the workspace's folder relative to the top ("" at the top)

    def path(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name


def open_repo(workspace: Path) -> Repo:
    git = GitRunner(workspace, operator=True)
    proc = git.run("rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise GitError(f"{workspace} is not in a git repository: `ledger check` compares "
                       "two commits of the repository holding the workspace")
    top = Path(proc.stdout.decode("utf-8", "surrogateescape").strip())
    prefix = os.path.relpath(Path(workspace).resolve(), top.resolve())
    return Repo(GitRunner(top, operator=True), top, "" if prefix == "." else prefix)


def default_range(base: str | None, head: str | None,
                  env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(base, head)`` as typed, or the defaults (module docstring)."""
    env = os.environ if env is None else env
    hook_from, hook_to = env.get("PRE_COMMIT_FROM_REF"), env.get("PRE_COMMIT_TO_REF")
    if head is None:
        head = hook_to if hook_to and base is None else "HEAD"
    if base is None:
        base = hook_from or "@{upstream}"
    return base, head


def resolve(repo: Repo, rev: str, which: str) -> str:
    sha = repo.git.resolve_commit(check_rev(rev))
    if sha is None:
        hint = (" (this branch has no upstream: give --base REF, e.g. --base origin/main)"
                if rev == "@{upstream}" else "")
        raise UsageError(f"--{which} {rev!r} names no commit in {repo.top}{hint}")
    return check_sha(sha)


def changed_blobs(repo: Repo, base: str, head: str) -> dict[str, tuple[str | None, str | None]]:
    """Each path whose blob differs: ``(base blob, head blob)``, None where absent."""
    out = repo.git.run("diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff",
                       "--no-textconv", base, head, "--").stdout
    fields = out.split(b"\0")
    changed: dict[str, tuple[str | None, str | None]] = {}
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode().lstrip(":").split()
        if len(meta) < 5:
            continue
        path = fields[i + 1].decode("utf-8", "surrogateescape")
        old, new = (None if set(s) == {"0"} else s for s in meta[2:4])
        changed[path] = (old, new)
    return changed


def blob_ids(repo: Repo, rev: str, paths: Sequence[str]) -> dict[str, str]:
    """The blob of each of ``paths`` (repo-relative) at ``rev``; absent paths left out."""
    if not paths:
        return {}
    out = repo.git.run("ls-tree", "-z", "--full-tree", rev, "--", *paths, env=LITERAL).stdout
    found = {}
    for item in filter(None, out.split(b"\0")):
        meta, _, path = item.partition(b"\t")
        _mode, kind, sha = meta.decode().split()
        if kind == "blob":
            found[path.decode("utf-8", "surrogateescape")] = sha
    return found


def read_blobs(repo: Repo, shas: Sequence[str]) -> dict[str, bytes]:
    """The content of each blob, in one ``cat-file --batch``."""
    wanted = list(dict.fromkeys(check_sha(s, "blob") for s in shas))
    if not wanted:
        return {}
    out = repo.git.run("cat-file", "--batch", input="".join(f"{s}\n" for s in wanted)).stdout
    blobs, pos = {}, 0
    for sha in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) < 3 or header[1] != b"blob":
            raise GitError(f"git cat-file: object {sha} is not a readable blob")
        size = int(header[2])
        blobs[sha] = out[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return blobs


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(where, f"not valid UTF-8 (byte offset {e.start})") from None


def _yaml_node(text: str, where: str):
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader (the C one where built)
    except yaml.YAMLError as e:
        raise ConfigError(where, f"not valid YAML: {e}") from None


def side_of(tf) -> Side:
    """What the core compares of a parsed target file (:class:`~ledger.core.findings.Side`)."""
    values = dict(tf.values)
    lines: dict[str, int] = {}
    if tf.summary is not None:
        for k in tf.summary.knobs:
            if k.places:
                lines.setdefault(k.knob, k.places[0].line)
            for p in k.places:
                key = f"{k.knob}@{p.key}"
                lines[key] = p.line
                if k.needs_selection and p.value is not None:
                    values[key] = p.value
    elif tf.target.format == "dotenv":
        from envknobs.formats.dotenv import binding_lines

        lines.update(binding_lines(tf.text))
    # where the file writes its release (image tags, pins, a Helm image.tag): the places an
    # upgrade entry edits (envknobs.release_spots)
    releases = tuple((s.spec, s.line) for s in tf.release_spots())
    return Side(values, dict(tf.place_values), lines, releases)


@dataclass
class _Commit:
    sha: str
    config: object
    checks: object
    entries_data: bytes  # entries.jsonl as stored (b"" where absent)
    where: str

    def entries(self, lines: Sequence[bytes] | None = None) -> list[Entry]:
        """The entries (``lines``: only those lines of the file), parsed and validated
        through the ledger's parse cache, as every command reads them."""
        from ledger.store.workspace import cached_entries

        data = self.entries_data if lines is None else b"\n".join(sorted(lines))
        return cached_entries(data, self.where)[0] if data.strip() else []


_PARSED: dict[str, tuple] = {}  # blob id -> what it parses to (base and head often share one)


def _load_commit(repo: Repo, sha: str, blobs: dict[str, bytes], ids: dict[str, str],
                 *, required: bool) -> _Commit | None:
    """ledger.yaml (parsed once per blob) and entries.jsonl's bytes at ``sha``."""
    from ledger.store.config_file import parse_config_text

    cfg_path, entries_path = repo.path(CONFIG), repo.path(ENTRIES)
    where = f"{cfg_path} at {sha[:12]}"
    if cfg_path not in ids:
        if required:
            raise ConfigError(where, "no ledger.yaml in this commit: nothing to check against")
        return None
    cfg_blob = ids[cfg_path]
    if cfg_blob not in _PARSED:
        text = _text(blobs[cfg_blob], where)
        node = _yaml_node(text, where)
        checks = node.get("checks") if isinstance(node, dict) else None
        _PARSED[cfg_blob] = (parse_config_text(text, where), checks)
    config, checks = _PARSED[cfg_blob]
    data = blobs[ids[entries_path]] if entries_path in ids else b""
    return _Commit(sha, config, checks, data, f"{entries_path} at {sha[:12]}")


def _entries_of_range(base: _Commit | None, head: _Commit
                      ) -> tuple[list[Entry], list[Entry], frozenset[str]]:
    """``(base entries the range changed or removed, head entries, ids unchanged)``.

    A line of entries.jsonl that is byte-identical at base and head is an entry the range
    did not touch: only the base's other lines are parsed (the head's whole file is, to
    judge it), so a ledger of thousands of entries where one changed parses one at base."""
    import json

    head_entries = head.entries()
    if base is None:
        return [], head_entries, frozenset()
    base_lines = set(base.entries_data.split(b"\n"))
    head_lines = set(head.entries_data.split(b"\n"))
    gone = [line for line in base_lines - head_lines if line.strip()]
    touched = set()
    for line in head_lines - base_lines:
        try:
            touched.add(json.loads(line).get("id"))
        except (ValueError, AttributeError):
            continue  # the head's parse above refused a bad line already
    base_changed = base.entries(gone)
    touched |= {e.id for e in base_changed}
    same = frozenset(e.id for e in head_entries if e.id not in touched)
    return base_changed, head_entries, same


def _evidence(repo: Repo, head: str, entries: Sequence[Entry], heads: Mapping[str, Side]
              ) -> dict[str, EvidenceView]:
    """The latest evidence at ``head`` of each entry (read from the tree, as the store
    lays it out: ``evidence/<id>/<run-id>/summary.yaml``; a run that a later run's
    meta.yaml ``supersedes`` is skipped)."""
    if not entries:
        return {}
    from ledger.evidence.store import META_YAML
    from ledger.evidence.store import RUN_ID_RE
    from ledger.evidence.store import SUMMARY_YAML
    from ledger.evidence.summary import headline
    from ledger.evidence.summary import stale_reasons

    roots = [repo.path(f"evidence/{e.id}") for e in entries]
    out = repo.git.run("ls-tree", "-r", "-z", "--full-tree", head, "--", *roots,
                       env=LITERAL).stdout
    runs: dict[str, dict[str, dict[str, str]]] = {}
    for item in filter(None, out.split(b"\0")):
        meta, _, path = item.partition(b"\t")
        parts = path.decode("utf-8", "surrogateescape").split("/")
        entry_id, run_id, name = parts[-3:] if len(parts) >= 3 else ("", "", "")
        if RUN_ID_RE.match(run_id) and name in (SUMMARY_YAML, META_YAML):
            runs.setdefault(entry_id, {}).setdefault(run_id, {})[name] = meta.split()[2].decode()
    blobs = read_blobs(repo, [s for r in runs.values() for files in r.values()
                              for s in files.values()])
    views = {}
    for e in entries:
        found = runs.get(e.id, {})
        superseded = set()
        for run_id, files in found.items():
            if META_YAML in files:
                meta = _yaml_node(blobs[files[META_YAML]].decode("utf-8", "replace"), run_id)
                if isinstance(meta, dict) and meta.get("supersedes"):
                    superseded.add(str(meta["supersedes"]))
        latest = sorted(r for r, files in found.items()
                        if SUMMARY_YAML in files and r not in superseded)
        if not latest:
            continue
        where = repo.path(f"evidence/{e.id}/{latest[-1]}/{SUMMARY_YAML}")
        summary = _yaml_node(blobs[found[latest[-1]][SUMMARY_YAML]].decode("utf-8", "replace"),
                             where)
        if not isinstance(summary, dict):
            raise ConfigError(where, "expected a mapping")
        side = heads.get(e.target or "")
        context = None if side is None or e.kind != "knob" else \
            {k: v for k, v in side.values.items() if k != e.knob and "@" not in k}
        views[e.id] = EvidenceView(summary.get("verdict"), headline(summary),
                                   tuple(stale_reasons(summary, None, context)))
    return views


def run_check(workspace: Path, base: str | None = None, head: str | None = None) -> Report:
    """Check the range ``base..head`` of the repository holding ``workspace``."""
    from ledger.commands.catalog import catalog_class
    from ledger.store.roots import RootError
    from ledger.store.targets import parse_target
    from ledger.store.workspace import Workspace

    repo = open_repo(workspace)
    base_rev, head_rev = default_range(base, head)
    base_sha, head_sha = resolve(repo, base_rev, "base"), resolve(repo, head_rev, "head")
    changed = changed_blobs(repo, base_sha, head_sha)
    own = [repo.path(CONFIG), repo.path(ENTRIES)]
    base_ids, head_ids = blob_ids(repo, base_sha, own), blob_ids(repo, head_sha, own)
    blobs = read_blobs(repo, [*base_ids.values(), *head_ids.values()])
    head_c = _load_commit(repo, head_sha, blobs, head_ids, required=True)
    base_c = _load_commit(repo, base_sha, blobs, base_ids, required=False)
    base_entries, head_entries, same = _entries_of_range(base_c, head_c)
    severities = parse_checks(base_c.checks if base_c and base_c.checks is not None
                              else head_c.checks, f"{repo.path(CONFIG)} ({CONFIG} checks:)")

    in_range = range_entries(base_entries, head_entries, same)
    by_entries = {t for e in in_range if e.kind == "knob" for t in e.targets}
    base_targets = base_c.config.targets if base_c else {}
    ws = Workspace.with_config(workspace, head_c.config)
    plans = []  # (name, target, repo path, needs head even if unchanged)
    readings: list[TargetReading] = []
    for name, t in sorted(head_c.config.targets.items()):
        try:
            here = ws.target_path(t)
        except RootError as e:  # a root this machine does not set: not a file of this repo
            readings.append(TargetReading(name, t.path, False, outside=str(e)))
            continue
        rel = os.path.relpath(Path(here).absolute(), repo.top.absolute())
        if rel == ".." or rel.startswith("../"):
            readings.append(TargetReading(name, str(here), False,
                                          outside=f"{here} is outside the repository {repo.top}"))
            continue
        redefined = base_targets.get(name) != t
        if rel in changed or name in by_entries or redefined:
            plans.append((name, t, rel, rel in changed))
    unchanged = [rel for _, _, rel, is_changed in plans if not is_changed]
    head_only = blob_ids(repo, head_sha, unchanged)
    want = []
    for _, _, rel, is_changed in plans:
        old, new = changed[rel] if is_changed else (head_only.get(rel), head_only.get(rel))
        want += [s for s in (old, new) if s]
    contents = read_blobs(repo, want)
    for name, t, rel, is_changed in plans:
        old, new = changed[rel] if is_changed else (head_only.get(rel), head_only.get(rel))
        readings.append(_reading(name, t, rel, is_changed, old, new, contents, parse_target,
                                 repo, base_sha, head_sha))
    heads = {r.name: r.head for r in readings if r.head is not None}
    perf = [e for e in in_range if e.cls == "perf"]
    evidence = _evidence(repo, head_sha, perf, heads)
    layout = Layout(os.path.relpath(repo.top.absolute(), Path(workspace).absolute()))
    return check_range(base=base_sha, head=head_sha, readings=readings,
                       base_entries=base_entries, head_entries=head_entries,
                       evidence=evidence, severities=severities, class_of=catalog_class,
                       layout=layout, same_ids=same)


def _reading(name, t, rel, is_changed, old, new, contents, parse_target, repo, base_sha,
             head_sha) -> TargetReading:
    """One target at base and head; a file missing at head, or that does not parse at
    either side, is ``error`` (never a pass)."""
    path = repo.top / rel
    if new is None:
        at = head_sha[:12]
        return TargetReading(name, rel, is_changed, error=f"{rel} is not in the repository "
                             f"at head ({at}): deleted or never committed")
    sides = []
    for sha, label in ((old, f"base {base_sha[:12]}"), (new, f"head {head_sha[:12]}")):
        if sha is None:
            sides.append(None)
            continue
        try:
            sides.append(side_of(parse_target(t, path, contents[sha])))
        except LedgerError as e:
            return TargetReading(name, rel, is_changed,
                                 error=f"{rel} at {label} cannot be read as {t.format}: {e}")
    return TargetReading(name, rel, is_changed, base=sides[0] if old else sides[1],
                         head=sides[1], new=old is None)


__all__ = ["default_range", "open_repo", "run_check", "side_of"]
