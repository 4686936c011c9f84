"""Issue 27's "Done when": from the on-disk state an operator has after the incident to
`ledger diff` showing the CTAS knob off the table with its evidence and real dates, then
`restore --perf-only` — with no re-enactment (nothing written to a target until the
restore)."""

from __future__ import annotations

import pytest

from tests.cli.after_the_incident import CTAS
from tests.cli.after_the_incident import NOW
from tests.cli.after_the_incident import TUNED
from tests.cli.after_the_incident import TUNED_LINE
from tests.cli.after_the_incident import git
from tests.cli.after_the_incident import make_story
from tests.cli.test_story import live_value


@pytest.fixture
def st(tmp_path):
    return make_story(tmp_path)


def test_the_history_brought_in_without_re_enactment(st, ledger):
    ws = st.root / "ws"
    assert ledger("init", ws, "--engine-repo", st.engine, "--root",
                  f"ops={st.root}").exit_code == 0
    a = lambda *args: ledger("-C", ws, *args)  # noqa: E731
    assert a("target", "add", "decode", st.script, "--format", "bash").exit_code == 0
    engine_head = git(st.engine, "rev-parse", "HEAD")

    r = a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
          "--title", "TARGET_CTAS 512 for decode", "--why", "wave quantisation dip at c64",
          "--already-reverted", "--when", "2026-12-01T14:48", "--reverted-when",
          "2026-12-02T14:14", "--suspected", "--reverted-why",
          "prime suspect of the multi-round harness hang", "--json")
    assert r.exit_code == 0, r.stderr
    ctas = r.json()["id"]
    for sha in st.commits:
        r = a("record", "patch", "--commit", sha, "--class", "bugfix", "--json")
        assert r.exit_code == 0, r.stderr
    pins = a("list", "--json").json()[1]
    assert pins["title"] == "pd: release inflight pins when a KV transfer fails"
    r = a("record", "knob", "decode", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30", "--adopt",
          "--before-unset", "--class", "bugfix", "--title", "inflight watchdog timeout",
          "--when", "2026-12-02T15:05")
    assert r.exit_code == 0, r.stderr
    for path, side in ((st.bench_a, "A"), (st.bench_b, "B")):
        r = a("evidence", "add", ctas, path, "--side", side, "--when", "2026-12-01T14:40")
        assert r.exit_code == 0, r.stderr
    r = a("evidence", "note", ctas, st.note, "--side", "B", "--when", "2026-12-01T14:48")
    assert r.exit_code == 0, r.stderr
    assert st.script.read_text() == NOW  # nothing written so far
    assert git(st.engine, "rev-parse", "HEAD") == engine_head

    r = a("clear", ctas, "--why", "a client proxy dropped multi-round connections",
          "--when", "2026-12-04T09:30")
    assert r.exit_code == 0, r.stderr
    r = a("diff")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "off the table: 1 reverted entry" in out
    assert "TARGET_CTAS 512 for decode" in out and "unset (default 256) -> 512" in out
    assert "prime suspect of the multi-round harness hang  (2026-12-02T14:14:00Z)" in out
    assert "cleared   a client proxy dropped" in out
    assert "gain +12.8% output_throughput @c64" in out
    assert "note      side B: DSV4_DECODE_PERF_PLAN.md (DSV4 decode perf plan)" in out
    assert "inflight" not in out  # the bugfixes stay, not off the table

    # the history reads in the order things happened, with their real dates
    show = a("show", pins["id"])
    assert f"commit    {st.commits[0]}" in show.stdout
    assert "2026-12-02T10:12:00Z  adopt" in show.stdout
    log = a("log", "--json").json()
    dated = [(c["when"], c["subject"].split(":")[0]) for c in log if c["when"]]
    assert [w for w, _ in dated] == sorted((w for w, _ in dated), reverse=True)
    assert dated[-1][0] == "2026-12-01T14:40:00Z", dated  # the benches, then the record of 14:48
    render = st.root / "docs"
    assert a("render", "--out", render).exit_code == 0
    changelog = (render / "CHANGELOG.md").read_text()
    perf_at = changelog.index("### [TARGET_CTAS 512")
    assert changelog.index("### [inflight watchdog timeout") < changelog.index(
        "### [pd: inflight watchdog gives up") < changelog.index("### [pd: release inflight")
    assert "made 2026-12-01 14:48 UTC" in changelog[perf_at:]
    entry_md = (render / "entries" / f"{ctas}.md").read_text()
    # the off-the-table card dates its reason (the hand revert of 14:14); the history
    # below lists the record, the revert and the clear in the order they happened
    assert "hang (2026-12-02 14:14 UTC)" in entry_md[:entry_md.index("## Change")]
    history = entry_md[entry_md.index("## History"):]
    assert history.index("2026-12-01 14:48 UTC") < history.index("2026-12-02 14:14 UTC") \
        < history.index("2026-12-04 09:30 UTC")

    r = a("restore", "--perf-only")
    assert r.exit_code == 0, r.stderr
    assert f"restored {ctas}" in r.stdout and "gain +12.8% output_throughput @c64" in r.stdout
    assert live_value(st.script, CTAS) == "512"
    assert live_value(st.script, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT") == "30"
    assert git(st.engine, "rev-parse", "HEAD") == engine_head  # the bugfix commits stay
    assert a("diff", "--exit-code").exit_code == 0


def test_evidence_from_before_later_changes_says_so(st, ledger):
    ws = st.root / "ws"
    assert ledger("init", ws, "--engine-repo", st.engine, "--root",
                  f"ops={st.root}").exit_code == 0
    a = lambda *args: ledger("-C", ws, *args)  # noqa: E731
    assert a("target", "add", "decode", st.script, "--format", "bash").exit_code == 0
    ctas = a("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title", "ctas",
             "--already-reverted", "--json").json()["id"]
    base = git(st.engine, "rev-parse", "HEAD~2")
    old_knobs = ("--knobs", "SGLANG_DISAGGREGATION_QUEUE_SIZE=4",
                 "--knobs", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300")
    for path, side in ((st.bench_a, "A"), (st.bench_b, "B")):
        r = a("evidence", "add", ctas, path, "--side", side, "--engine-commit", "HEAD~2",
              *old_knobs, "--when", "2026-12-01T14:40")
        assert r.exit_code == 0, r.stderr
    shown = a("evidence", "show", ctas, "--json").json()
    assert shown["stale"] is True  # two engine commits and a knob came after the bench
    summary = shown["runs"][-1] if "runs" in shown else shown
    assert base in str(summary) and "2026-12-01T14:40:00Z" in str(summary)
    r = a("evidence", "add", ctas, st.bench_a, "--side", "A", "--engine-commit", "nope")
    assert r.exit_code == 1 and "no such commit" in r.stderr
    r = a("evidence", "add", ctas, st.bench_a, "--side", "A", "--knobs", f"{CTAS}=1")
    assert r.exit_code == 1 and "the entry's own knob" in r.stderr


def test_a_patch_file_needs_a_title_an_adopted_commit_does_not(st, ledger, tmp_path):
    ws = st.root / "ws"
    assert ledger("init", ws, "--engine-repo", st.engine).exit_code == 0
    a = lambda *args: ledger("-C", ws, *args)  # noqa: E731
    patch = tmp_path / "fix.patch"
    patch.write_text(git(st.engine, "format-patch", "-1", "--stdout", st.commits[0]))
    r = a("record", "patch", str(patch), "--class", "bugfix")
    assert r.exit_code == 2 and "--title is needed for a patch file" in r.stderr  # usage
    r = a("record", "patch", "--commit", st.commits[1], "--class", "bugfix",
          "--title", "watchdog", "--when", "2026-12-02T12:00")
    assert r.exit_code == 0, r.stderr
    assert f"commit {st.commits[1]}, 2026-12-02T12:00:00Z" in r.stdout  # --when wins
    assert a("list", "--json").json()[0]["title"] == "watchdog"


def test_a_restored_knob_gets_its_line_back_with_its_inline_comment(st, ledger):
    """Adopted from the file as tuned (`export K=512  # +12.8% ...`), reverted, restored:
    the line comes back as it was, comment included, not a bare `export K=512`."""
    ws = st.root / "ws"
    st.script.write_text(TUNED)
    assert ledger("init", ws).exit_code == 0
    a = lambda *args: ledger("-C", ws, *args)  # noqa: E731
    assert a("target", "add", "decode", st.script, "--format", "bash").exit_code == 0
    r = a("record", "knob", "decode", f"{CTAS}=512", "--adopt", "--before-unset",
          "--class", "perf", "--title", "ctas")
    assert r.exit_code == 0, r.stderr
    assert a("revert", "--perf-only", "--why", "incident").exit_code == 0
    assert TUNED_LINE not in st.script.read_text() and CTAS not in st.script.read_text()
    r = a("restore", "--perf-only")
    assert r.exit_code == 0, r.stderr
    assert st.script.read_text() == TUNED


def test_the_history_adopted_from_the_backups_with_no_re_enactment(st, ledger, tmp_path):
    """The same story brought in by `ledger adopt` from the .bak files themselves: the
    plan proposes the tuning reverted by the sed and the watchdog timeout, each dated
    from the copies; the operator names the suspect in the plan and applies it."""
    from ruamel.yaml import YAML

    ws = st.root / "ws"
    assert ledger("init", ws, "--engine-repo", st.engine, "--root",
                  f"ops={st.root}").exit_code == 0
    a = lambda *args: ledger("-C", ws, *args)  # noqa: E731
    assert a("target", "add", "decode", st.script, "--format", "bash").exit_code == 0
    plan_path = tmp_path / "adopt-decode.yaml"
    r = a("adopt", "decode", st.script.parent, "--out", plan_path)
    assert r.exit_code == 0, r.stderr
    plan = YAML(typ="safe").load(plan_path.read_text())
    ctas, waiting = plan["proposals"]  # one per backup pair, one change each
    change = ctas["changes"][0]
    assert (change["knob"], change["after"], change["reverted"]["when"]) == \
        (CTAS, "512", "2026-12-02T14:14:00Z")
    ctas.update(title="TARGET_CTAS 512 for decode", when="2026-12-01T14:48")
    change["reverted"].update(suspected=True, why="prime suspect of the multi-round harness hang")
    waiting.update(title="inflight watchdog timeout")
    YAML().dump(plan, plan_path)
    assert a("adopt", "--apply", plan_path).exit_code == 0
    eid = next(e["id"] for e in a("list", "--json").json() if e["knob"] == CTAS)
    for sha in st.commits:
        assert a("record", "patch", "--commit", sha, "--class", "bugfix").exit_code == 0
    for path, side in ((st.bench_a, "A"), (st.bench_b, "B")):
        assert a("evidence", "add", eid, path, "--side", side, "--when",
                 "2026-12-01T14:40").exit_code == 0
    assert a("evidence", "note", eid, st.note, "--side", "B").exit_code == 0
    assert a("clear", eid, "--why", "a client proxy", "--when", "2026-12-04T09:30").exit_code == 0
    assert st.script.read_text() == NOW  # nothing written so far

    out = a("diff").stdout
    assert "off the table: 1 reverted entry" in out and "TARGET_CTAS 512 for decode" in out
    assert "prime suspect of the multi-round harness hang  (2026-12-02T14:14:00Z)" in out
    assert "gain +12.8% output_throughput @c64" in out
    assert "note      side B: DSV4_DECODE_PERF_PLAN.md (DSV4 decode perf plan)" in out
    show = a("show", eid).stdout
    assert "origin    serve_decode.sh.bak.20261201-1402 -> serve_decode.sh.bak.20261202-1414" \
        in show and "2026-12-01T14:48:00Z  adopt" in show
    r = a("restore", "--perf-only")
    assert r.exit_code == 0 and "gain +12.8% output_throughput @c64" in r.stdout
    assert st.script.read_text() == TUNED.replace(
        "export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n" + TUNED_LINE,
        "export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300\n" + TUNED_LINE
        + "export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30\n")
    assert a("diff", "--exit-code").exit_code == 0
