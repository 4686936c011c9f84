"""Markdown escaping, checked against a real CommonMark + GFM-table renderer.

markdown-it-py is the oracle: whatever a user typed, the escaped text must come back out
of a table cell as exactly that text, with no markup (no link, emphasis, HTML tag) and
without splitting or adding cells.
"""

from __future__ import annotations

import html
import re

from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ledger.render.text import fmt_ci
from ledger.render.text import fmt_median
from ledger.render.text import fmt_p
from ledger.render.text import fmt_pct
from ledger.render.text import md_code
from ledger.render.text import md_text
from ledger.render.text import when
from ledger.render.text import when_exact

RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])

# Weighted toward what Markdown cares about; no control characters (a config value can
# carry none, and CommonMark rewrites NUL).
MARKDOWN_CHARS = st.sampled_from(list("\\`*_{}[]()<>#+-.!|~&:;'\"=/$ \t")) | st.characters(
    codec="utf-8", categories=("L", "N", "P", "S", "Zs")
)


def render_cell(cell: str) -> str:
    """The inner HTML of the single body cell of a two-column table holding ``cell``."""
    out = RENDERER.render(f"| a | b |\n|---|---|\n| {cell} | end |\n")
    cells = re.findall(r"<td>(.*?)</td>", out, flags=re.DOTALL)
    assert len(cells) == 2, out  # the value must neither split nor swallow a cell
    assert cells[1] == "end", out
    return cells[0]


@settings(max_examples=300, deadline=None)
@example("0.")  # an ordered-list marker: escaped at its dot, not its digit
@example("12) done\n1. x")
@given(st.text(MARKDOWN_CHARS | st.just("\n"), max_size=40))
def test_md_text_comes_back_verbatim_from_a_table_cell(text: str) -> None:
    inner = render_cell(md_text(text))
    # The only markup allowed is the <br> standing for a line break.
    assert re.sub(r"<br\s*/?>", "", inner).count("<") == 0, inner
    shown = html.unescape(re.sub(r"<br\s*/?>", "\n", inner))
    # Whitespace at the edges of a line or cell is not content in Markdown.
    expected = "\n".join(line.strip() for line in text.split("\n")).strip()
    assert "\n".join(line.strip() for line in shown.split("\n")).strip() == expected


@settings(max_examples=300, deadline=None)
@given(st.text(MARKDOWN_CHARS, min_size=1, max_size=30))
def test_md_code_keeps_the_exact_value_in_a_table_cell(value: str) -> None:
    inner = render_cell(md_code(value))
    match = re.fullmatch(r"<code>(.*)</code>", inner, flags=re.DOTALL)
    assert match, inner
    assert html.unescape(match.group(1)) == value


@given(st.text(MARKDOWN_CHARS, min_size=1, max_size=30))
@settings(max_examples=150, deadline=None)
def test_md_code_outside_tables(value: str) -> None:
    out = RENDERER.render(f"- knob {md_code(value, table=False)}\n")
    match = re.search(r"<li>knob <code>(.*)</code></li>", out, flags=re.DOTALL)
    assert match, out
    assert html.unescape(match.group(1)) == value


def test_md_text_neutralises_html_links_headings_and_lists() -> None:
    out = RENDERER.render("- " + md_text("<script>alert(1)</script> [x](http://e) *b* _i_") + "\n")
    assert "<script" not in out and "<a " not in out and "<em>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    for leading in ("# heading", "- item", "1. item", "+ item", "= rule"):
        out = RENDERER.render("- " + md_text(leading) + "\n")
        assert out.count("<li>") == 1 and "<h1>" not in out and "<ol>" not in out, out


def test_md_text_keeps_knob_names_readable() -> None:
    # Intraword underscores cannot open emphasis, so they stay unescaped in the source.
    assert md_text("SGLANG_SM120_MMA_TARGET_CTAS=512") == "SGLANG_SM120_MMA_TARGET_CTAS=512"
    assert md_text("p 0.410") == "p 0.410"


def test_md_code_marks_unset_and_empty() -> None:
    assert md_code(None) == "*unset*"
    assert md_code("") == "*empty*"


def test_number_formats() -> None:
    assert fmt_median(1392.64) == "1,392.6"
    assert fmt_median(0.5) == "0.5"
    assert fmt_median(None) == fmt_median(float("nan")) == fmt_median(True) == "—"
    assert fmt_pct(12.8) == "+12.8%" and fmt_pct(-3.25) == "-3.2%"
    assert fmt_ci(9.1, 16.0) == "+9.1 … +16.0%" and fmt_ci(None, 1.0) == "—"
    assert fmt_p(0.008) == "0.008" and fmt_p(0.0001) == "<0.001" and fmt_p("x") == "—"


def test_when_shortens_iso_stamps_and_passes_other_text() -> None:
    assert when("2026-05-02T14:14:09+00:00") == "2026-05-02 14:14 UTC"
    assert when("2026-05-02T14:14:09Z") == "2026-05-02 14:14 UTC"
    assert when_exact("2026-05-02T14:14:09Z") == "2026-05-02 14:14:09 UTC"
    assert when("2026-05-02T16:14:09+02:00") == "2026-05-02 16:14 +0200"
    assert when("2026-05-02T14:14:09") == "2026-05-02 14:14"
    assert when("last tuesday") == "last tuesday"
    assert when(None) == ""
