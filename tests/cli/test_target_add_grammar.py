"""`ledger target add` takes every launch-script shape of the grammar corpus that real
``bash -n`` accepts (issue 51 item 2), and refuses a broken one naming the file, the line
and the construct."""

from __future__ import annotations

import subprocess

from tests.envknobs.test_bash_grammar_corpus import SHAPES


def test_target_add_takes_the_whole_corpus_and_names_what_it_refuses(tmp_path, ledger):
    script = tmp_path / "serve_all.sh"
    script.write_text("#!/bin/bash\nexport SGLANG_DISAGGREGATION_QUEUE_SIZE=8\n"
                      + "\n".join(SHAPES) + "\npython3 -m sglang.launch_server --tp 4\n")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    r = ledger("-C", ws, "target", "add", "all", script, "--format", "bash")
    assert r.exit_code == 0, r.stderr
    assert "SGLANG_DISAGGREGATION_QUEUE_SIZE" in r.stdout and "--tp-size" in r.stdout
    broken = tmp_path / "broken.sh"
    broken.write_text("#!/bin/bash\nwhile read -r l; do echo $l\ndone < <(docker logs -f x\n")
    assert subprocess.run(["bash", "-n", str(broken)], capture_output=True).returncode != 0
    r = ledger("-C", ws, "target", "add", "broken", broken, "--format", "bash")
    assert r.exit_code == 1
    assert r.stderr == f"error: {broken}: line 3: unterminated <( (process substitution)\n"
