"""The first hour of a new user (issue 53): dates that must not go missing, what `diff`
says stays applied, and the small dead ends (doctor on the adopt plan, did-you-mean,
`amend --when`, the README's `evidence note --when`)."""

from __future__ import annotations

import re
from pathlib import Path

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"
QUEUE = "SGLANG_DISAGGREGATION_QUEUE_SIZE"
REPO = Path(__file__).resolve().parents[2]


def _hand_revert_story(story, ledger):
    """A tuning reverted by hand before the ledger knew of it, a bugfix kept, and a suspect
    cleared with its real date."""
    a = story.args
    for args in (
        ("record", "knob", "decode", f"{CTAS}=512", "--class", "perf", "--title",
         "CTAS 512 for decode", "--why", "+12.8% decode tok/s @c64", "--when",
         "2026-12-01T10:00", "--already-reverted", "--reverted-when", "2026-12-02T14:14"),
        ("record", "knob", "decode", "SGLANG_ENABLE_JIT_DEEPGEMM=1", "--class", "bugfix",
         "--title", "jit deepgemm", "--no-validate"),
        ("record", "knob", "decode", f"{QUEUE}=8", "--class", "perf", "--title", "queue 8"),
        ("suspect", "queue-8", "--why", "harness hangs", "--when", "2026-12-02T15:00"),
        ("clear", "queue-8", "--why", "the proxy was it", "--when", "2026-12-03T09:30"),
    ):
        r = ledger(*a(*args))
        assert r.exit_code == 0, (args, r.stderr)


def test_a_hand_revert_and_every_when_are_events_in_log(story, ledger):
    _hand_revert_story(story, ledger)
    out = ledger(*story.args("log")).stdout
    revert = [line for line in out.splitlines() if "2026-12-02T14:14:00Z" in line]
    assert revert and "revert" in revert[0] and "reverted by hand" in revert[0], out
    assert any("2026-12-03T09:30:00Z" in line and "clear" in line for line in out.splitlines())
    assert any("2026-12-02T15:00:00Z" in line and "suspect" in line for line in out.splitlines())
    # in time order, newest first: the clear, the suspect, the hand revert, the record
    order = [out.index(t) for t in ("2026-12-03T09:30", "2026-12-02T15:00", "2026-12-02T14:14",
                                    "2026-12-01T10:00")]
    assert order == sorted(order), out


def test_diff_dates_the_clear_and_ends_with_what_stays_applied(story, ledger):
    _hand_revert_story(story, ledger)
    out = ledger(*story.args("diff")).stdout
    cleared = [line for line in out.splitlines() if line.strip().startswith("cleared")]
    assert cleared and "the proxy was it" in cleared[0] and "2026-12-03T09:30:00Z" in cleared[0]
    reverted = [line for line in out.splitlines() if "reverted by hand" in line]
    assert reverted and "2026-12-02T14:14:00Z" in reverted[0]
    assert out.rstrip().splitlines()[-1] == "kept: 1 bugfix knob", out


def test_kept_counts_patches_and_knobs_by_class():
    from ledger.core.action import Action
    from ledger.core.display import kept_by_class
    from ledger.core.model import Entry

    def entry(n, cls, kind, state="applied"):
        extra = ({"target": "decode", "knob": f"K{n}", "before": "1", "after": "2"}
                 if kind == "knob" else {"patch": f"patches/p{n}.patch", "sha256": "0" * 64})
        return Entry(id=f"e{n:07d}", seq=n, title=f"t{n}", slug=f"t{n}", cls=cls, kind=kind,
                     state=state, recorded="2026-12-01T00:00:00Z",
                     history=(Action(at="2026-12-01T00:00:00Z", action="record"),), **extra)

    entries = [entry(1, "bugfix", "patch"), entry(2, "bugfix", "patch"),
               entry(3, "bugfix", "knob"), entry(4, "perf", "knob", "reverted")]
    assert kept_by_class(entries) == "2 bugfix patches, 1 bugfix knob"
    assert kept_by_class(entries[3:]) == ""


def test_docs_cards_and_timeline_carry_the_dates(story, ledger, tmp_path):
    _hand_revert_story(story, ledger)
    r = ledger(*story.args("restore", "queue-8"))
    assert r.exit_code == 0, r.stderr
    r = ledger(*story.args("render", "--out", tmp_path / "docs"))
    assert r.exit_code == 0, r.stderr
    html = (tmp_path / "docs" / "index.html").read_text()
    off = html.split('id="off-table"')[1].split("</section>")[0]
    assert "reverted by hand" in off and "2026-12-02 14:14 UTC" in off
    cleared = html.split('id="cleared"')[1].split("</section>")[0]
    assert "harness hangs" in cleared and "2026-12-02 15:00 UTC" in cleared
    assert "the proxy was it" in cleared and "2026-12-03 09:30 UTC" in cleared
    timeline = html.split('id="timeline"')[1]
    assert "2026-12-02 14:14:00 UTC" in timeline  # the hand revert is an event
    item = timeline.split("2026-12-02 14:14:00 UTC")[1].split("</li>")[0]
    assert "revert" in item and "CTAS 512 for decode" in item
    changelog = (tmp_path / "docs" / "CHANGELOG.md").read_text()
    assert "reverted by hand before the ledger knew of it (2026-12-02 14:14 UTC)" in changelog
    assert "harness hangs (2026-12-02 15:00 UTC)" in changelog


