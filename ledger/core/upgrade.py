"""`ledger upgrade plan`, decided: what an engine upgrade changes for one target.  Pure.

The command (:mod:`ledger.commands.upgrade`) reads the target, finds the release it runs
(detected in the file, declared in ledger.yaml, or ``--from``), asks
:func:`envknobs.release_diff.changes_between` what changes between the two releases and
hands both here.  The rows, each with ``file:line`` and the command that carries it out:

* ``release`` — where the file writes the release (the upgrade itself: ``ledger record
  upgrade``); a target whose release is only declared has the row without a line;
* ``removed`` / ``renamed`` / ``deprecated`` — names *set in the file* that the new
  release no longer reads, reads under another name (the value translated where the
  rename inverts the meaning: ``..._DISABLE_X=1`` -> ``..._ENABLE_X=0``), or marks
  deprecated;
* ``default`` — names the file leaves *unset* whose default moves (old -> new): the
  upgrade changes them silently; the command pins the old default, for whoever wants
  the old behaviour (what ``bisect --upgrade`` tries one by one);
* ``redundant`` — names set to what is now the new default (the command unsets them);
* ``new`` — names the new release adds that the catalogs hint perf.

Decisions: rows for unset names sit on the line where the release is written (the
upgrade is what changes them); a name set in the file whose default moved but whose value
is another one is no row (the file decides it, whatever the default); removed and
deprecated names are ``bugfix`` commands (the config stays valid), pins and new knobs
``perf``.  An upgrade entry stores :meth:`TargetPlan.to_dict` as its ``plan`` and
:func:`markdown` of it as its ``body``; :func:`moved_defaults` reads them back.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from dataclasses import field
from typing import Callable
from typing import Iterable
from typing import Sequence

from ledger.values import default_text

ROW_ORDER = ("release", "removed", "renamed", "deprecated", "redundant", "default", "new")


@dataclass(frozen=True)
class Setting:
    """A knob or flag the file sets: its name as the old release reads it, value, line;
    ``key``: how the file spells it where that is no knob or flag name (an engine
    ``--config`` file's ``mem-fraction-static`` for ``--mem-fraction-static``)."""

    name: str
    value: str | None
    line: int
    key: str | None = None

    def spelled(self, name: str) -> str:
        """``name`` (this setting's, or its replacement's) as the file writes it."""
        return name.lstrip("-") if self.key is not None and name.startswith("--") else name


@dataclass(frozen=True)
class Row:
    change: str  # one of ROW_ORDER
    name: str
    line: int | None  # None: nowhere in the file (a release declared in ledger.yaml)
    command: str
    value: str | None = None  # the value set in the file
    old_default: object = None
    new_default: object = None
    replacement: str | None = None
    new_value: str | None = None  # renamed: the value for the new name (translated)
    inverts: bool = False
    note: str = ""

    def to_dict(self, path: str) -> dict:
        d: dict = {"change": self.change, "name": self.name, "line": self.line,
                   "where": f"{path}:{self.line}" if self.line else path,
                   "command": self.command}
        for key in ("value", "replacement", "new_value", "note"):
            if getattr(self, key) not in (None, ""):
                d[key] = getattr(self, key)
        if self.change in ("default", "redundant", "new"):
            d["old_default"], d["new_default"] = _shown(self.old_default), _shown(self.new_default)
        if self.inverts:
            d["inverts"] = True
        return d


def _shown(default: object) -> object:
    """A default as JSON holds it (computed: its words; none: null)."""
    if default is None or isinstance(default, (bool, int, float)):
        return default
    return default_text(default)


@dataclass(frozen=True)
class TargetPlan:
    target: str
    path: str
    before: str  # vllm==0.30.0
    after: str
    source: str  # where ``before`` came from: detected / declared / --from
    rows: tuple[Row, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"target": self.target, "path": self.path, "from": self.before,
                "to": self.after, "from_source": self.source,
                "rows": [r.to_dict(self.path) for r in self.rows],
                "warnings": list(self.warnings)}


def _cmd(*words: str) -> str:
    return "ledger " + " ".join(shlex.quote(w) for w in words)


def set_command(target: str, name: str, value: str | None, cls: str, title: str) -> str:
    """The ``ledger record knob|flag`` that sets (or, for None, unsets) ``name``."""
    words = [f"{name}={value}"] if value is not None else [name, "--unset"]
    return _cmd("record", "flag" if name.startswith("-") else "knob", target, *words,
                "--class", cls, "--title", title)


def value_word(default: object) -> str:
    """A default as a value to write back (``true`` / ``0.9`` / ``1 2 4``)."""
    return default_text(default)


def same_value(value: str | None, default: object) -> bool:
    """Whether the value set equals ``default`` as the engine reads both."""
    if value is None or default is None or getattr(default, "computed", False):
        return False
    if isinstance(default, bool):
        word = value.strip().lower()
        return word in (("1", "true", "yes", "y", "on") if default else ("0", "false", "no", "n", "off"))
    if isinstance(default, (int, float)):
        try:
            return float(value) == float(default)
        except ValueError:
            return False
    return value == default_text(default)


def plan_target(target: str, path: str, settings: Sequence[Setting], release_lines: Sequence[int],
                before: str, after: str, source: str, changes, *,
                translate, warnings: Iterable[str] = (),
                spelling: Callable[[str], str | None] = lambda name: name) -> TargetPlan:
    """The rows of one target's upgrade from ``before`` to ``after`` (``changes``: the
    :class:`envknobs.release_diff.ReleaseChanges` between them, None when there is none
    to compare; ``translate(value, inverts)``: the value for a renamed knob;
    ``spelling(name)``: how the file would write a name it does not set yet, None where
    it cannot hold it — an env var in an engine ``--config`` file, a flag in an env map:
    the row stays, the default still moves for the process, without a command)."""
    version = after.split("==", 1)[1]
    line = release_lines[0] if release_lines else None
    if before == after:  # nothing to upgrade: said, with no command
        warnings = (*warnings, f"{target} already runs {after}")
    rows = [Row("release", before, line, "" if before == after else _cmd(
        "record", "upgrade", target, "--to", after, "--class", "perf", "--title",
        f"upgrade to {after}"), value=before, new_value=after)]
    if changes is not None:
        set_names = {s.name: s for s in settings}
        for s in settings:
            row = _set_row(target, s, changes.get(s.name), version, translate)
            if row is not None:
                rows.append(row)
        for c in changes.of("default"):
            if c.name in set_names:
                continue
            pin = None if getattr(c.old_default, "computed", False) or c.old_default is None \
                else value_word(c.old_default)
            rows.append(Row("default", c.name, line, _new_name_command(
                target, spelling(c.name), pin, f"keep {c.name} at its pre-{version} default"),
                old_default=c.old_default, new_default=c.new_default))
        for c in changes.of("new"):
            rows.append(Row("new", c.name, line, _new_name_command(
                target, spelling(c.name), "VALUE", f"try {c.name} (new in {version})"),
                new_default=c.new_default, note=c.doc[:160]))
    order = {k: i for i, k in enumerate(ROW_ORDER)}
    rows.sort(key=lambda r: (order[r.change], r.line or 0, r.name))
    return TargetPlan(target, path, before, after, source, tuple(rows), tuple(warnings))


def _new_name_command(target: str, spelled: str | None, value: str | None, title: str) -> str:
    """The command that sets a name the file does not set yet ("" where it cannot)."""
    if spelled is None or value is None:
        return ""
    return set_command(target, spelled, value, "perf", title)


def _set_row(target: str, s: Setting, c, version: str, translate) -> Row | None:
    """The row of a name the file sets, where the upgrade changes its fate."""
    if c is None:
        return None
    mine = s.spelled(s.name)
    gone = f"{s.name}: {c.change} in {version}"
    if c.change == "renamed":
        try:
            new_value = translate(s.value, c.inverts)
        except ValueError as e:
            return Row("renamed", s.name, s.line, "", value=s.value, replacement=c.replacement,
                       inverts=c.inverts, note=str(e))
        unset = set_command(target, mine, None, "bugfix", gone)
        put = set_command(target, s.spelled(str(c.replacement)), new_value, "bugfix",
                          f"{s.name} is {c.replacement} from {version}")
        return Row("renamed", s.name, s.line, f"{unset} && {put}", value=s.value,
                   replacement=c.replacement, new_value=new_value, inverts=c.inverts,
                   note=c.note)
    if c.change in ("removed", "deprecated"):
        return Row(c.change, s.name, s.line, set_command(target, mine, None, "bugfix", gone),
                   value=s.value, replacement=c.replacement, note=c.note)
    if c.change == "default" and same_value(s.value, c.new_default):
        return Row("redundant", s.name, s.line, set_command(
            target, mine, None, "perf", f"{s.name} is the default from {version}"),
            value=s.value, old_default=c.old_default, new_default=c.new_default)
    return None


def moved_defaults(plan: dict | None) -> list[tuple[str, object, object]]:
    """``(name, old default, new default)`` of every default an upgrade moved under the
    target's unset names (an upgrade entry's ``plan``): what a pin would put back."""
    return [(r["name"], r.get("old_default"), r.get("new_default"))
            for r in (plan or {}).get("rows", ()) if r.get("change") == "default"]


_HEADINGS = {"release": "Release", "removed": "Removed (set in the file)",
             "renamed": "Renamed (set in the file)", "deprecated": "Deprecated (set in the file)",
             "redundant": "Redundant (set to the new default)",
             "default": "Defaults moved (unset in the file)", "new": "New knobs hinted perf"}


def row_text(r: dict) -> str:
    """One row in words: ``VLLM_X=1: removed (use --y)``, ``VLLM_Z: default 0 -> 1``."""
    change = r["change"]
    if change == "release":
        return f"{r['value']} -> {r['new_value']}"
    if change in ("default", "redundant"):
        set_ = f"={r['value']}" if r.get("value") is not None else " (unset)"
        return (f"{r['name']}{set_}: default {_word(r.get('old_default'))} -> "
                f"{_word(r.get('new_default'))}")
    if change == "new":
        return f"{r['name']} (default {_word(r.get('new_default'))})"
    text = f"{r['name']}" + (f"={r['value']}" if r.get("value") is not None else "")
    if change == "renamed":
        inv = " (meaning inverted)" if r.get("inverts") else ""
        new = f"={r['new_value']}" if r.get("new_value") is not None else ""
        return f"{text}: renamed {r['replacement']}{new}{inv}"
    use = f" (use {r['replacement']})" if r.get("replacement") else ""
    return f"{text}: {change}{use}"


def _word(default: object) -> str:
    if default is None:
        return "unset"
    return '""' if default == "" else default_text(default)


def plan_lines(plan: dict | None, defaults_only: bool = False) -> list[str]:
    """An upgrade entry's plan as ``show`` (and, ``defaults_only``, ``diff``) print it
    under the change: the defaults it moved first, then the names of the file it changes
    the fate of."""
    rows = [r for r in (plan or {}).get("rows", ())
            if r.get("change") != "release" and (r.get("change") == "default" or
                                                 not defaults_only)]
    rows.sort(key=lambda r: r.get("change") != "default")
    return [f"{r['change']:<10} {r.get('where', '')}: {row_text(r)}" for r in rows]


def markdown(plans: Sequence[dict]) -> str:
    """The plans (:meth:`TargetPlan.to_dict`) as markdown, for a pull request or an entry's
    body: one section per target, one table per kind of row; every value escaped."""
    out = []
    for p in plans:
        out.append(f"## {_md(p['target'])}: {_md(p['from'])} -> {_md(p['to'])}\n")
        out.append(f"`{_md(p['path'])}` (release {_md(p['from_source'])})\n")
        out.extend(f"> warning: {_md(w)}\n" for w in p.get("warnings", ()))
        for change in ROW_ORDER:
            rows = [r for r in p["rows"] if r["change"] == change]
            if not rows:
                continue
            out.append(f"\n### {_HEADINGS[change]}\n\n| where | change | command |\n|---|---|---|")
            out.extend(f"| {_md(r['where'])} | {_md(row_text(r))} | "
                       f"{'`' + _md(r['command']) + '`' if r['command'] else ''} |" for r in rows)
            out.append("")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _md(text: object) -> str:
    """Text safe in a markdown table cell (pipes, backticks, HTML and newlines)."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
            .replace("<", "&lt;").replace(">", "&gt;").replace("\n", " "))


__all__ = ["ROW_ORDER", "Row", "Setting", "TargetPlan", "markdown", "moved_defaults",
           "plan_lines", "plan_target", "row_text", "same_value", "set_command"]
