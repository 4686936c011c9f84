"""Named roots: how ``ledger.yaml`` names files outside the workspace without writing an
absolute path of one machine.

A workspace is shared through git, so what it commits must mean the same file on every
clone.  A target (or the engine repo) inside the workspace is written relative to it.
One outside is written relative to a *named root*::

    roots:
      deploy: /opt/sglang        # the team's default directory for this root
      engine: ~/src/sglang       # ~ is each user's home
      scratch:                   # no default: every machine sets its own
    engine_repo: 'engine:'       # the root itself
    targets:
      decode:
        path: deploy:serve_decode.sh      # ROOT:PATH inside that root
        format: bash

``ROOT:PATH`` is the spelling (like ``scp host:path``): ROOT is a declared root, PATH is
relative to it and stays inside it; ``ROOT:`` alone is the root's directory.  A root name
is lowercase letters, digits and ``_``, starting with a letter (so that it is also the
environment variable below).  A relative path whose first part holds a colon is written
``./a:b.yaml``.  Absolute paths written by older versions still load and work as they
are; ``ledger root add`` rewrites those under the new root.

Where a root is on *this* machine, first match wins:

1. the environment variable ``LEDGER_ROOT_<NAME>`` (``LEDGER_ROOT_DEPLOY``; empty =
   unset; variables of roots ``ledger.yaml`` does not declare are ignored, so one shell
   can serve several workspaces);
2. ``ledger.local.yaml`` in the workspace (``roots: {deploy: /srv/sglang}``), which is
   git-ignored: this machine's settings, never committed;
3. the default in ``ledger.yaml``.

``~`` is expanded; a relative directory is relative to the workspace.  A root that is
unknown, has no directory on this machine, or whose directory does not exist is an
error naming where its value came from (``ledger.yaml:4``, ``ledger.local.yaml:2`` or the
variable) and the value.  Roots are resolved when a path under them is needed, so a
workspace whose one root is missing here still serves its other targets.

Writing a path (:meth:`Roots.place`, used by ``target add``, ``init`` and ``root add``):
inside the workspace it is relative; outside, ``ROOT:PATH`` under the root whose
directory holds it most deeply on this machine (``--root NAME`` picks one).  Two roots
(or a root and the workspace) holding it equally deep are refused with both named.

A file outside the workspace under no root (a first ``ledger target add
/opt/sglang/serve.sh``, ``ledger init --engine-repo ~/src/sglang``): the command declares a
root for its directory itself (:func:`new_root_name`: the directory's name, ``sglang``;
``engine`` for the engine repo), with that directory as the team default, and says so.
The core never asks (a CI run has no stdin), and refusing would break the plain
``target add NAME PATH`` every operator types first; the ledger still commits no path of
one machine but the root's default, which each machine overrides (``ledger.local.yaml``,
``LEDGER_ROOT_<NAME>``) — the ``roots: {deploy: /opt/sglang}`` a team writes by hand.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Callable
from typing import Iterable
from typing import Mapping

from ledger.errors import ConfigError
from ledger.errors import LedgerError
from ledger.errors import Refused

__all__ = [
    "LOCAL_NAME",
    "RootError",
    "Roots",
    "check_root_name",
    "check_spelling",
    "contract_home",
    "env_var",
    "ignore_with_local",
    "local_text",
    "parse_declared",
    "parse_local_roots",
    "split_rooted",
]

LOCAL_NAME = "ledger.local.yaml"
ENV_PREFIX = "LEDGER_ROOT_"
ROOT_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
# What looks like a root reference: a name-ish word and a colon (validated after).
_ROOTED = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*):(.*)", re.S)


class RootError(LedgerError):
    """A root cannot be resolved on this machine: says where its value came from."""

    def __init__(self, name: str, source: str, value: str | None, problem: str) -> None:
        super().__init__()
        self.name, self.source, self.value, self.problem = name, source, value, problem

    def __str__(self) -> str:
        value = "" if self.value is None else f" = {self.value!r}"
        return f"{self.source}: root {self.name}{value}: {self.problem}"


def _machine_hint(name: str) -> str:
    return (f"set this machine's directory with `ledger root add {name} DIR --local` "
            f"(ledger.local.yaml) or {env_var(name)}")


def env_var(name: str) -> str:
    """The environment variable that overrides root ``name`` on this machine."""
    return ENV_PREFIX + name.upper()


def check_root_name(name: object, where: str, line: int | None = None) -> str:
    """``name`` if it is a valid root name, else ConfigError naming ``where``."""
    if not isinstance(name, str) or not ROOT_NAME.fullmatch(name):
        raise ConfigError(where, f"{name!r} is not a valid root name (lowercase letters, "
                                 "digits and _, starting with a letter)", line)
    return name


def new_root_name(directory: Path, taken: Iterable[str], preferred: str | None = None) -> str:
    """A root name for ``directory`` not in ``taken``: ``preferred`` or the directory's
    own name made a valid root name (``SGLang-0.5`` -> ``sglang_0_5``), ``_2``, ``_3`` ...
    appended while taken."""
    taken = set(taken)
    base = preferred or re.sub(r"[^a-z0-9_]+", "_", directory.name.lower()).strip("_")
    if not base or not base[0].isalpha():
        base = f"root_{base}".rstrip("_")
    base = base[:56]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def split_rooted(spelling: str) -> tuple[str, str] | None:
    """``("deploy", "serve.sh")`` for ``deploy:serve.sh``; None for a plain path.

    The name part is returned as written (validate it with :func:`check_root_name`); the
    path part is ``"."`` for the root itself."""
    if os.path.isabs(spelling) or spelling.startswith("."):
        return None
    m = _ROOTED.fullmatch(spelling)
    if m is None or "/" in m.group(1):
        return None
    return m.group(1), m.group(2) or "."


def check_rooted_path(rest: str) -> str | None:
    """What is wrong with the PATH part of ``ROOT:PATH`` (None: nothing)."""
    if os.path.isabs(rest) or rest.startswith("~"):
        return "the part after ROOT: must be relative to the root"
    norm = os.path.normpath(rest)
    if norm == ".." or norm.startswith("../") or "\0" in rest:
        return "the part after ROOT: must stay inside the root"
    return None


def contract_home(path: Path) -> str:
    """``path`` as written in ledger.yaml: ``~/…`` under the user's home (each user's own
    home on their machine), else absolute."""
    home = Path(os.path.expanduser("~"))
    if home != Path("/"):
        try:
            rel = path.relative_to(home)
        except ValueError:
            return str(path)
        return "~" if str(rel) == "." else f"~/{rel.as_posix()}"
    return str(path)


@dataclass(frozen=True)
class Setting:
    """One root's directory as some source gives it."""

    value: str
    origin: str  # "ledger.yaml", "ledger.local.yaml:2", "LEDGER_ROOT_DEPLOY"
    # ledger.yaml's line of the root, looked up only when a message shows it (finding it
    # means reading the file again with the round-trip loader: too slow for every command)
    line_of: Callable[[], int | None] | None = None

    @property
    def source(self) -> str:
        """Where the setting comes from, as a message writes it: "ledger.yaml:4"."""
        return _at(self.origin, self.line_of()) if self.line_of is not None else self.origin


@dataclass
class Roots:
    """The roots of one workspace on this machine.

    ``declared``: ledger.yaml's roots (name -> default directory or None); ``local``:
    ledger.local.yaml's; ``env``: the environment to read ``LEDGER_ROOT_*`` from.
    ``config_line`` finds a root's line in ledger.yaml (only for a message), and
    ``local_lines`` are ledger.local.yaml's."""

    workspace: Path
    declared: Mapping[str, str | None]
    local: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    config_line: Callable[[str], int | None] = lambda name: None
    local_lines: Mapping[str, int] = field(default_factory=dict)
    _dirs: dict[str, Path] = field(default_factory=dict, repr=False)

    def setting(self, name: str) -> Setting | None:
        """Where root ``name``'s directory comes from on this machine (None: nowhere)."""
        var = env_var(name)
        if self.env.get(var):
            return Setting(self.env[var], var)
        if name in self.local:
            return Setting(self.local[name], _at(LOCAL_NAME, self.local_lines.get(name)))
        if self.declared.get(name):
            return Setting(str(self.declared[name]), "ledger.yaml",
                           lambda: self.config_line(name))
        return None

    def directory(self, name: str) -> Path:
        """Root ``name``'s directory on this machine; RootError if it has none here."""
        if name in self._dirs:
            return self._dirs[name]
        if name not in self.declared:
            known = ", ".join(sorted(self.declared)) or "none declared"
            raise RootError(name, "ledger.yaml", None,
                            f"no such root (roots: {known}; add one with "
                            "`ledger root add NAME DIR`)")
        s = self.setting(name)
        if s is None:
            raise RootError(name, _at("ledger.yaml", self.config_line(name)), None,
                            "has no directory on this machine; " + _machine_hint(name))
        path = Path(os.path.expanduser(s.value))
        path = Path(os.path.normpath(path if path.is_absolute() else self.workspace / path))
        if not path.is_dir():
            raise RootError(name, s.source, s.value, f"{path} is not a directory on this "
                                                     "machine; " + _machine_hint(name))
        self._dirs[name] = path
        return path

    def path_of(self, spelling: str) -> Path:
        """The file a ledger.yaml path means here: ``ROOT:PATH`` under its root, a relative
        path under the workspace, an absolute path (older workspaces) as it is."""
        rooted = split_rooted(spelling)
        if rooted is not None:
            name, rest = rooted
            return Path(os.path.normpath(self.directory(name) / rest))
        p = Path(spelling)
        return p if p.is_absolute() else self.workspace / p

    def resolved(self) -> dict[str, Path]:
        """Every root that has a directory on this machine (the others left out)."""
        out = {}
        for name in self.declared:
            try:
                out[name] = self.directory(name)
            except RootError:
                pass
        return out

    def spell(self, path: Path) -> str | None:
        """``path`` as ledger.yaml writes it (see :meth:`place`); None where it lies under
        no root and outside the workspace, or where that is ambiguous."""
        try:
            return self.place(path)
        except LedgerError:
            return None

    def holders(self, path: Path) -> list[tuple[int, str, str]]:
        """(depth, root name, ``ROOT:PATH``) of every root on this machine whose directory
        holds ``path`` (as written or with symlinks resolved), deepest first."""
        path = Path(os.path.normpath(path))
        out = []
        for name, directory in self.resolved().items():
            for a, b in ((path, directory), (Path(os.path.realpath(path)),
                                             Path(os.path.realpath(directory)))):
                rel = _relative(a, b)
                if rel is not None:
                    out.append((len(b.parts), name, f"{name}:" + ("" if rel == "." else rel)))
                    break
        return sorted(out, key=lambda h: (-h[0], h[1]))

    def is_stray(self, path: Path) -> bool:
        """True when ``path`` lies outside the workspace and under no root here."""
        path = Path(os.path.normpath(path))
        return _relative(path, self.workspace) is None and not self.holders(path)

    def place(self, path: Path, root: str | None = None) -> str:
        """``path`` (absolute, on this machine) as ledger.yaml writes it.

        ``root`` given: ``ROOT:PATH`` under that root (refused when it does not hold the
        path).  Else: the root whose directory holds it most deeply, or relative when the
        workspace holds it more deeply than any root.  Refused, never guessed: a path under
        no root outside the workspace (say which root to declare), and two places that
        hold it equally deep (each named, with ``--root`` to pick)."""
        path = Path(os.path.normpath(path))
        holders = self.holders(path)
        if root is not None:
            self.directory(root)  # unknown or missing here: its own error
            for _, name, spelling in holders:
                if name == root:
                    return spelling
            raise Refused(f"{path} is not under root {root} ({self.directory(root)}, from "
                          f"{self.setting(root).source}): give a root that holds it, or "
                          "declare one with `ledger root add NAME DIR`")
        inside = _relative(path, self.workspace)
        places = list(holders)
        if inside is not None:
            places.append((len(self.workspace.parts), "", inside))
            places.sort(key=lambda h: (-h[0], h[1]))
        if not places:
            raise Refused(f"{path} is outside the workspace ({self.workspace}) and under no "
                          "root: ledger.yaml would hold an absolute path of this machine. "
                          "Declare a root that holds it (`ledger root add NAME DIR`, e.g. "
                          f"`ledger root add deploy {path.parent}`) or pass `--root NAME`")
        best = [h for h in places if h[0] == places[0][0]]
        if len(best) > 1:
            named = "; ".join(self._describe(name) for _, name, _ in best)
            raise Refused(f"{path} is held equally by {named}: pick one with `--root NAME`")
        return best[0][2]

    def _describe(self, name: str) -> str:
        if not name:
            return f"the workspace {self.workspace} (written relative)"
        s = self.setting(name)
        return f"root {name} ({self.directory(name)}, {s.source if s else 'ledger.yaml'})"


