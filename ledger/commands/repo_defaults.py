"""Your engine's own defaults: the engine repo's knob defaults at its current commit.

An operator running a patched engine checkout (``engine_repo`` in ledger.yaml) runs *its*
defaults, not a release's: a local commit that changes a default changes what every
target that leaves the knob unset runs with.  So where the workspace has an engine repo,
the knobs and defaults of its HEAD commit are read from the checkout — the commit's own
tree (``git archive``), not the work tree, so the answer is that commit's and can be kept
— by the same generator as the release catalogs
(:func:`envknobs.catalogs.generate.release_catalog` for an SGLang or vLLM checkout,
:func:`envknobs.catalogs.bundled_engine.releases_of_text` for the bundled engine), and kept in the
user's cache keyed by the commit id (:mod:`ledger.store.cache`).

Each default that differs from the release the workspace declares (``engine:`` in
ledger.yaml; else the checkout's own version; for the bundled engine, the release its
targets pin) is a :class:`MovedDefault`, with the commit that set it: the newest commit
(first-parent history of the engine's source paths, at most :data:`WALK` commits) whose
parent still had another value.  That commit is *recorded* when a patch entry adopted it
(``record patch --commit``) or the ledger wrote it (its ``Ledger-Entry`` trailer names an
entry).  ``status`` and ``diff`` show every moved default; ``doctor`` reports the
unrecorded ones.  A declared release without a catalog is a warning naming the nearest
catalogued ones, and nothing is compared; an engine repo of no known layout is skipped.
Defaults computed at run time (``null`` in a catalog) are not compared.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ledger.errors import GitError
from ledger.git_runner import GitRunner
from ledger.store import cache

WALK = 32  # commits looked at for the one that set a moved default
_KIND = "engine-defaults"
BUNDLED = "knob-ledger-engine"

# engine -> (a file at the commit that tells it, the path its reader needs, the source
# directory inside that path's archive); first match wins.
_LAYOUTS = (
    ("sglang", "python/sglang/srt/server_args.py", "python/sglang", "python"),
    ("sglang", "sglang/srt/server_args.py", "sglang", "."),
    ("vllm", "vllm/envs.py", "vllm", "."),
    (BUNDLED, "engine/knobs.py", "engine/knobs.py", "."),
)


@dataclass(frozen=True)
class MovedDefault:
    """A knob whose default in the engine checkout differs from the declared release's."""

    knob: str
    default: object
    commit: str
    release: str
    release_default: object
    mover: str | None
    mover_subject: str
    recorded: bool

    def describe(self) -> str:
        head = (f"{self.knob}: default {_shown(self.default)} in engine commit "
                f"{self.commit[:12]}, {_shown(self.release_default)} in {self.release}")
        if self.mover is None:
            return head
        state = "recorded" if self.recorded else "not recorded in the ledger"
        return f"{head} (set by {self.mover[:12]} \"{self.mover_subject}\", {state})"

    def to_dict(self) -> dict:
        return asdict(self)


def _shown(value: object) -> str:
    return "unset" if value is None else str(value)


def engine_defaults(ws, entries: Sequence) -> tuple[list[MovedDefault], list[str]]:
    """(moved defaults of the engine repo's HEAD, warnings); both empty without a repo."""
    path = ws.engine_repo_path
    if path is None or not (path / ".git").exists():
        return [], []
    git = GitRunner(path)
    try:
        head = git.head()
        found = head and _defaults_at(git, head)
    except GitError as e:
        return [], [f"engine repo {path}: {e}"]
    if not found:
        return [], []
    engine, catalogs = found
    baselines, warnings = _baselines(ws, engine, catalogs)
    moved = []
    for version, (label, release) in sorted(baselines.items()):
        here = catalogs[version]
        for knob in sorted(here):
            if _differs(release.get(knob), here[knob]):
                mover, subject = _mover(git, head, engine, version, knob, here[knob])
                moved.append(MovedDefault(knob, here[knob], head, label, release[knob], mover,
                                          subject, _recorded(git, mover, entries)))
    return moved, warnings


def _differs(release: object, here: object) -> bool:
    """Whether two declared defaults differ; a default either side leaves to run time
    (None: computed at startup, or a switch's absence) or does not know is not compared."""
    return release is not None and here is not None and release != here


