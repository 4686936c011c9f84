"""Issue 50 item 4: a target that names no engine release still warns for an env var that
every catalogued release lists as removed, and a default the engine computes at startup
is shown as such, never as a bare ``unset`` that reads like "off"."""

from __future__ import annotations

VLLM_SCRIPT = "#!/bin/bash\nvllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64\n"
SGLANG_SCRIPT = ("#!/bin/bash\npython3 -m sglang.launch_server --model-path /models/x "
                 "--disaggregation-mode prefill\n")


def _ws(tmp_path, ledger, text):
    script = tmp_path / "serve.sh"
    script.write_text(text)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "s", script, "--format", "bash").exit_code == 0
    return root


def test_a_name_removed_from_every_release_warns_without_a_release(tmp_path, ledger):
    root = _ws(tmp_path, ledger, VLLM_SCRIPT)
    r = ledger("-C", root, "record", "knob", "s", "VLLM_ATTENTION_BACKEND=FLASHINFER",
               "--class", "perf", "--title", "fi")
    assert r.exit_code == 0, r.stderr
    # vllm/envs.py declares VLLM_ATTENTION_BACKEND up to 0.14.1; 0.15.0's no longer does
    assert ("VLLM_ATTENTION_BACKEND: removed in vLLM >= 0.15.0 (use --attention-backend); "
            "declare the release with `engine: vllm==X`") in r.stderr
    r = ledger("-C", root, "record", "knob", "s", "VLLM_LOGGING_LEVEL=DEBUG",
               "--class", "perf", "--title", "log")
    assert r.exit_code == 0 and "removed in" not in r.stderr


def test_a_computed_default_is_shown_as_computed(tmp_path, ledger):
    root = _ws(tmp_path, ledger, SGLANG_SCRIPT)
    r = ledger("-C", root, "record", "knob", "s", "SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=8",
               "--class", "perf", "--title", "pool")
    assert r.exit_code == 0, r.stderr
    shown = ledger("-C", root, "show", "pool").stdout
    assert "unset (default: computed at startup) -> 8" in shown