def test_render_title_counts_and_html_pages(story, ledger, tmp_path):
    _hand_revert_story(story, ledger)
    docs = tmp_path / "docs"
    r = ledger(*story.args("render", "--out", docs))
    assert r.exit_code == 0, r.stderr
    written = [p for p in docs.rglob("*") if p.is_file()]
    assert f"wrote {len(written)} files to {docs}" in r.stdout
    for name in ("index.html", "CHANGELOG.md", "CHANGELOG.html"):
        assert f"  {docs / name}" in r.stdout
    assert f"{docs / 'entries'}/: 3 .html, 3 .md" in r.stdout
    html = (docs / "index.html").read_text()
    # no workspace directory name as the title: what the workspace is for
    assert "<title>Change history — decode</title>" in html
    assert 'href="CHANGELOG.html"' in html and ".md\"" not in html
    for e in ledger(*story.args("list", "--json")).json():
        assert f'href="entries/{e["id"]}.html"' in html
        page = (docs / "entries" / f"{e['id']}.html").read_text()
        assert page.startswith("<!doctype html>") and 'href="../index.html"' in page
        assert "<h1>" in page and "[← changelog](" not in page  # markdown rendered
    changelog = (docs / "CHANGELOG.html").read_text()
    assert "entries/" in changelog and ".md\"" not in changelog
    # header counts are the sections' own
    lede = html.split('class="lede"')[1].split("</p>")[0]
    off = html.split('id="off-table"')[1].split("</section>")[0].count('<article class="card')
    held = html.split('id="held"')[1].split("</section>")[0].count("<li ")
    assert f"{off} off the table" in lede and f"{held} held back" in lede

    config = story.root / "ledger.yaml"
    config.write_text("title: Prod decode tuning\n" + config.read_text())
    assert ledger(*story.args("render", "--out", docs)).exit_code == 0
    assert "<title>Prod decode tuning</title>" in (docs / "index.html").read_text()


def test_html_pages_escape_what_the_markdown_escaped():
    from ledger.render.pages import md_to_html

    body = md_to_html("# t &lt;script&gt;\n\n[x](javascript:alert(1)) [e](entries/a.md) "
                      "`<b>`\n\na -&gt; b\n")
    assert "<script" not in body and "<b>" not in body and 'href="javascript' not in body
    assert 'href="entries/a.html"' in body and "a -&gt; b" in body


def test_doctor_leaves_the_adopt_plan_alone_and_removes_untracked_files_right(story, ledger):
    (story.root / "adopt-decode.yaml").write_text("proposals: []\n")  # adopt's default --out
    (story.root / "stray.txt").write_text("x\n")
    out = ledger(*story.args("doctor")).stdout
    assert "adopt-decode.yaml" not in out, out
    lines = out.splitlines()
    found = [i for i, line in enumerate(lines) if "stray.txt: uncommitted change (??)" in line]
    assert found, out
    fix = lines[found[0] + 1]
    # `git checkout` cannot remove an untracked file: add it, or remove it
    assert "checkout" not in fix and f"rm -r {story.root / 'stray.txt'}" in fix, fix
    assert f"add stray.txt" in fix


def test_a_mistyped_command_offers_the_closest_first(ledger):
    r = ledger("restor")
    assert r.exit_code == 2
    assert "Did you mean 'restore'?" in r.stderr and "record" not in r.stderr


def test_a_part_of_a_slug_typed_wrong_gets_a_did_you_mean(story, ledger):
    r = ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                           "--title", "Raise decode MMA target CTAs to 512"))
    assert r.exit_code == 0, r.stderr
    slug = "raise-decode-mma-target-ctas-to-512"
    assert ledger(*story.args("revert", slug, "--why", "x")).exit_code == 0
    # the part of the slug the operator remembers, two letters swapped
    r = ledger(*story.args("restore", "targte-ctas"))
    assert r.exit_code == 1
    assert f"did you mean {slug}" in r.stderr


def test_amend_fixes_a_date(story, ledger):
    _hand_revert_story(story, ledger)
    r = ledger(*story.args("amend", "ctas-512-for-decode", "--of", "revert", "--when",
                           "2026-12-02T14:20"))
    assert r.exit_code == 0, r.stderr
    shown = ledger(*story.args("show", "ctas-512-for-decode", "--json")).json()
    reverts = [a for a in shown["history"] if a["action"] == "revert"]
    assert reverts[-1]["when"] == "2026-12-02T14:20:00Z"
    amend = [a for a in shown["history"] if a["action"] == "amend"][-1]
    assert "2026-12-02T14:14:00Z" in amend["why"]  # the old date kept
    assert "2026-12-02T14:20:00Z" in ledger(*story.args("diff")).stdout
    r = ledger(*story.args("amend", "ctas-512-for-decode"))
    assert r.exit_code == 2 and "--when" in r.stderr


def test_readme_evidence_note_example_shows_when():
    readme = (REPO / "README.md").read_text()
    notes = [line for line in readme.splitlines() if re.match(r"ledger evidence note ", line)]
    assert notes and any("--when" in line for line in notes), notes
