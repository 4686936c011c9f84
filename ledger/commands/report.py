"""Read commands: list, show, status, diff, log.  They return data; the CLI formats it."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Container
from typing import Sequence

from ledger.commands.catalog import knob_defaults
from ledger.commands.repo_defaults import engine_defaults
from ledger.core import layers
from ledger.core.display import change_text
from ledger.core.display import display_state
from ledger.core.display import happened_at
from ledger.core.display import health_failure
from ledger.core.display import kept_by_class
from ledger.core.display import revert_action
from ledger.core.display import revert_reason
from ledger.core.model import Entry
from ledger.errors import Drift
from ledger.errors import LedgerError
from ledger.evidence.view import NONE as NO_EVIDENCE
from ledger.evidence.view import EvidenceInfo
from ledger.evidence.view import evidence_for
from ledger.evidence.view import evidence_ids
from ledger.store import wsgit
from ledger.store.apply import new_target_bytes
from ledger.store.apply import read_targets
from ledger.store.apply import unified
from ledger.store.config_file import CONFIG_NAME
from ledger.store.entries_file import parse_entries
from ledger.store.workspace import ENTRIES_NAME
from ledger.store.workspace import Workspace


_LOOK_UP = object()  # entry_row: a default not given


def entry_row(ws: Workspace, e: Entry, evidence: EvidenceInfo | None = None,
              default: object = _LOOK_UP) -> dict:
    """The entry as ``list``, ``show`` and ``diff`` print it: its fields, how it displays,
    its evidence (``evidence``, else looked up) and the engine's default for the knob
    (``default``, else looked up)."""
    ev = evidence if evidence is not None else evidence_for(ws, e)
    row = e.to_dict()
    row.pop("history")
    if default is _LOOK_UP:
        default = knob_defaults(ws, [e]).get((e.target, e.knob))
    row.update(display_state=display_state(e), change=change_text(e, default), default=default,
               evidence=ev.text,
               verdict=ev.verdict, evidence_stale=ev.stale)
    return row


def entry_rows(ws: Workspace, entries: Sequence[Entry], present: Container[str] | None = None
               ) -> list[dict]:
    """:func:`entry_row` of each entry, with what is shared read once: the catalogs and
    each target's engine (one :func:`knob_defaults`), the evidence directory (one listing:
    ``present``, the ids that have evidence, where the caller listed it already)."""
    defaults = knob_defaults(ws, entries)
    present = evidence_ids(ws) if present is None else present
    return [entry_row(ws, e, evidence_for(ws, e) if e.id in present else NO_EVIDENCE,
                      defaults.get((e.target, e.knob))) for e in entries]


def list_entries(ws: Workspace, cls: str | None = None, state: str | None = None) -> list[dict]:
    return entry_rows(ws, [e for e in ws.entries()
                           if not (cls and e.cls != cls)
                           and not (state and state not in (e.state, display_state(e),
                                                            e.suspicion))])


def show_entry(ws: Workspace, ref: str) -> dict:
    e = ws.resolve(ref)
    ev = evidence_for(ws, e)
    d = entry_row(ws, e, ev)
    d["history"] = [a.to_dict() for a in e.timeline()]  # in the order things happened
    d["evidence_summary"] = ev.summary
    d["notes"] = _notes(ws, e)
    d["bisects"] = _bisects_of(ws, e)
    if e.kind == "patch":
        d["patch_text"] = (ws.root / e.patch).read_text(encoding="utf-8", errors="replace")
    return d


def _notes(ws: Workspace, e: Entry) -> list[dict]:
    """The entry's notes and links (``ledger evidence note``), each with its one line."""
    from ledger.evidence.notes import load_notes
    from ledger.evidence.notes import note_line

    return [{**n, "line": note_line(n)} for n in load_notes(ws.root, e.id)]


def _bisects_of(ws: Workspace, e: Entry) -> list[dict]:
    """The bisects whose selection held ``e``: when, what they concluded, its part."""
    from ledger.render.bisect import role_of
    from ledger.render.bisect import summary
    from ledger.store.bisect_state import record_rel
    from ledger.store.bisect_state import records_for

    return [{"id": r.get("id"), "started": r.get("started"), "status": r.get("status"),
             "summary": summary(r), "role": role_of(r, e.id), "checks": len(r.get("steps") or ()),
             "record": record_rel(str(r.get("id")))} for r in records_for(ws, e.id)]


