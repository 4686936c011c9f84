"""Several targets in one file (a prefill and a decode container of one manifest, a Helm
values file's argument list and env list): a command that edits more than one of them
writes every edit, each on top of the others, never one over the other."""

from __future__ import annotations

import yaml

from tests.envknobs.helm_shapes import PSTACK
from tests.envknobs.k8s_shapes import LWS_PD


def _env(text: str, name: str) -> dict[str, str]:
    doc = next(d for d in yaml.safe_load_all(text) if d["metadata"]["name"] == name)
    c = doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    return {i["name"]: i["value"] for i in c["env"]}


def test_a_revert_and_restore_of_two_targets_in_one_file(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "pd.yaml"
    f.write_text(LWS_PD)
    C = ["-C", str(root)]
    for role in ("prefill", "decode"):
        r = ledger(*C, "target", "add", role, str(f), "--format", "k8s", "--container",
                   f"{role}/leader/sglang")
        assert r.exit_code == 0, r.stderr
    for role in ("prefill", "decode"):
        r = ledger(*C, "record", "knob", role, "SGLANG_TORCH_PROFILER_DIR=/tmp/p", "--class",
                   "perf", "--title", f"profile {role}")
        assert r.exit_code == 0, r.stderr
    applied = f.read_text()
    assert all(_env(applied, role)["SGLANG_TORCH_PROFILER_DIR"] == "/tmp/p"
               for role in ("prefill", "decode"))
    r = ledger(*C, "revert", "--perf-only", "--why", "x")
    assert r.exit_code == 0, r.stderr
    assert f.read_text() == LWS_PD
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied
    r = ledger(*C, "status")
    assert "DRIFT" not in r.stdout, r.stdout


def test_a_helm_values_file_with_an_argument_list_and_an_env_list(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "values.yaml"
    f.write_text(PSTACK)
    C = ["-C", str(root)]
    spec = "servingEngineSpec.modelSpec[0]"
    assert ledger(*C, "target", "add", "args", str(f), "--format", "yaml-map", "--flags", "vllm",
                  "--key-path", f"{spec}.vllmConfig.extraArgs").exit_code == 0
    assert ledger(*C, "target", "add", "env", str(f), "--format", "yaml-map",
                  "--key-path", f"{spec}.env").exit_code == 0
    assert ledger(*C, "record", "flag", "args", "--max-num-seqs=32", "--class", "perf",
                  "--title", "a").exit_code == 0
    assert ledger(*C, "record", "knob", "env", "VLLM_CPU_KVCACHE_SPACE=40", "--class", "perf",
                  "--title", "b").exit_code == 0
    applied = f.read_text()
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == PSTACK
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied
