"""The one git runner of the ledger: the workspace repository and the engine repo.

Every git command the ledger runs goes through :class:`GitRunner`, built on GitPython's
command interface (:class:`git.Git`), with the same guarantees for both repositories:

* **No hooks, no helper programs, no background work.** Every command runs with
  ``core.hooksPath=/dev/null`` (``pre-commit``, ``post-commit``, ``reference-transaction``,
  ``post-checkout`` … never run on the ledger's behalf), ``core.fsmonitor=false`` (an
  fsmonitor is a configured program too), and ``gc.auto=0`` / ``maintenance.auto=false``
  (a commit would otherwise start a ``gc`` whose locks a kill could leave behind where
  recovery does not look).  Diffs that are applied again use ``--no-ext-diff
  --no-textconv`` (:data:`PATCH_DIFF_OPTIONS`).
* **User values are data.** Revisions a person typed are checked (:func:`check_rev`) and
  passed after ``--end-of-options``; ids the ledger stored are checked as full hex ids
  (:func:`check_sha`); paths go after ``--``; patch text and commit messages travel on
  stdin, never in argv.
* **A known environment.** Inherited ``GIT_*`` variables (``GIT_DIR``, ``GIT_INDEX_FILE``,
  ``GIT_WORK_TREE`` set by an outer git hook, say) are dropped so they cannot redirect
  the ledger to another repository; ``LC_ALL=C`` keeps messages parseable; no prompt.
  GitPython always starts from ``os.environ`` and has no way to *remove* a variable, so
  when such a variable is present the command runs through ``env -u NAME …``.
* **One identity**, :data:`IDENTITY` ("knob ledger").  The engine repo's commits are the
  ledger's own and always carry it.  The workspace is the operator's repository
  (``operator=True``): its commits are their audit trail, so their git identity
  (``user.name``/``user.email``, or the ``GIT_AUTHOR_*`` / ``GIT_COMMITTER_*`` variables)
  is kept where they have one and :data:`IDENTITY` fills whatever part is missing (a
  machine without git config works); the variables that say how to reach a remote
  (``GIT_SSH_COMMAND`` …) stay too, for ``ledger pull/push``.  Neither kind names a
  repository.
* **Failures become** :class:`ledger.errors.GitError` with the command and git's stderr.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import GitError

IDENTITY = {
    "GIT_AUTHOR_NAME": "knob ledger",
    "GIT_AUTHOR_EMAIL": "knob-ledger@localhost",
    "GIT_COMMITTER_NAME": "knob ledger",
    "GIT_COMMITTER_EMAIL": "knob-ledger@localhost",
}
# Inherited variables the operator's own repository (the workspace) keeps: they name a
# person or how to reach a remote, never which repository git works on.
OPERATOR_VARS = frozenset(IDENTITY) | frozenset((
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "GIT_PROXY_COMMAND",
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_HTTP_PROXY_AUTHMETHOD"))

# Options that make git refuse to run anything the repository's config names.
SAFE_CONFIG = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.quotePath=false",
    "-c", "advice.detachedHead=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)

# A diff git itself can apply again, whatever the repo configures: no external diff
# drivers or textconv filters, binary hunks, full blob ids.
PATCH_DIFF_OPTIONS = ("--no-color", "--no-ext-diff", "--no-textconv", "--binary", "--full-index")

SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")


def check_sha(value: str, what: str = "commit") -> str:
    """Return ``value`` if it is a full hex object id, else raise GitError.

    Used for ids that the ledger itself stored (a HEAD recorded before a transaction):
    anything else is corruption or tampering and must not reach git's argv.
    """
    if not isinstance(value, str) or not SHA_RE.match(value):
        raise GitError(f"invalid {what} id {value!r}: expected a full hexadecimal object id")
    return value


def check_rev(value: str) -> str:
    """A revision a person typed: never an option, never a control character."""
    if not isinstance(value, str) or not value or value.startswith("-") \
            or any(ord(c) < 32 or c == "\x7f" for c in value):
        raise GitError(f"{value!r} is not a revision")
    return value


def clean_env(extra: Mapping[str, str] | None = None, *, operator: bool = False
              ) -> dict[str, str]:
    """The environment a git call runs with: the inherited one less ``GIT_*`` (but
    :data:`OPERATOR_VARS` for the operator's repository), ``LC_ALL=C``, no prompt."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")
           or (operator and k in OPERATOR_VARS)}
    env.update(LC_ALL="C", LANG="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0")
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class GitResult:
    """A finished git command: its exit status and its output, as bytes."""

    returncode: int
    stdout: bytes
    stderr: bytes


