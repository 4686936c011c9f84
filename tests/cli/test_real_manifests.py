"""Issue 11's "Done when", through the CLI: k8s roles, byte-exact reverts, --config files."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.envknobs.k8s_shapes import LWS
from tests.envknobs.k8s_shapes import LWS_PD
from tests.envknobs.k8s_shapes import RBG_V1

ADDRESS = re.compile(r"^  (\S+)\s+\((\S+):(\d+): ", re.M)

SGLANG_CONFIG = """\
# sglang --config for the decode servers
model-path: /models/glm-4.6
tp-size: 8
mem-fraction-static: 0.85   # leaves room for the cuda graphs
cuda-graph-max-bs: 256
attention-backend: fa3
"""


def workspace(tmp_path: Path, ledger, name: str, text: str) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / name
    f.write_text(text)
    return root, f


def suggested_addresses(stderr: str, path: Path) -> list[str]:
    found = ADDRESS.findall(stderr)
    assert found and all(p == str(path) for _, p, _ in found), stderr
    return [a for a, _, _ in found]


def test_lws_and_rbg_containers_are_selected_by_the_suggested_addresses(tmp_path, ledger):
    text = LWS_PD + "---\n" + LWS + "---\n" + RBG_V1
    root, manifest = workspace(tmp_path, ledger, "pd.yaml", text)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "pd", str(manifest), "--format", "k8s", "--container", "sglang")
    assert r.exit_code == 1 and "is ambiguous" in r.stderr
    addresses = suggested_addresses(r.stderr, manifest)
    assert "prefill/leader/sglang" in addresses and "sglang-pd/prefill/sglang" in addresses
    r = ledger(*C, "target", "add", "side", str(manifest), "--format", "k8s",
               "--container", "patio-runtime")
    assert r.exit_code == 1
    addresses += suggested_addresses(r.stderr, manifest)
    assert {"prefill/patio-runtime", "decode/patio-runtime"} <= set(addresses)
    addresses += ["sglang-leader", "sglang-worker"]  # unique in the file: names suffice
    envs = set()
    for i, address in enumerate(addresses):
        r = ledger(*C, "target", "add", f"t{i}", str(manifest), "--format", "k8s",
                   "--container", address)
        assert r.exit_code == 0, (address, r.stderr)
        knob = f"SGLANG_T{i}"
        r = ledger(*C, "record", "knob", f"t{i}", f"{knob}=1", "--class", "perf",
                   "--title", f"probe {address}", "--no-validate")
        assert r.exit_code == 0, r.stderr
        envs.add(knob)
    # Each knob landed in exactly one container, a different one each time.
    docs = list(yaml.safe_load_all(manifest.read_text()))
    seen: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for c in node.get("containers") or []:
                seen.extend(e["name"] for e in c.get("env") or [] if e["name"] in envs)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for d in docs:
        walk(d)
    assert sorted(seen) == sorted(envs)


def test_record_then_revert_of_a_plain_dollar_value_is_byte_identical(tmp_path, ledger):
    root, manifest = workspace(tmp_path, ledger, "lws.yaml", LWS)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "lws", str(manifest), "--format", "k8s",
                  "--container", "leader/sglang-leader").exit_code == 0
    original = manifest.read_bytes()
    r = ledger(*C, "record", "knob", "lws", "HF_TOKEN=hf_abc", "--class", "bugfix",
               "--title", "a token that works", "--json", "--no-validate")
    assert r.exit_code == 0, r.stderr
    entry = r.json()["id"]
    assert b"value: hf_abc\n" in manifest.read_bytes()
    r = ledger(*C, "record", "knob", "lws", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT=30",
               "--class", "bugfix", "--title", "shorter wait", "--json")
    assert r.exit_code == 0, r.stderr
    second = r.json()["id"]
    assert b"value: '30'  # liveness" in manifest.read_bytes()
    assert ledger(*C, "revert", entry, second, "--why", "back to the vault token").exit_code == 0
    assert manifest.read_bytes() == original  # `value: $HF_TOKEN`, not `"$HF_TOKEN"`
    assert ledger(*C, "restore", entry).exit_code == 0
    assert b"value: hf_abc\n" in manifest.read_bytes()
    assert ledger(*C, "revert", entry, "--why", "again").exit_code == 0
    assert manifest.read_bytes() == original
    assert ledger(*C, "status", "--json").exit_code == 0


def test_sglang_config_flag_goes_through_suspect_clear_restore(tmp_path, ledger):
    root, config = workspace(tmp_path, ledger, "decode.yaml", SGLANG_CONFIG)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "decode-config", str(config), "--format", "yaml-map",
               "--flags", "sglang")
    assert r.exit_code == 0, r.stderr
    assert "flags sglang" in r.stdout
    r = ledger(*C, "record", "knob", "decode-config", "cuda-graph-max-bs=512", "--class", "perf",
               "--title", "bigger cuda graphs", "--json")
    assert r.exit_code == 0, r.stderr
    perf = r.json()["id"]
    r = ledger(*C, "record", "knob", "decode-config", "mem-fraction-static=0.8", "--class",
               "bugfix", "--title", "room for the graphs", "--json")
    assert r.exit_code == 0, r.stderr
    applied = config.read_text()
    assert "cuda-graph-max-bs: 512\n" in applied
    assert "mem-fraction-static: 0.8   # leaves room" in applied
    assert yaml.safe_load(applied)["cuda-graph-max-bs"] == 512  # still an int
    assert ledger(*C, "suspect", perf, "--why", "decode hangs at bs 512").exit_code == 0
    text = config.read_text()
    assert "cuda-graph-max-bs: 256\n" in text and "mem-fraction-static: 0.8 " in text
    r = ledger(*C, "restore", perf)
    assert r.exit_code == 1 and "under suspicion" in r.stderr
    assert ledger(*C, "clear", perf, "--why", "the client proxy hung").exit_code == 0
    r = ledger(*C, "restore", perf)
    assert r.exit_code == 0, r.stderr
    assert config.read_text() == applied
    assert ledger(*C, "revert", "--class", "bugfix", "--why", "x").exit_code == 0
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert config.read_text() == SGLANG_CONFIG


def test_a_config_key_that_is_not_an_env_name_needs_flags(tmp_path, ledger):
    root, config = workspace(tmp_path, ledger, "c.yaml", SGLANG_CONFIG)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "cfg", str(config), "--format", "yaml-map").exit_code == 0
    r = ledger(*C, "record", "knob", "cfg", "tp-size=4", "--class", "perf", "--title", "t")
    assert r.exit_code == 1 and "--flags sglang|vllm" in r.stderr
    assert config.read_text() == SGLANG_CONFIG


def test_recipe_env_map_at_a_key_path(tmp_path, ledger):
    recipe = 'name: glm\ndecode_environment: {SGLANG_A: "1", NCCL_DEBUG: WARN}\n'
    root, f = workspace(tmp_path, ledger, "recipe.yaml", recipe)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "recipe", str(f), "--format", "yaml-map",
               "--key-path", "decode_environment")
    assert r.exit_code == 0, r.stderr
    r = ledger(*C, "record", "knob", "recipe", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
               "perf", "--title", "ctas", "--json")
    assert r.exit_code == 0, r.stderr
    assert 'NCCL_DEBUG: WARN, SGLANG_SM120_MMA_TARGET_CTAS: "512"}' in f.read_text()
    assert ledger(*C, "revert", r.json()["id"], "--why", "x").exit_code == 0
    assert f.read_text() == recipe
    r = ledger(*C, "target", "add", "bad", str(f), "--format", "yaml-map", "--key-path", "nope")
    assert r.exit_code == 1 and "key path 'nope' not found" in r.stderr


def test_unset_then_revert_puts_the_item_back(tmp_path, ledger):
    root, manifest = workspace(tmp_path, ledger, "lws.yaml", LWS)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "w", str(manifest), "--format", "k8s",
                  "--container", "sglang-worker").exit_code == 0
    r = ledger(*C, "record", "knob", "w", "HF_TOKEN", "--unset", "--class", "bugfix",
               "--title", "no token on workers", "--json")
    assert r.exit_code == 0, r.stderr
    assert "$HF_TOKEN" not in manifest.read_text().split("workerTemplate")[1]
    assert ledger(*C, "revert", r.json()["id"], "--why", "workers need it").exit_code == 0
    assert manifest.read_text() == LWS


def test_unset_then_revert_on_a_serve_script_keeps_the_comment(story, ledger):
    original = story.script.read_bytes()
    r = ledger(*story.args("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS", "--unset",
                           "--class", "perf", "--title", "engine default", "--json"))
    assert r.exit_code == 0, r.stderr
    assert b"TARGET_CTAS" not in story.script.read_bytes()
    assert ledger(*story.args("revert", r.json()["id"], "--why", "x")).exit_code == 0
    assert story.script.read_bytes() == original  # `# wave quantisation at c64` and all


def test_config_keys_are_checked_against_the_flag_catalog(tmp_path, ledger):
    """Runs once the launch-flag catalog (envknobs.catalog.lookup_flag) is bundled."""
    import pytest

    catalog = pytest.importorskip("envknobs.catalog")
    if not hasattr(catalog, "lookup_flag"):
        pytest.skip("no flag catalog bundled yet")
    root, config = workspace(tmp_path, ledger, "c.yaml", SGLANG_CONFIG)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "cfg", str(config), "--format", "yaml-map",
                  "--flags", "sglang").exit_code == 0
    r = ledger(*C, "record", "knob", "cfg", "cuda-graph-max-bs=many", "--class", "perf",
               "--title", "t")
    assert r.exit_code == 1 and "--no-validate" in r.stderr
    r = ledger(*C, "record", "knob", "cfg", "cuda-graph-max-bz=8", "--class", "perf",
               "--title", "t")
    assert r.exit_code == 0 and "unknown sglang server argument cuda-graph-max-bz" in r.stderr


def test_record_flag_in_args_lists_reverts_byte_identical_and_restores_exact(tmp_path, ledger):
    """Issue 25: `record flag` edits a container's args: list (split tokens, a new flag, a
    switch removed with --unset), revert gives the file back byte for byte, restore
    gives the applied file back exactly; PyYAML sees each argv."""
    from tests.envknobs.argv_shapes import SPLIT_TOKENS

    root, manifest = workspace(tmp_path, ledger, "sglang.yaml", SPLIT_TOKENS)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "dep", str(manifest), "--format", "k8s",
                  "--container", "sglang").exit_code == 0
    steps = [("--tp=2", []), ("--cuda-graph-max-bs=256", []), ("--enable-metrics", ["--unset"])]
    for i, (flag, extra) in enumerate(steps):
        r = ledger(*C, "record", "flag", "dep", flag, *extra, "--class", "perf",
                   "--title", f"step {i}")
        assert r.exit_code == 0, r.stderr
    applied = manifest.read_text()
    c = yaml.safe_load(applied)["spec"]["template"]["spec"]["containers"][0]
    assert c["args"] == ["--model-path=meta-llama/Llama-3.1-8B-Instruct", "--tp", "2",
                         "--mem-fraction-static", "0.85", "--cuda-graph-max-bs", "256"]
    shown = ledger(*C, "target", "show", "dep", "--json").json()
    assert {k["knob"]: k["value"] for k in shown["knobs"]}["--tp-size"] == "2"
    assert ledger(*C, "revert", "--perf-only", "--why", "incident").exit_code == 0
    assert manifest.read_text() == SPLIT_TOKENS
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert manifest.read_text() == applied
