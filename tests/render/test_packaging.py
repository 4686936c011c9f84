"""A non-editable install finds the templates: build a wheel, install it, render from it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RENDER_FROM_INSTALL = """
import sys
from pathlib import Path
import ledger, templates
from ledger.core.model import Entry
from ledger.render.docs import render_docs
from ledger.render.model import RenderModel
install = Path(sys.argv[1]).resolve()
for module in (ledger, templates):
    assert Path(module.__file__).resolve().is_relative_to(install), module.__file__
entry = Entry(id="e1", seq=1, kind="knob", cls="perf", title="t", slug="t", recorded="r",
              target="decode", knob="K", before="1", after="2")
paths = render_docs(Path(sys.argv[2]), RenderModel(title="w", entries=[entry]))
print(" ".join(sorted(p.name for p in paths)))
"""


def test_wheel_ships_templates_and_renders_from_an_install(tmp_path: Path) -> None:
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("ledger", "envknobs", "templates"):
        shutil.copytree(REPO / package, src / package, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    for template in (REPO / "templates").iterdir():
        if template.suffix in (".j2", ".css"):
            assert f"templates/{template.name}" in shipped, template.name

    install = tmp_path / "install"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(install), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    done = subprocess.run(
        [sys.executable, "-c", RENDER_FROM_INSTALL, str(install), str(tmp_path / "docs")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(install), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["CHANGELOG.html", "CHANGELOG.md", "e1.html", "e1.md",
                                   "index.html"]
