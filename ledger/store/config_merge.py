"""Merging ``ledger.yaml`` when git's line merge cannot: targets by name.

Two operators adding a target each at the same time append to the same ``targets:``
mapping, which a line merge sees as one conflicting hunk.  The targets are a mapping by
name, so they merge like entries do: a target one side added, changed or removed is
taken from that side; one both sides added or changed differently is a conflict naming
it.  ``roots`` merge by name the same way.  ``engine_repo`` and ``bench`` changed on one side only are taken from it; every
other top-level key must be the same on both sides (else it is a conflict too: nothing
is picked silently).  The text written is the local file with the
targets replaced (its comments kept, see :func:`ledger.store.config_file.dump_config`).
"""

from __future__ import annotations

from typing import Any

from ledger.errors import MergeConflict
from ledger.store.config_file import CONFIG_NAME
from ledger.store.config_file import dump_config
from ledger.store.config_file import parse_config_text

TAKEN = ("engine_repo", "bench", "engine")
_ABSENT = object()


def _shown(value: Any) -> str:
    return "(absent)" if value is _ABSENT else repr(value)


def _load(text: str) -> dict[str, Any]:
    from ruamel.yaml import YAML

    data = YAML(typ="safe", pure=True).load(text) if text.strip() else {}
    return data if isinstance(data, dict) else {}


def merge_config(base: str, ours: str, theirs: str) -> str:
    """The merged ``ledger.yaml`` text, or MergeConflict naming what both sides changed."""
    b, o, t = _load(base), _load(ours), _load(theirs)
    keys = sorted((set(o) | set(t)) - {"targets", "roots"}, key=str)
    # engine_repo and bench are written from the config: one side's change is taken;
    # any other key (written as text) must be the same on both sides.
    taken = [k for k in keys if k in TAKEN and o.get(k) == b.get(k) != t.get(k)]
    clashes = [k for k in keys if o.get(k) != t.get(k) and k not in taken]
    conflicts = [(f"{k}: {t.get(k)!r}", f"{k}: {o.get(k)!r}", f"{CONFIG_NAME} key {k}")
                 for k in clashes]
    merged = _by_name("target", b, o, t, conflicts)
    roots = _by_name("root", b, o, t, conflicts)
    if conflicts:
        raise MergeConflict(conflicts, f"edit {CONFIG_NAME} so it holds what both sides meant "
                                       "(`ledger target add` on one side), commit, and pull again")
    ot, tt = (dict(x.get("targets") or {}) for x in (o, t))
    order = [n for n in ot if n in merged] + [n for n in tt if n in merged and n not in ot]
    text = _with_targets(ours, {n: merged[n] for n in order}, theirs if taken else None,
                         taken, roots)
    parse_config_text(text, CONFIG_NAME)  # what is written must read back
    return text


def _by_name(what: str, b: dict, o: dict, t: dict, conflicts: list) -> dict[str, Any]:
    """Targets or roots merged by name: one side's addition, change or removal taken;
    both sides changing one name differently appended to ``conflicts``."""
    key = what + "s"
    bt, ot, tt = (dict(x.get(key) or {}) for x in (b, o, t))
    merged = dict(ot)
    for name in sorted(set(bt) | set(ot) | set(tt)):
        # absent and declared-empty (a root with no default) are different things
        mine, other, was = (x.get(name, _ABSENT) for x in (ot, tt, bt))
        if mine == other or other == was:
            continue
        if mine == was:
            if other is _ABSENT:
                merged.pop(name, None)
            else:
                merged[name] = other
            continue
        conflicts.append((f"{what} {name}: {_shown(other)}", f"{what} {name}: {_shown(mine)}",
                          f"{CONFIG_NAME} {what} {name}"))
    return merged


def _with_targets(ours: str, targets: dict[str, Any], theirs: str | None = None,
                  taken: list[str] = (), roots: dict[str, Any] | None = None) -> str:
    config = parse_config_text(ours, CONFIG_NAME)
    if roots is not None:
        order = [n for n in config.roots if n in roots] + \
            [n for n in roots if n not in config.roots]
        config.roots = {n: roots[n] or None for n in order}
    declared = {**config.roots, **(roots or {})}
    only = parse_config_text("version: 1\nroots:\n" + _targets_yaml(declared) + "targets:\n"
                             + _targets_yaml(targets), CONFIG_NAME)
    config.targets = only.targets
    if theirs is not None:
        other = parse_config_text(theirs, CONFIG_NAME)
        if "engine_repo" in taken:
            config.engine_repo = other.engine_repo
        if "bench" in taken:
            config.bench_command = other.bench_command
            config.bench_tolerance_pct, config.bench_guards = \
                other.bench_tolerance_pct, other.bench_guards
        if "engine" in taken:
            config.engine = other.engine
    return dump_config(config, ours)


def _targets_yaml(targets: dict[str, Any]) -> str:
    import io

    from ruamel.yaml import YAML

    if not targets:
        return "  {}\n"
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    buf = io.StringIO()
    yaml.dump(targets, buf)
    return "".join(f"  {line}\n" for line in buf.getvalue().splitlines())
