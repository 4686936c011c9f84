"""The docs in a real browser at a desktop and a phone width (issue 53).

Headless Chromium (Debian's ``chromium``; see tests/render/test_browser.py: skipped
locally without it, a failure in CI) loads each page at 1280 px and at a true 390 px
(the page inside a 390-px iframe: headless Chromium will not make a window narrower
than 500 px) and a script measures it after load:

* the document never scrolls sideways (``scrollWidth <= clientWidth``): wide tables
  and charts scroll inside their own boxes, cards reflow;
* the first screen (1280×757 and 390×844, a phone's) holds the first off-the-table card
  whole, so the on-call reader sees the answer without scrolling.

The screenshots are kept under test-artifacts/render/ (index-1280.png, index-390.png)
for a person to look at.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from ledger.render.docs import render_docs
from tests.render.story import story_model
from tests.render.test_browser import ARTIFACTS
from tests.render.test_browser import chromium

MEASURE = """<script>
window.addEventListener('load', () => {
  const d = document.documentElement;
  const card = document.querySelector('#off-table .card');
  const r = card ? card.getBoundingClientRect() : null;
  const out = document.createElement('pre');
  out.id = 'measure';
  out.textContent = JSON.stringify({scroll: d.scrollWidth, client: d.clientWidth,
    width: innerWidth, height: innerHeight, card: r && [r.top, r.bottom]});
  const host = window.parent !== window ? window.parent.document : document;
  host.body.appendChild(host.importNode(out, true));
});
</script>"""

PHONE = (390, 844)


def _chromium(binary: str, profile: Path, url: str, window: tuple[int, int], *mode: str) -> str:
    import subprocess

    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--allow-file-access-from-files", f"--user-data-dir={profile}",
         f"--window-size={window[0]},{window[1]}", "--virtual-time-budget=5000", *mode, url],
        capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        pytest.fail(f"chromium exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    binary = chromium()
    out = tmp_path_factory.mktemp("widths")
    docs = out / "docs"
    # e1-ctas restored after its clear: every first-screen section has a card, the
    # "Cleared and restored" one with its two columns included.
    model = story_model()
    restored = [replace(e, state="applied") if e.id == "e1-ctas" else e for e in model.entries]
    render_docs(docs, replace(model, entries=restored))
    return binary, out, docs


def _measure(site, page: str, width: int) -> dict:
    binary, out, docs = site
    source = docs / page
    probe = source.with_name(f"measure-{width}-{source.name}")
    probe.write_text(source.read_text().replace("</body>", MEASURE + "</body>"))
    if width >= 500:
        url, window = probe.as_uri(), (width, 900)
    else:  # a true phone width: the page in an iframe of that width
        frame = source.with_name(f"frame-{width}-{source.name}")
        frame.write_text(f'<!doctype html><html><body style="margin:0"><iframe src="{probe.name}"'
                         f' style="border:0;display:block;width:{PHONE[0]}px;'
                         f'height:{PHONE[1]}px"></iframe></body></html>')
        url, window = frame.as_uri(), (500, 900)
    dom = _chromium(binary, out / f"profile-{width}-{source.stem}", url, window, "--dump-dom")
    found = re.search(r'<pre id="measure">(.*?)</pre>', dom)
    assert found, f"the page did not load: {dom[-500:]}"
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.mark.parametrize("width", [1280, PHONE[0]])
@pytest.mark.parametrize("page", ["index.html", "CHANGELOG.html", "entries/e1-ctas.html"])
def test_no_page_scrolls_sideways(site, page, width):
    m = _measure(site, page, width)
    assert m["width"] == width, m  # the width asked for is the width measured
    assert m["scroll"] <= m["client"], f"{page} at {width}px scrolls sideways: {m}"


@pytest.mark.parametrize("width", [1280, PHONE[0]])
def test_the_first_screen_holds_the_off_the_table_card(site, width):
    m = _measure(site, "index.html", width)
    top, bottom = m["card"]
    assert 0 < top and bottom <= m["height"], f"at {width}px the first card is at {m['card']}, " \
        f"the screen {m['height']}px high"


def test_screenshots_at_both_widths(site):
    binary, out, docs = site
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width, window in ((1280, (1280, 900)), (PHONE[0], (500, 2400))):
        shot = ARTIFACTS / f"index-{width}.png"
        shot.unlink(missing_ok=True)
        url = (docs / "index.html").as_uri()
        if width < 500:
            frame = docs / "frame-shot.html"
            frame.write_text('<!doctype html><html><body style="margin:0"><iframe '
                             f'src="index.html" style="border:0;display:block;width:{width}px;'
                             f'height:{window[1]}px"></iframe></body></html>')
            url = frame.as_uri()
        _chromium(binary, out / f"profile-shot-{width}", url, window, f"--screenshot={shot}")
        with Image.open(shot) as image:
            if width < 500:
                image.crop((0, 0, width, window[1])).save(shot)
        with Image.open(shot) as image:
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 200, f"{shot} looks blank"
