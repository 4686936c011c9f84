"""render_docs on a workspace snapshot with every kind of entry and state (story.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from ledger.core.model import Entry
from ledger.errors import InvalidValue
from ledger.errors import LedgerError
from ledger.render.docs import render_docs
from ledger.render.model import KnobRow
from ledger.render.model import RenderModel
from tests.render.story import ab_summary
from tests.render.story import story_entries
from tests.render.story import story_model

REPO = Path(__file__).resolve().parents[2]
RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("docs")
    return out, render_docs(out, story_model())


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The body of a `## heading` section of a Markdown document."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_writes_changelog_entry_pages_charts_and_index(docs: tuple[Path, list[Path]]) -> None:
    out, paths = docs
    names = sorted(str(p.relative_to(out)) for p in paths)
    ids = [e.id for e in story_entries()]
    assert names == sorted(
        ["CHANGELOG.md", "CHANGELOG.html", "index.html"]
        + [f"entries/{i}.md" for i in ids]
        + [f"entries/{i}.html" for i in ids]  # each Markdown doc as a page too
        # Charts only where there is evidence.
        + [f"entries/{i}.svg" for i in ("e1-ctas", "e2-queue", "e6-splitk")]
    )
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    assert not list(out.rglob("*.tmp")), "atomic writes leave no temp files"


def test_changelog_puts_off_the_table_first_then_classes_newest_first(
    docs: tuple[Path, list[Path]],
) -> None:
    text = read(docs[0] / "CHANGELOG.md")
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == ["Off the table now", "Cleared and restored", "Held back", "perf",
                        "bugfix"]

    def ids(part: str) -> list[str]:
        rows = [line for line in part.splitlines() if line.startswith(("| perf", "| bugfix"))]
        return [re.search(r"\(entries/([^)]+)\.md\)", r).group(1) for r in rows], rows

    off, rows = ids(section(text, "Off the table now"))
    # Only what a restore would bring back, newest first: no suspect, no failed value.
    assert off == ["e6-splitk", "e1-ctas"]
    ctas = rows[1]
    assert "| cleared |" in ctas
    assert "hang appeared right after it shipped" in ctas  # why it was reverted
    assert "cleared: the hang was a client proxy" in ctas
    assert "gain +12.8% output\\_throughput" not in ctas  # intraword _ stays readable
    assert "gain +12.8% output_throughput @c64" in ctas
    assert "`ledger restore --perf-only`" in ctas
    held, rows = ids(section(text, "Held back"))
    assert held == ["e7-pages", "e3-pool"]
    pages, pool = rows
    assert "**failed its health check**" in pages and "the process exited" in pages
    assert "ledger restore" not in pages  # a value that crashed the server is no claw-back
    assert "no evidence" in pool and "under suspicion" in pool and "--include-suspects" in pool
    assert "No suspect has been cleared and restored." in section(text, "Cleared and restored")

    perf = section(text, "perf")
    order = re.findall(r"^### \[.*\]\(entries/([^)]+)\.md\)$", perf, flags=re.MULTILINE)
    assert order == ["e7-pages", "e6-splitk", "e3-pool", "e2-queue", "e1-ctas"]
    assert "**State:** applied" in perf and "— **stale**" in perf
    bugfix = section(text, "bugfix")
    assert re.findall(r"entries/([^)]+)\.md", bugfix) == ["e5-pin", "e4-timeout"]
    assert "turn a silent wedge into an error" in bugfix  # reason of the last action
    assert "(+20 −4)" in bugfix  # patch diffstat


def test_changelog_tables_survive_a_real_markdown_renderer(docs: tuple[Path, list[Path]]) -> None:
    for path in [docs[0] / "CHANGELOG.md", *sorted((docs[0] / "entries").glob("*.md"))]:
        rendered = RENDERER.render(read(path))
        assert "<script" not in rendered, path
        for table in re.findall(r"<table>.*?</table>", rendered, flags=re.DOTALL):
            widths = {
                len(re.findall(r"<t[hd][ >]", row))
                for row in re.findall(r"<tr>.*?</tr>", table, flags=re.DOTALL)
            }
            assert len(widths) == 1, f"{path.name}: a cell was split or lost: {table}"
    changelog = RENDERER.render(read(docs[0] / "CHANGELOG.md"))
    assert ESCAPED_SCRIPT in changelog
    # A title full of pipes is one link whose text is the title.
    assert '<a href="entries/e2-queue.md">Queue | size | 8</a>' in changelog


def test_entry_page_for_a_knob_with_evidence(docs: tuple[Path, list[Path]]) -> None:
    text = read(docs[0] / "entries" / "e1-ctas.md")
    assert text.startswith("# Raise decode MMA target CTAs to 512\n")
    assert "| `decode` | `SGLANG_SM120_MMA_TARGET_CTAS` | `256` | `512` |" in text
    history = section(text, "History")
    assert [r.split("|")[2].strip() for r in history.splitlines() if r.startswith("| 2026")] == [
        "record",
        "suspect",
        "clear",
    ]
    evidence = section(text, "Evidence")
    assert "![output_throughput against concurrency, A and B](e1-ctas.svg)" in evidence
    assert (
        "| 64 | 5/5 | 1,280.0 | 1,443.8 | +12.8% | +9.1 … +16.0% | 0.008 (adj. 0.024) | gain | identical |"
        in evidence
    )
    assert "Stale" not in evidence
    svg = read(docs[0] / "entries" / "e1-ctas.svg")
    assert svg.startswith("<?xml") and "<svg" in svg and "Raise decode MMA target CTAs" in svg


def test_entry_page_for_a_patch_and_for_stale_and_missing_evidence(
    docs: tuple[Path, list[Path]],
) -> None:
    pin = read(docs[0] / "entries" / "e5-pin.md")
    assert "| `engine/pd/prefill.py` | +14 | −3 |" in pin
    assert "| **2 files** | **+20** | **−4** |" in pin
    assert "No evidence yet: `ledger ab e5-pin`" in pin
    assert "Off the table" not in pin  # applied

    splitk = read(docs[0] / "entries" / "e6-splitk.md")
    assert "| `engine/attn\\|split.py` | +22 | −9 |" in splitk
    assert "Other metrics" in splitk
    # The metric's own run counts, not its concurrency level's.
    assert "| 64 | `mean_ttft_ms` | 4/5 | 41.5 | 40.9 | -1.4% |" in splitk
    assert f"rule out the decode path {ESCAPED_SCRIPT}" in splitk
    assert "<script" not in splitk

    queue = read(docs[0] / "entries" / "e2-queue.md")
    assert "**Stale:** recorded at engine commit `0ldc0mm1t`" in queue
    assert "| `4` | `` 8\\|`x` `` |" in queue  # a value with a pipe and backticks


def test_index_html_is_escaped_and_self_contained(docs: tuple[Path, list[Path]]) -> None:
    page = read(docs[0] / "index.html")
    assert "<script" not in page.lower()  # not the title's, and no script of our own
    assert page.count(ESCAPED_SCRIPT) >= 4  # page title, header, cards, timeline, chart
    assert "Queue | size | 8" in page
    # Nothing to fetch: no external stylesheet, image, font or script.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    assert not re.search(r"url\((?!#)", page)  # only in-page references (clip paths)
    # Charts are inlined once per entry with evidence, with distinct element ids.
    assert page.count("<svg") == 3 and "<?xml" not in page and "<!DOCTYPE svg" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "duplicate element ids across inlined charts"
    for text in (
        "Off the table",
        "Knob state",
        "Patch stack",
        "Evidence",
        "Timeline",
        "SGLANG_SM120_MMA_TARGET_CTAS",
        "off the table",
        "held back: under suspicion",
        "the hang was a client proxy",
        "stale",
    ):
        assert text in page, text


def test_matplotlib_svg_escapes_user_text(docs: tuple[Path, list[Path]]) -> None:
    svg = read(docs[0] / "entries" / "e6-splitk.svg")
    assert "<script" not in svg
    assert f"<title>Split-K decode: {ESCAPED_SCRIPT}</title>" in svg


def test_same_model_renders_byte_identical_docs(tmp_path: Path) -> None:
    first = render_docs(tmp_path / "a", story_model())
    again = render_docs(tmp_path / "a", story_model())
    assert first == again
    # Another process with another hash seed: nothing may depend on set or dict order,
    # on matplotlib's per-process state or on the clock.
    script = (
        "import sys; from pathlib import Path; from ledger.render.docs import render_docs; "
        "from tests.render.story import story_model; "
        "render_docs(Path(sys.argv[1]), story_model())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "b")],
        cwd=REPO,
        env=env,
        check=True,
        timeout=120,
    )
    for path in first:
        twin = tmp_path / "b" / path.relative_to(tmp_path / "a")
        assert path.read_bytes() == twin.read_bytes(), path.name
    assert sorted(p.name for p in (tmp_path / "b").rglob("*") if p.is_file()) == sorted(
        p.name for p in first
    )


def test_docs_change_when_the_ledger_changes(tmp_path: Path) -> None:
    """Determinism must not come from ignoring the input: a restore shows up."""
    model = story_model()
    entries = [replace(e, state="applied") if e.id == "e1-ctas" else e for e in model.entries]
    before = render_docs(tmp_path / "a", model)
    after = render_docs(tmp_path / "b", replace(model, entries=entries))
    changed = {p.name for p, q in zip(before, after) if p.read_bytes() != q.read_bytes()}
    assert changed == {"CHANGELOG.md", "CHANGELOG.html", "e1-ctas.md", "e1-ctas.html",
                       "index.html"}


def test_formats_select_outputs(tmp_path: Path) -> None:
    # No evidence: charts are covered elsewhere and cost most of a render.
    model = replace(story_model(), evidence={}, stale=set())
    html_only = render_docs(tmp_path / "h", model, formats=("html",))
    assert [p.name for p in html_only][:2] == ["index.html", "CHANGELOG.html"]
    assert all(p.suffix == ".html" for p in html_only)  # pages, no Markdown
    for link in re.findall(r'href="(entries/[^"#]+)"', read(html_only[0])):
        assert (tmp_path / "h" / link).is_file(), link  # every page linked is there
    md_only = render_docs(tmp_path / "m", model, formats=["md"])
    assert "index.html" not in {p.name for p in md_only}
    assert "[index.html](index.html)" not in read(tmp_path / "m" / "CHANGELOG.md")
    for bad in ((), ("pdf",), ("md", "HTML")):
        with pytest.raises(InvalidValue):
            render_docs(tmp_path / "x", model, formats=bad)


def test_model_rejects_ids_that_cannot_name_files_and_dangling_references() -> None:
    entries = story_entries()
    with pytest.raises(InvalidValue, match="invalid entry id"):  # checked in Entry itself
        replace(entries[0], id="../escape")
    with pytest.raises(InvalidValue, match="appears twice"):
        RenderModel(title="w", entries=[entries[0], entries[0]])
    with pytest.raises(InvalidValue, match="evidence names entries not in the ledger"):
        RenderModel(title="w", entries=entries[:1], evidence={"nope": {}})
    with pytest.raises(InvalidValue, match="title"):
        RenderModel(title="  ", entries=entries)


def test_partial_and_malformed_evidence_renders_placeholders(tmp_path: Path) -> None:
    entry: Entry = story_entries()[3]
    summary = ab_summary(entry.id, {8: 4.0, 32: 6.0})
    summary["by_concurrency"][0]["metrics"]["output_throughput"].update(
        median_b=None, p_value="n/a", ci_low_pct=float("nan")
    )
    summary["by_concurrency"].append("garbage")
    del summary["headline"]
    model = RenderModel(title="w", entries=[entry], evidence={entry.id: summary})
    render_docs(tmp_path, model)
    text = read(tmp_path / "entries" / f"{entry.id}.md")
    assert "| 8 | 5/5 | 160.0 | — | +4.0% | — | — (adj. 0.024) | gain | identical |" in text
    # One plottable point is still a chart.
    assert (tmp_path / "entries" / f"{entry.id}.svg").is_file()
    assert "**gain**" in text  # headline falls back to the verdict


def test_an_empty_ledger_renders_calm_placeholders(tmp_path: Path) -> None:
    paths = render_docs(tmp_path, RenderModel(title="fresh", entries=[]))
    assert [p.name for p in paths] == ["CHANGELOG.md", "index.html", "CHANGELOG.html"]
    changelog = read(tmp_path / "CHANGELOG.md")
    assert "Nothing: no reverted entry is waiting to be restored." in changelog
    assert "Nothing is held back." in changelog
    assert "No perf entries." in changelog and "No bugfix entries." in changelog
    page = read(tmp_path / "index.html")
    assert "Nothing: no reverted entry is waiting to be restored." in page
    assert "Nothing is held back." in page
    assert "No targets under management." in page and "<svg" not in page


def test_an_unwritable_output_is_a_ledger_error(tmp_path: Path) -> None:
    blocker = tmp_path / "docs"
    blocker.write_text("a file where the docs directory should be\n")
    with pytest.raises(LedgerError, match="cannot write the rendered docs"):
        render_docs(blocker, RenderModel(title="w", entries=[]))
    assert blocker.read_text() == "a file where the docs directory should be\n"


def test_charts_carry_no_matplotlib_version_date_or_url(docs: tuple[Path, list[Path]]) -> None:
    import matplotlib

    out, _ = docs
    charts = sorted((out / "entries").glob("*.svg"))
    assert charts, "the story has evidence, so at least one chart"
    for chart in charts:
        text = chart.read_text(encoding="utf-8")
        assert "matplotlib.org" not in text and matplotlib.__version__ not in text
        assert "<dc:date>" not in text


def test_the_timeline_is_the_workspace_log_in_its_order(tmp_path: Path) -> None:
    log = [
        {"sha": "c" * 40, "time": "2026-05-02T19:20:01+00:00",
         "subject": "rollback of `record knob`: health check failed on decode",
         "body": "- e7-pages [perf] One KV page\n\nLedger-Op: 1"},
        {"sha": "b" * 40, "time": "2026-05-02T19:20:01+00:00",
         "subject": "ab e1-ctas: gain " + "<script>x</script>", "body": ""},
        {"sha": "a" * 40, "time": "2026-05-02T19:20:00+00:00",
         "subject": "record perf: one KV page", "body": "- e7-pages [perf] One KV page"},
    ]
    model = replace(story_model(), log=log)
    render_docs(tmp_path, model, ["html"])
    page = read(tmp_path / "index.html")
    timeline = page[page.index('<section id="timeline">'):]
    assert [m for m in re.findall(r'<li class="tl-([a-z-]+)">', timeline)] == \
        ["rollback", "ab", "record"]
    assert re.findall(r'<code class="muted small">([0-9a-f]{10})</code>', timeline) == \
        ["c" * 10, "b" * 10, "a" * 10]
    assert "<time>2026-05-02 19:20:01 UTC</time>" in timeline
    assert "&lt;script&gt;x&lt;/script&gt;" in timeline and "<script>x" not in timeline
    assert '<a href="#entry-e7-pages">One KV page</a>' in timeline
    assert "Ledger-Op" not in timeline


def test_a_health_gate_rollback_is_never_offered_as_a_claw_back(tmp_path: Path) -> None:
    model = replace(story_model(), targets=[replace(story_model().targets[0], knobs=[
        KnobRow("ENGINE_NUM_PAGES", live="2048", ledger_full="1", entries=["e7-pages"])])])
    render_docs(tmp_path, model)
    page = read(tmp_path / "index.html")
    knobs = page[page.index('<section id="knobs">'):page.index("</section>",
                                                               page.index('<section id="knobs">'))]
    assert "failed its health check" in knobs and "off the table</span>" not in knobs
    entry = read(tmp_path / "entries" / "e7-pages.md")
    assert "**Failed its health check**" in entry and "the process exited" in entry
    assert "ledger restore" not in entry and "Off the table" not in entry
    # Wherever its state shows, the same words: the Entries table, the CHANGELOG's entry.
    row = page[page.index('<tr id="entry-e7-pages">'):]
    row = row[:row.index("</tr>")]
    assert '<span class="badge badge-failed">failed its health check</span>' in row
    assert "rolled back by the health gate: " in row and "the process exited" in row
    assert ">suspected<" not in row
    changelog = read(tmp_path / "CHANGELOG.md")
    block = changelog[changelog.index("### [One KV page]"):]
    block = block[:block.index("\n### ")]
    assert "- **State:** failed its health check" in block
    assert "- **Rolled back by the health gate:** " in block and "the process exited" in block
