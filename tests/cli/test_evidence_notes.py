"""`ledger evidence note ID FILE_OR_URL [--side A|B]` (issue 27 item 5): the markdown A/B
note of a tuning session, or a link to it, kept with the entry's evidence and shown by
show, diff and the rendered docs, escaped there, and never judged as numbers."""

from __future__ import annotations

import subprocess

from tests.cli.after_the_incident import NOTE

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"
HOSTILE = NOTE + "\n<script>alert(1)</script> ``` still the note\n"


def _commits(root) -> int:
    return int(subprocess.run(["git", "-C", str(root), "rev-list", "--count", "HEAD"],
                              check=True, capture_output=True, text=True).stdout)


def _outside_details(html: str) -> str:
    """The page's text that a reader sees without opening any <details>."""
    from html.parser import HTMLParser

    class Visible(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.depth, self.parts = 0, []

        def handle_starttag(self, tag, attrs):
            self.depth += tag == "details"

        def handle_endtag(self, tag):
            self.depth -= tag == "details"

        def handle_data(self, data):
            if not self.depth:
                self.parts.append(data)

    parser = Visible()
    parser.feed(html)
    return " ".join(parser.parts)


def _reverted_ctas(story, ledger) -> str:
    r = ledger(*story.args("record", "knob", "decode", f"{CTAS}=512", "--class", "perf",
                           "--title", "ctas 512", "--already-reverted", "--json"))
    assert r.exit_code == 0, r.stderr
    return r.json()["id"]


def test_a_note_and_a_link_are_shown_by_show_diff_and_the_docs(story, ledger, tmp_path):
    a = story.args
    ctas = _reverted_ctas(story, ledger)
    note = tmp_path / "DSV4_DECODE_PERF_PLAN.md"
    note.write_text(HOSTILE)
    r = ledger(*a("evidence", "note", ctas, note, "--side", "B", "--when", "2026-12-01T14:50"))
    assert r.exit_code == 0, r.stderr
    assert "noted on" in r.stdout and "DSV4 decode perf plan" in r.stdout
    link = "https://grafana.example.com/d/decode?from=1764600000&to=1764686400"
    assert ledger(*a("evidence", "note", ctas, link)).exit_code == 0
    note.write_text("changed after attaching\n")  # the ledger keeps what it said

    show = ledger(*a("show", ctas)).stdout
    assert "note      side B: DSV4_DECODE_PERF_PLAN.md (DSV4 decode perf plan)  " \
           "(2026-12-01T14:50:00Z) — +12.8% @c64, +5.7% @c96" in show
    assert f"note      {link}" in show
    # A note is no bench result: its numbers are said as the note's, and no verdict drawn.
    assert "evidence  note: +12.8% @c64, +5.7% @c96 (not measured by the ledger)" in show
    data = ledger(*a("show", ctas, "--json")).json()
    assert data["notes"][0]["text"] == HOSTILE and data["verdict"] is None
    shown = ledger(*a("evidence", "show", ctas)).stdout
    assert "note: +12.8% @c64, +5.7% @c96 (not measured by the ledger)" in shown
    assert "note  side B: DSV4_DECODE_PERF_PLAN.md" in shown
    diff = ledger(*a("diff")).stdout
    assert "      note      side B: DSV4_DECODE_PERF_PLAN.md" in diff and link in diff

    docs = tmp_path / "docs"
    assert ledger(*a("render", "--out", docs)).exit_code == 0
    entry_md = (docs / "entries" / f"{ctas}.md").read_text()
    assert "## Notes" in entry_md and f"<{link}>" in entry_md
    fenced = entry_md[entry_md.index("````markdown\n"):]  # longer than the ``` inside
    assert fenced.startswith("````markdown\n" + HOSTILE.rstrip("\n") + "\n````\n")
    html = (docs / "index.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "| 64 | 1000 tok/s | 1128 tok/s | +12.8% |" in html
    # The note's numbers are in the open beside the measured evidence, not folded away in
    # the note's <details> (issue 52: notes carry their numbers).
    shown = _outside_details(html)
    assert "+12.8% @c64, +5.7% @c96 (the note's A/B table, not measured by the ledger)" \
        in " ".join(shown.split())
    assert "64 1000 1128 +12.8%" in " ".join(shown.split())
    assert f'<a href="{link.replace("&", "&amp;")}"' in html


def test_a_bad_note_is_refused_and_nothing_is_kept(story, ledger, tmp_path):
    a = story.args
    ctas = _reverted_ctas(story, ledger)
    before = _commits(story.root)
    binary = tmp_path / "bench.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    empty = tmp_path / "empty.md"
    empty.write_text("\n  \n")
    cases = [
        ("javascript:alert(1)//x://y", "a link must be an http:// or https:// URL"),
        ("ftp://files.example.com/plan.md", "a link must be an http:// or https:// URL"),
        ('https://example.com/"onmouseover=x', "a link must be"),
        (str(tmp_path / "missing.md"), "no such note file"),
        (str(binary), "a note must be UTF-8 text"),
        (str(empty), "the note is empty"),
    ]
    for source, message in cases:
        r = ledger(*a("evidence", "note", ctas, source))
        assert r.exit_code == 1, source
        assert r.stderr.startswith("error: ") and message in r.stderr, (source, r.stderr)
    r = ledger(*a("evidence", "note", "no-such-entry", "https://example.com/"))
    assert r.exit_code == 1 and "no-such-entry" in r.stderr
    good = tmp_path / "ok.md"
    good.write_text("plain first line\nmore\n")
    r = ledger(*a("evidence", "note", ctas, good, "--dry-run"))
    assert r.exit_code == 0 and "would note" in r.stdout and "(plain first line)" in r.stdout
    assert _commits(story.root) == before
    assert not (story.root / "evidence" / ctas / "notes.yaml").exists()
    assert ledger(*a("show", ctas, "--json")).json()["notes"] == []


def test_a_note_is_one_commit_and_notes_keep_their_order(story, ledger, tmp_path):
    a = story.args
    ctas = _reverted_ctas(story, ledger)
    before = _commits(story.root)
    for n in (1, 2, 3):
        assert ledger(*a("evidence", "note", ctas, f"https://example.com/run/{n}")).exit_code == 0
    assert _commits(story.root) == before + 3
    lines = [n["link"] for n in ledger(*a("show", ctas, "--json")).json()["notes"]]
    assert lines == [f"https://example.com/run/{n}" for n in (1, 2, 3)]
    assert ledger(*a("doctor")).exit_code == 0  # notes.yaml is no broken evidence run


def test_an_evidence_directory_that_cannot_be_listed_still_shows_each_note(story, ledger,
                                                                            tmp_path, monkeypatch):
    """`diff` lists evidence/ once; where that listing fails (a directory the user may
    enter but not read: root reads any, so the failure is injected), each entry is asked
    alone and its note still shows, rather than every entry reading as note-less."""
    import os

    a = story.args
    ctas = _reverted_ctas(story, ledger)
    link = "https://grafana.example.com/d/decode?from=1764600000&to=1764686400"
    assert ledger(*a("evidence", "note", ctas, link)).exit_code == 0
    listed = os.scandir

    def unlistable(path=".", *rest):
        if os.path.basename(str(path)) == "evidence":
            raise PermissionError(13, "Permission denied", str(path))
        return listed(path, *rest)

    monkeypatch.setattr(os, "scandir", unlistable)
    r = ledger(*a("diff", "--json"))
    assert r.exit_code in (0, 3), r.stderr
    row = next(row for row in r.json()["off_the_table"]["perf"] if row["id"] == ctas)
    assert [n.get("link") for n in row["notes"]] == [link]