@dataclass
class Status:
    entries: list[dict] = field(default_factory=list)
    drift: list[Drift] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # the engine repo's defaults that differ from its release (ledger.commands.repo_defaults)
    engine_defaults: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "entries": self.entries,
            "drift": [d.to_dict() for d in self.drift],
            "engine_defaults": [d.to_dict() for d in self.engine_defaults],
            "suspects": [r["id"] for r in self.entries if r["suspicion"] == "suspected"],
            "errors": self.errors,
            "clean": self.clean,
        }

    @property
    def not_live(self) -> list[dict]:
        """Entries whose recorded state is not what the files (or engine) hold."""
        return [r for r in self.entries if not r.get("ok")]

    @property
    def clean(self) -> bool:
        """Every file as the ledger expects it (``status --exit-code`` exits 0)."""
        return not self.drift and not self.errors and not self.not_live

    def verdict(self) -> str:
        """One line for CI: which files differ from the ledger, or that none does."""
        if self.clean:
            return "every target file is as the ledger expects"
        files = sorted({d.path for d in self.drift})
        parts = [f"drift in {', '.join(files)}"] if files else []
        if self.errors:
            parts.append(f"{len(self.errors)} unreadable")
        others = [r["id"] for r in self.not_live if r.get("live_state") != "drift"]
        if others:
            parts.append("not live as recorded: " + ", ".join(others))
        return ("the workspace differs from what the ledger expects (" + "; ".join(parts)
                + "): record the change with `ledger record ... --adopt`, or put the file "
                  "back (`ledger diff --files` shows it)")


def _readable_targets(ws: Workspace, names: Sequence[str]):
    files, errors = {}, []
    for name in sorted(set(names)):
        try:
            files.update(read_targets(ws, [name]))
        except LedgerError as e:
            errors.append(str(e))
    return files, errors


def status(ws: Workspace) -> Status:
    """Each entry's recorded state against what is live; drift; suspects."""
    entries = ws.entries()
    expected = layers.expected_knobs(entries)
    files, errors = _readable_targets(ws, [t for t, _ in expected])
    live_of = {key: files[key[0]].live(key[1]) for key in expected if key[0] in files}
    ambiguous = {key: found for key in live_of
                 if (found := files[key[0]].ambiguity(key[1])) is not None}
    paths = {name: str(tf.path) for name, tf in files.items()}
    checked = {k: v for k, v in live_of.items() if k not in ambiguous}
    st = Status(drift=layers.find_drift(entries, checked, paths, expected), errors=errors)
    patch_live = _patch_liveness(ws, entries, st.errors)
    defaults = knob_defaults(ws, entries, {n: tf.raw for n, tf in files.items()})
    for e in entries:
        default = defaults.get((e.target, e.knob)) if defaults else None
        row = _plain_knob_row(e, default, expected, live_of, ambiguous)
        st.entries.append(row if row is not None else
                          _status_row(e, default, expected, live_of, ambiguous, patch_live))
    st.engine_defaults, warnings = engine_defaults(ws, entries)
    st.errors += warnings
    return st


def _status_row(e: Entry, default, expected: dict, live_of: dict, ambiguous: dict,
                patch_live: dict) -> dict:
    """An entry's row of ``status``, whatever the entry (:func:`_plain_knob_row` makes the
    same row for the common knob entry in one step)."""
    row = {"id": e.id, "slug": e.slug, "class": e.cls, "kind": e.kind, "title": e.title,
           "state": e.state, "display_state": display_state(e), "suspicion": e.suspicion,
           "change": change_text(e, default), "default": default}
    if e.kind != "patch":  # a knob, or an upgrade (the layer of its target's release)
        _knob_row(row, e, expected, live_of, ambiguous)
    else:
        live = patch_live.get(e.id)
        row.update(live=live, ok=live is not None and live == e.applied)
    return row


def _plain_knob_row(e: Entry, default, expected: dict, live_of: dict, ambiguous: dict
                    ) -> dict | None:
    """The row of a knob entry of one target without selected places, whose knob has one
    value in its file: what the general path (``status``, then :func:`_knob_row`) makes,
    in one step, its keys in the order JSON output sorts them into (10,000 rows of a
    large ledger are mostly these).  None for any other entry."""
    if e.kind == "patch" or e.places or e.also:
        return None
    key = (e.target, e.knob)
    if key in ambiguous:
        return None
    want, live = expected[key], live_of.get(key, _UNREAD)
    state = "unreadable" if live is _UNREAD else "ok" if live == want else "drift"
    return {"at": e.at, "change": change_text(e, default), "class": e.cls, "default": default,
            "display_state": display_state(e), "expected": want, "id": e.id,
            "kind": e.kind, "knob": e.knob, "lines": [],
            "live": None if live is _UNREAD else live, "live_state": state,
            "ok": state == "ok", "slug": e.slug, "state": e.state, "suspicion": e.suspicion,
            "target": e.target, "title": e.title, "unreadable": state == "unreadable"}


