"""index.html in a real browser: headless Chromium renders it and the DOM says what it should.

The screenshot is kept as a test artifact under test-artifacts/render/ (repo root,
gitignored) so a reviewer can look at the page CI rendered.  Chromium is Debian's
`chromium` package; without it the test skips locally but fails in CI (CI=true).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from ledger.render.docs import render_docs
from tests.render.story import story_model

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "render"
WINDOW = (1280, 2000)


def chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    )
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is missing in CI: install Debian's `chromium` package")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def run_chromium(binary: str, profile: Path, page: Path, *mode: str) -> str:
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *mode,
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        pytest.fail(f"chromium exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    binary = chromium()
    out = tmp_path_factory.mktemp("browser")
    render_docs(out / "docs", story_model())
    return binary, out, out / "docs" / "index.html"


def test_screenshot_is_a_rendered_page(page: tuple[str, Path, Path]) -> None:
    binary, out, index = page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "index.png"
    shot.unlink(missing_ok=True)
    run_chromium(binary, out / "profile-shot", index, f"--screenshot={shot}")
    with Image.open(shot) as image:
        assert image.size == WINDOW
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 16)
        # A blank or failed page is one or two colours; text, badges and charts are many.
        assert colours is None or len(colours) > 200, "the screenshot looks blank"
        # The header band (white) and the body (light grey) both rendered.
        header = rgb.crop((0, 0, WINDOW[0], 120)).getcolors(maxcolors=1 << 16)
        assert header is None or len(header) > 20, "no text in the page header"


def test_dom_holds_the_story_as_text(page: tuple[str, Path, Path]) -> None:
    binary, out, index = page
    dom = run_chromium(binary, out / "profile-dom", index, "--dump-dom")
    assert "<script" not in dom  # the hostile title stayed text
    assert "<h1>prod-decode &lt;script&gt;alert(1)&lt;/script&gt;</h1>" in dom
    assert dom.count("<svg") == 3
    for text in (
        "Off the table",
        "Raise decode MMA target CTAs to 512",
        "gain +12.8% output_throughput @c64",
        "SGLANG_SM120_MMA_TARGET_CTAS",
        "held back: under suspicion",  # the planner's own reason, as the CLI says it
        "Queue | size | 8",
        "the hang was a client proxy",
        "Timeline",
    ):
        assert text in dom, text