def _defaults_at(git: GitRunner, commit: str) -> tuple[str, dict[str, dict]] | None:
    """(engine, release -> {knob or flag: default}) of the checkout at ``commit``; cached."""
    key = cache.key_of(_KIND, commit)
    kept = cache.load(_KIND, key)
    if kept is not None:
        return kept
    layout = next((lay for lay in _LAYOUTS if _exists(git, commit, lay[1])), None)
    if layout is None:
        return None
    engine, _, part, inside = layout
    if engine == BUNDLED:
        from envknobs.catalogs.bundled_engine import releases_of_text

        text = git.run("show", f"{commit}:{part}").stdout.decode("utf-8", "replace")
        catalogs = {v: _defaults(d) for v, d in releases_of_text(text, part).items()}
    else:
        from envknobs.catalogs.generate import release_catalog

        archive = git.run("archive", "--format=tar", commit, "--", part).stdout
        with tempfile.TemporaryDirectory(prefix="ledger-engine-") as tmp:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            version, data = release_catalog(engine, Path(tmp) / inside)
        catalogs = {version: _defaults(data)}
    cache.store(_KIND, key, (engine, catalogs))
    return engine, catalogs


def _defaults(data: dict) -> dict[str, object]:
    return {item["name"]: item.get("default") for item in [*data["knobs"], *data["flags"]]}


def _exists(git: GitRunner, commit: str, path: str) -> bool:
    return git.run("cat-file", "-e", f"{commit}:{path}", check=False).returncode == 0


def _baselines(ws, engine: str, catalogs: dict[str, dict]
               ) -> tuple[dict[str, tuple[str, dict]], list[str]]:
    """Checkout release -> (the release it is compared with, that release's defaults)."""
    if engine == BUNDLED:
        return _bundled_baselines(ws, catalogs)
    from envknobs.catalog_release import load_release
    from envknobs.catalog_release import parse_engine
    from envknobs.registry import KnobError

    (version, _), = catalogs.items()
    declared = ws.config.engine or ""
    spec = declared if declared.startswith(engine + "==") else f"{engine}=={version}"
    try:
        _, release = parse_engine(spec)
        knobs, flags, _ = load_release(engine, release)
    except KnobError as e:  # names the nearest catalogued releases: a warning, not a refusal
        return {}, [f"engine repo ({engine} {version}): {e}: its defaults are not compared"]
    defaults = {k.name: k.default for k in [*knobs, *flags]}
    return {version: (f"{engine} {release}", defaults)}, []


def _bundled_baselines(ws, catalogs: dict[str, dict]
                       ) -> tuple[dict[str, tuple[str, dict]], list[str]]:
    from envknobs.catalogs.bundled_engine import detect_pins
    from envknobs.catalogs.bundled_engine import load_release
    from envknobs.catalogs.bundled_engine import split_spec
    from envknobs.registry import KnobError

    pinned = set()
    for t in ws.config.targets.values():
        try:
            text = ws.target_path(t).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        pinned |= {split_spec(spec) for spec, _ in detect_pins(text)}
    out, warnings = {}, []
    for version in sorted(pinned & set(catalogs)):
        try:
            release = load_release(version)
        except KnobError as e:
            warnings.append(f"engine repo: {e}")
            continue
        out[version] = (f"{BUNDLED} {version}", {k.name: k.default for k in release})
    return out, warnings


def _mover(git: GitRunner, head: str, engine: str, version: str, knob: str, value: object
           ) -> tuple[str | None, str]:
    """The commit that set ``knob``'s default to ``value`` (None past :data:`WALK` commits
    or when the oldest one looked at has it already), and its subject."""
    part = next(lay[2] for lay in _LAYOUTS if lay[0] == engine)
    log = git.out("log", "--first-parent", f"-n{WALK + 1}", "--format=%H", head, "--", part)
    commits = log.split()
    mover = None
    for older in commits[1:]:
        found = _defaults_at(git, older)
        catalog = (found[1].get(version) or next(iter(found[1].values()), {})) if found else {}
        if catalog.get(knob, object()) == value:
            mover = None
            continue
        mover = commits[commits.index(older) - 1]
        break
    if mover is None:
        return None, ""
    return mover, git.out("log", "-1", "--format=%s", mover)


def _recorded(git: GitRunner, commit: str | None, entries: Sequence) -> bool:
    """Whether a patch entry adopted ``commit`` or the ledger wrote it for an entry."""
    if commit is None:
        return False
    ids = {e.id for e in entries}
    if any(e.kind == "patch" and e.commit == commit for e in entries):
        return True
    trailers = git.out("log", "-1", "--format=%(trailers:key=Ledger-Entry,valueonly)", commit)
    return any(line.strip() in ids for line in trailers.splitlines())


__all__ = ["MovedDefault", "engine_defaults"]