_UNREAD = object()  # a knob whose target could not be read


def _knob_row(row: dict, e: Entry, expected: dict, live_of: dict, ambiguous: dict) -> None:
    """Fill in ``row``'s ``live_state``: ok, drift, unreadable, or — for a knob with no
    single value in the file — conditional / repeated, with the lines of its places
    (never ok).  ``ambiguous``: the summaries of the keys with no single value."""
    keys = layers.entry_keys(e) if e.places or e.also else ((e.target, e.knob),)
    first = keys[0]
    row.update(target=e.target, knob=e.knob, at=e.at,
               lines=list(e.place_lines) if e.places else [],
               expected=expected[first], live=live_of.get(first))
    if first not in live_of if len(keys) == 1 else any(k not in live_of for k in keys):
        state = "unreadable"
    elif not e.places and first in ambiguous:
        found = ambiguous[first]
        state, row["lines"] = found.state, list(found.lines)
        row["places"] = [p.to_dict() for p in found.places]
    elif live_of[first] == expected[first] if len(keys) == 1 else all(
            live_of[k] == expected[k] for k in keys):
        state = "ok"
    else:
        state = "drift"
    if len(keys) > 1:  # --all: each place's own value
        row["expected"] = {k[1]: expected[k] for k in keys}
        row["live"] = {k[1]: live_of.get(k) for k in keys}
    row.update(live_state=state, unreadable=state == "unreadable", ok=state == "ok")


def _patch_liveness(ws: Workspace, entries: Sequence[Entry], errors: list[str]) -> dict:
    patches = [e for e in entries if e.kind == "patch"]
    if not patches:
        return {}
    from ledger.store.patch_entries import patch_liveness

    try:
        return patch_liveness(ws, patches)
    except LedgerError as e:
        errors.append(str(e))
        return {}


@dataclass
class OffTable:
    """What `ledger diff` reports: reverted entries, drift, and the files a restore writes."""

    reverted: dict[str, list[dict]] = field(default_factory=dict)  # class -> rows
    drift: list[Drift] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    patch_diff: str = ""
    errors: list[str] = field(default_factory=list)
    kept: str = ""  # what stays applied, by class: "2 bugfix patches, 1 bugfix knob"
    engine_defaults: list = field(default_factory=list)  # as Status.engine_defaults

    @property
    def differs(self) -> bool:
        return bool(any(self.reverted.values()) or self.drift or self.files or self.patch_diff)

    def to_dict(self) -> dict:
        return {
            "off_the_table": self.reverted,
            "drift": [d.to_dict() for d in self.drift],
            "files": self.files,
            "patch_diff": self.patch_diff,
            "errors": self.errors,
            "differs": self.differs,
            "kept": self.kept,
            "engine_defaults": [d.to_dict() for d in self.engine_defaults],
        }


def off_the_table(ws: Workspace, with_files: bool = False) -> OffTable:
    """The live configuration against the fully-applied ledger."""
    entries = ws.entries()
    out = OffTable(reverted={"perf": [], "bugfix": []}, kept=kept_by_class(entries))
    off = [e for e in entries if not e.applied]
    present = evidence_ids(ws)  # notes live beside the evidence: no directory, no notes
    for e, row in zip(off, entry_rows(ws, off, present)):
        action = revert_action(e)
        row["reverted_why"] = revert_reason(e)
        row["health_failure"] = health_failure(e)
        row["reverted_at"] = action.happened if action else ""
        row["suspected_at"] = happened_at(e, "suspect")
        row["cleared_at"] = happened_at(e, "clear")
        row["notes"] = _notes(ws, e) if e.id in present else []
        out.reverted[e.cls].append(row)
    expected = layers.expected_knobs(entries)
    files, out.errors = _readable_targets(ws, [t for t, _ in expected])
    live_of = {k: files[k[0]].live(k[1]) for k in expected if k[0] in files}
    checked = {k: v for k, v in live_of.items() if files[k[0]].ambiguity(k[1]) is None}
    out.drift = layers.find_drift(entries, checked, {n: str(f.path) for n, f in files.items()},
                                   expected)
    out.engine_defaults, warnings = engine_defaults(ws, entries)
    out.errors += warnings
    if with_files:
        full = layers.full_knobs(entries)
        edits = {k: (live_of.get(k), v) for k, v in full.items() if k[0] in files}
        sources = layers.knob_sources(entries, full=True)
        lines = layers.knob_lines(entries, full=True)
        for path, (old, new) in new_target_bytes(files, edits, entries, sources, lines).items():
            out.files[str(path)] = unified(str(path), old, new)
        if any(e.kind == "patch" and not e.applied for e in entries):
            from ledger.store.patch_entries import full_restore_diff

            try:
                out.patch_diff = full_restore_diff(ws, entries)
            except LedgerError as err:
                out.errors.append(str(err))
    return out


