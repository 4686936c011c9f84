"""Stale that says whether it matters (issue 52): the engine commits since the evidence,
named with their subjects and files, and whether they touch what the entry measures."""

from __future__ import annotations

import subprocess

from tests.cli.test_evidence_flow import BENCH
from tests.cli.test_evidence_flow import SCRIPT

ATTN = "import os\n\nSHIFT = float(os.environ.get('FAKE_SHIFT', '0'))\nSPLITS = 8\n"
REQUESTS = "def ignore_eos(value):\n    return bool(value)\n"
BUGFIX = """--- a/kern/requests.py
+++ b/kern/requests.py
@@ -1,2 +1,2 @@
 def ignore_eos(value):
-    return bool(value)
+    return value is True
"""
PERF = """--- a/kern/attn.py
+++ b/kern/attn.py
@@ -3,2 +3,2 @@
 SHIFT = float(os.environ.get('FAKE_SHIFT', '0'))
-SPLITS = 8
+SPLITS = 4
"""


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "PATH": "/usr/bin:/bin",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"})


def test_stale_headlines_name_the_commits_since_and_whether_they_matter(tmp_path, ledger):
    repo = tmp_path / "engine-repo"
    (repo / "kern").mkdir(parents=True)
    (repo / "kern" / "attn.py").write_text(ATTN)
    (repo / "kern" / "requests.py").write_text(REQUESTS)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "engine")
    script = tmp_path / "serve.sh"
    script.write_text(SCRIPT)
    root = tmp_path / "ws"
    assert ledger("init", root, "--engine-repo", repo, "--root", f"tmp={tmp_path}"
                  ).exit_code == 0
    assert ledger("-C", root, "target", "add", "s", script, "--format", "bash").exit_code == 0
    r = ledger("-C", root, "record", "knob", "s", "FAKE_SHIFT=0.30", "--class", "perf",
               "--title", "faster kernel", "--no-validate", "--json")
    entry = r.json()["id"]
    assert ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1", "--bench",
                  BENCH).exit_code == 0
    (tmp_path / "bugfix.patch").write_text(BUGFIX)
    (tmp_path / "perf.patch").write_text(PERF)
    r = ledger("-C", root, "record", "patch", tmp_path / "bugfix.patch", "--class", "bugfix",
               "--title", "refuse non-boolean ignore_eos")
    assert r.exit_code == 0, r.stderr

    # An unrelated bugfix commit: the verdict stands, with what it was measured before.
    shown = ledger("-C", root, "show", entry).stdout
    assert "[stale]" not in shown
    assert 'gain +' in shown and '— measured before 1 bugfix commit (' in shown
    assert '"refuse non-boolean ignore_eos"; files: kern/requests.py), none touching ' \
           'what it measures' in shown
    listed = ledger("-C", root, "list").stdout
    assert "measured before 1 bugfix commit" in listed and "[stale]" not in listed

    # A perf patch to the file that reads the knob: that matters.
    r = ledger("-C", root, "record", "patch", tmp_path / "perf.patch", "--class", "perf",
               "--title", "fewer split-K partitions")
    assert r.exit_code == 0, r.stderr
    shown = ledger("-C", root, "show", entry).stdout
    assert "[stale] gain +" in shown
    assert '"fewer split-K partitions" touches kern/attn.py, which names FAKE_SHIFT; ' \
           'and 1 bugfix commit that does not (files: kern/requests.py))' in shown, shown
    # diff (the entry reverted: off the table) and restore say it too.
    assert ledger("-C", root, "revert", entry, "--why", "suspect").exit_code == 0
    assert "touches kern/attn.py, which names FAKE_SHIFT" in ledger("-C", root, "diff").stdout
    restored = ledger("-C", root, "restore", entry)
    assert restored.exit_code == 0, restored.stderr
    assert "touches kern/attn.py, which names FAKE_SHIFT" in restored.stdout
    # The JSON of evidence show carries the same reasons.
    data = ledger("-C", root, "evidence", "show", entry, "--json").json()
    assert data["stale"] and any("kern/attn.py" in w for w in data["stale_why"])
    # The docs show the same headline.
    assert ledger("-C", root, "render", "--out", tmp_path / "docs").exit_code == 0
    changelog = (tmp_path / "docs" / "CHANGELOG.md").read_text()
    assert "touches kern/attn.py, which names FAKE\\_SHIFT" in changelog or \
        "touches kern/attn.py, which names FAKE_SHIFT" in changelog, changelog