class GitRunner:
    """git in one repository (``path``: the top of its work tree), hardened as the module
    docstring says.  ``operator``: the operator's repository (the workspace: their identity
    and remote settings kept); otherwise the ledger's own (the engine repo)."""

    def __init__(self, path: Path, *, operator: bool = False) -> None:
        import git

        self.path = Path(path)
        self.operator = operator
        self._git = git.Git(str(self.path))
        self._person: dict[str, str] | None = None

    def run(self, *args: str, input: bytes | str | None = None,
            env: Mapping[str, str] | None = None, check: bool = True) -> GitResult:
        """Run ``git <args>``; ``check=False`` hands back a non-zero exit for callers that
        use the status as an answer (``apply --check``, ``merge-base --is-ancestor``)."""
        # surrogateescape: patch text read from a non-UTF-8 file round-trips byte for byte.
        data = input.encode("utf-8", "surrogateescape") if isinstance(input, str) else input
        full_env = clean_env(None if self.operator else IDENTITY, operator=self.operator)
        full_env.update(env or {})
        # -C as well as GitPython's cwd: GitPython falls back to the process's own
        # directory when the path is missing, and git must never run in another repository.
        argv = ["git", *SAFE_CONFIG, "-C", str(self.path.absolute()), *args]
        dropped = sorted(k for k in os.environ if k not in full_env)
        if dropped:
            argv = ["env", *(a for k in dropped for a in ("-u", k)), *argv]
        status, out, err = self._execute(argv, data, full_env)
        if check and status != 0:
            detail = err.decode("utf-8", "replace").strip() or f"exit {status}"
            raise GitError(f"git {' '.join(args[:3])} failed in {self.path}: {detail}")
        return GitResult(status, out, err)

    def _execute(self, argv: list[str], data: bytes | None, env: dict[str, str]):
        import git

        # stdin: the data from a file (GitPython takes a stream), else nothing (/dev/null)
        with tempfile.TemporaryFile() if data is not None else nullcontext() as stdin:
            if stdin is not None:
                stdin.write(data)
                stdin.seek(0)
            try:
                status, out, err = self._git.execute(
                    argv, istream=stdin, env=env, with_extended_output=True,
                    with_exceptions=False, stdout_as_string=False,
                    strip_newline_in_stdout=False)
            except git.GitCommandNotFound as e:  # git missing or not executable
                raise GitError(f"cannot run git: {e}") from e
        return status, out or b"", err.encode("utf-8", "surrogateescape")

    def out(self, *args: str, input: bytes | str | None = None,
            env: Mapping[str, str] | None = None) -> str:
        """stdout of ``git <args>`` as text, trailing newlines stripped."""
        proc = self.run(*args, input=input, env=env)
        return proc.stdout.decode("utf-8", "surrogateescape").rstrip("\n")

    def resolve_commit(self, rev: str) -> str | None:
        """The commit id ``rev`` names, or None.  ``rev`` is treated as data."""
        proc = self.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                        f"{rev}^{{commit}}", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def head(self) -> str | None:
        """HEAD's commit id, or None on an unborn branch."""
        return self.resolve_commit("HEAD")

    def commit_env(self) -> dict[str, str]:
        """The identity variables a commit made now carries."""
        if not self.operator:
            return dict(IDENTITY)
        if self._person is None:
            proc = self.run("config", "--get-regexp", r"^user\.(name|email)$", check=False)
            configured = {line.split(" ", 1)[0] for line in
                          proc.stdout.decode("utf-8", "replace").splitlines()}
            self._person = {k: v for k, v in IDENTITY.items()
                            if k not in os.environ and not
                            (("user.name" if k.endswith("_NAME") else "user.email") in configured)}
        return dict(self._person)


def init_repo(root: Path) -> None:
    """A new repository at ``root`` on branch ``main``."""
    root.mkdir(parents=True, exist_ok=True)
    GitRunner(root).run("init", "--quiet", "--initial-branch=main", "--", str(root))


__all__ = ["IDENTITY", "PATCH_DIFF_OPTIONS", "GitResult", "GitRunner", "check_rev",
           "check_sha", "clean_env", "init_repo"]
