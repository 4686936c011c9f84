"""A workspace with one serve script and one recorded knob entry, for evidence tests
that import real bench files (tests/evidence/fixtures/real/README.md)."""

from __future__ import annotations

from pathlib import Path

REAL = Path(__file__).resolve().parents[1] / "evidence" / "fixtures" / "real"

ENGINE_SCRIPT = "#!/usr/bin/env bash\nexport ENGINE_SEED=0\nexec python -m engine serve\n"


def one_entry(tmp_path, ledger, script_text: str = ENGINE_SCRIPT,
              change: str = "ENGINE_SEED=1", title: str = "t") -> tuple[Path, Path, str]:
    """(workspace root, the serve script, the entry's id): ``change`` recorded as perf on
    target ``s`` (the script)."""
    script = tmp_path / "serve.sh"
    script.write_text(script_text)
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    assert ledger("-C", root, "target", "add", "s", script, "--format", "bash").exit_code == 0
    r = ledger("-C", root, "record", "knob", "s", change, "--class", "perf",
               "--title", title, "--no-validate", "--json")
    assert r.exit_code == 0, r.stderr
    return root, script, r.json()["id"]
