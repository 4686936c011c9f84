"""CHANGELOG.md and entries/<id>.md as HTML pages a browser shows as pages.

The Markdown files stay the source (committed, diffed, read on a forge); each also
becomes a self-contained ``.html`` beside it, with the index's CSS, so the docs' links
open pages, never raw Markdown (``-&gt;`` and pipes on screen).

Safety: the Markdown templates escape every user value (``md_text`` turns ``<`` into
an entity, ``md_code`` and fences are code), so the only raw HTML in them is the
templates' own ``<br>``; markdown-it is run with HTML on for that, and its link
validation drops ``javascript:`` and other unsafe schemes.  Links between the pages
(``entries/ID.md``, ``../CHANGELOG.md``) are pointed at the ``.html`` twins.
"""

from __future__ import annotations

from typing import Any


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table")


def md_to_html(text: str) -> str:
    """The HTML body of one of our Markdown docs, its ``.md`` links made ``.html``."""
    md = _markdown()
    tokens = md.parse(text)
    for token in tokens:
        for child in token.children or ():
            if child.type == "link_open":
                href = str(child.attrGet("href") or "")
                if href.endswith(".md") and "://" not in href:
                    child.attrSet("href", href[:-3] + ".html")
    return md.renderer.render(tokens, md.options, {})


def html_page(env: Any, text: str, title: str, css: str, index_href: str) -> str:
    """A whole page around the Markdown ``text``: the index's look, a link back to it."""
    return env.get_template("page.html.j2").render(title=title, css=css, body=md_to_html(text),
                                                   index_href=index_href)


__all__ = ["html_page", "md_to_html"]