def _relative(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def _at(name: str, line: int | None) -> str:
    return f"{name}:{line}" if line else name


def parse_local_roots(text: str, where: str, declared: Mapping[str, object]
                      ) -> tuple[dict[str, str], dict[str, int]]:
    """ledger.local.yaml's roots (and their lines); errors name ``where`` and the line.

    Only ``roots`` is read from it; a root it names must be declared in ledger.yaml (a
    root only one machine knows would leave the committed paths unresolvable elsewhere).
    """
    from ruamel.yaml import YAML
    from ruamel.yaml import YAMLError

    try:
        data = YAML(typ="rt", pure=True).load(text)
    except YAMLError as e:
        raise ConfigError(where, f"not valid YAML: {getattr(e, 'problem', None) or e}") from e
    except Exception as e:  # ruamel's own failures on odd input
        raise ConfigError(where, f"not a readable YAML file ({type(e).__name__})") from e
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(where, "expected a mapping with roots", 1)
    for key in data:
        if key != "roots":
            raise ConfigError(where, f"unknown setting {key!r} (this file holds roots only)",
                              data.lc.key(key)[0] + 1)
    node = data.get("roots") or {}
    if not isinstance(node, dict):
        raise ConfigError(where, "roots must be a mapping of NAME: DIR", data.lc.key("roots")[0] + 1)
    roots, lines = {}, {}
    for name, value in node.items():
        line = node.lc.key(name)[0] + 1
        check_root_name(name, where, line)
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ConfigError(where, f"root {name!r} is not declared in ledger.yaml (roots: "
                                     f"{known}; declare it with `ledger root add {name} DIR "
                                     "--local`)", line)
        if not isinstance(value, str) or not value:
            raise ConfigError(where, f"root {name}: the directory must be a non-empty string",
                              line)
        roots[str(name)], lines[str(name)] = value, line
    return roots, lines


def local_text(roots: Mapping[str, str], previous: str | None = None) -> str:
    """ledger.local.yaml text for ``roots``, keeping the operator's comments."""
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    data = yaml.load(previous) if previous else None
    if not isinstance(data, dict):
        data = CommentedMap()
        data.yaml_set_start_comment("this machine's settings for the ledger: not in git "
                                    "(see ledger.yaml's roots)")
    node = data.get("roots")
    if not isinstance(node, dict):
        node = data["roots"] = CommentedMap()
    for name, value in roots.items():
        node[name] = value
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def ignore_with_local(text: bytes | None) -> bytes:
    """A ``.gitignore`` (None: none yet) with the ``ledger.local.yaml`` line added."""
    out = (text or b"").decode("utf-8", "surrogateescape")
    if out and not out.endswith("\n"):
        out += "\n"
    out += "# this machine's root directories (see `ledger root list`)\n" + LOCAL_NAME + "\n"
    return out.encode("utf-8", "surrogateescape")


def parse_declared(node: object, where: str, line_of) -> dict[str, str | None]:
    """ledger.yaml's ``roots`` (name -> default directory, None for none)."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise ConfigError(where, "roots must be a mapping of NAME: DIR", line_of("roots"))
    out: dict[str, str | None] = {}
    for name, value in node.items():
        check_root_name(name, where, line_of("roots", name))
        if value is not None and not isinstance(value, str):
            raise ConfigError(where, f"root {name}: the directory must be a string (or empty: "
                                     "set on each machine)", line_of("roots", name))
        out[name] = value or None
    return out


def check_spelling(spelling: str, declared: Mapping[str, object], where: str,
                   line: int | None, what: str) -> None:
    """Refuse a ``ROOT:PATH`` whose root is not declared or whose PATH leaves the root."""
    rooted = split_rooted(spelling)
    if rooted is None:
        return
    name, rest = rooted
    if not ROOT_NAME.fullmatch(name):
        raise ConfigError(where, f"{what}: {spelling!r}: {name!r} is not a valid root name "
                                 "(lowercase letters, digits and _; write ./ before a relative "
                                 "path holding a colon)", line)
    if name not in declared:
        known = ", ".join(sorted(declared)) or "none"
        raise ConfigError(where, f"{what}: {spelling!r} names root {name!r}, which ledger.yaml "
                                 f"does not declare (roots: {known}; add it with `ledger root "
                                 f"add {name} DIR`)", line)
    problem = check_rooted_path(rest)
    if problem:
        raise ConfigError(where, f"{what}: {spelling!r}: {problem}", line)