def history_diff(ws: Workspace, rev1: str, rev2: str | None) -> list[dict]:
    """What changed in the ledger between two commits of the workspace (rev2: HEAD)."""
    a = wsgit.verify_rev(ws.root, rev1)
    b = wsgit.verify_rev(ws.root, rev2 or "HEAD")
    old = {e.id: e for e in _entries_at(ws, a)}
    new = {e.id: e for e in _entries_at(ws, b)}
    changes = []
    if wsgit.show_file(ws.root, a, CONFIG_NAME) != wsgit.show_file(ws.root, b, CONFIG_NAME):
        changes.append({"what": "config", "path": CONFIG_NAME, "change": "targets or settings changed"})
    for entry_id in sorted(old.keys() | new.keys(), key=lambda i: (new.get(i) or old[i]).seq):
        before, after = old.get(entry_id), new.get(entry_id)
        if before != after:
            changes.append(_describe_entry_change(before, after))
    return changes


def _entries_at(ws: Workspace, rev: str) -> list[Entry]:
    text = wsgit.show_file(ws.root, rev, ENTRIES_NAME)
    return parse_entries(text, f"{ENTRIES_NAME} at {rev[:10]}") if text else []


def _describe_entry_change(old: Entry | None, new: Entry | None) -> dict:
    e = new if new is not None else old
    row = {"what": "entry", "id": e.id, "class": e.cls, "title": e.title}
    if old is None:
        row["change"] = f"recorded ({change_text(e)}, {display_state(e)})"
    elif new is None:
        row["change"] = "removed"
    else:
        added = new.history[len(old.history):]
        parts = [f"{a.action}" + (f": {a.why}" if a.why else "") for a in added]
        if display_state(old) != display_state(new):
            parts.insert(0, f"{display_state(old)} -> {display_state(new)}")
        row["change"] = "; ".join(parts) or "edited"
    return row


def workspace_log(ws: Workspace, limit: int | None = None) -> list[dict]:
    """The workspace's commits, newest first by when things happened: a commit whose
    message carries ``When: TIME`` (a change recorded with ``--when``, an adopted commit's
    date) has ``when`` and sorts by it; its ``time`` stays the record time."""
    from ledger.core.when import dated_log

    return dated_log(wsgit.log(ws.root, limit))


def log_lines(ws: Workspace, limit: int | None = None) -> list[dict]:
    """`ledger log` for a person: the commits (:func:`workspace_log`) and, among them in
    time order, each dated action no commit line shows (ledger.core.when.dated_events):
    a hand revert's date, a ``clear --when``.  Each item is a commit (``sha``…) or an
    event (``event: True``).  With ``limit``, events older than the oldest commit shown
    are left out with it."""
    from ledger.core.when import dated_events
    from ledger.core.when import parse_time
    from ledger.core.when import stamp

    commits = workspace_log(ws, limit)

    def key(c: dict) -> str:
        moment = parse_time(c.get("time") or "")
        return c.get("when") or (stamp(moment) if moment else str(c.get("time") or ""))

    events = [{**ev, "event": True} for ev in dated_events(commits, ws.entries())]
    if limit and commits:
        oldest = min(key(c) for c in commits)
        events = [ev for ev in events if ev["when"] >= oldest]
    items = [(key(c), 0, -i, c) for i, c in enumerate(commits)]
    items += [(ev["when"], 1, -i, ev) for i, ev in enumerate(events)]
    return [item for *_, item in sorted(items, key=lambda t: t[:3], reverse=True)]
