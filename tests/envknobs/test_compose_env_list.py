"""Issue 25 item 2: docker-compose `environment:` as a `- K=V` list (yaml-map targets).

PyYAML reads the list compose gets; each item split at its first `=` is what the
container's env holds (`$$` read as `$`, as compose does).
"""

from __future__ import annotations

import pytest
import yaml

from envknobs.formats import FormatError
from envknobs.formats import get_format
from tests.envknobs.foreign_shapes import COMPOSE_ENV_LIST

FMT = get_format("yaml-map", key_path="services.vllm.environment", strings=True)


def compose_env(text: str) -> dict[str, str]:
    items = yaml.safe_load(text)["services"]["vllm"]["environment"]
    return {k: v.replace("$$", "$") for k, _, v in (i.partition("=") for i in items)}


def test_the_list_is_read_with_interpolated_values_left_out():
    assert FMT.parse(COMPOSE_ENV_LIST) == {"VLLM_CPU_KVCACHE_SPACE": "40"}


@pytest.mark.parametrize(("knob", "value"), [("VLLM_CPU_KVCACHE_SPACE", "80"),
                                             ("VLLM_USE_V1", "1"), ("PRICE", "a$b")])
def test_set_then_back_is_byte_identical(knob, value):
    out = FMT.set(COMPOSE_ENV_LIST, knob, value)
    assert compose_env(out)[knob] == value and FMT.parse(out)[knob] == value
    others = {k: v for k, v in compose_env(COMPOSE_ENV_LIST).items() if k != knob}
    assert {k: v for k, v in compose_env(out).items() if k != knob} == others
    old = FMT.parse(COMPOSE_ENV_LIST).get(knob)
    back = FMT.set(out, knob, old) if old is not None else FMT.unset(out, knob)
    assert back == COMPOSE_ENV_LIST


def test_unset_removes_the_item_and_an_interpolated_one_is_refused():
    out = FMT.unset(COMPOSE_ENV_LIST, "VLLM_CPU_KVCACHE_SPACE")
    assert "VLLM_CPU_KVCACHE_SPACE" not in compose_env(out)
    assert out.count("\n") == COMPOSE_ENV_LIST.count("\n") - 1
    with pytest.raises(FormatError, match="takes its value from the shell"):
        FMT.set(COMPOSE_ENV_LIST, "HUGGING_FACE_HUB_TOKEN", "x")


def test_a_name_listed_twice_is_refused_naming_both_lines():
    text = COMPOSE_ENV_LIST.replace("      - VLLM_CPU_KVCACHE_SPACE=40\n",
                                    "      - VLLM_CPU_KVCACHE_SPACE=40\n      - VLLM_CPU_KVCACHE_SPACE=8\n")
    with pytest.raises(FormatError, match="listed twice"):
        FMT.parse(text)


def test_record_revert_restore_through_the_cli(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "docker-compose.yml"
    f.write_text(COMPOSE_ENV_LIST)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "vllm", str(f), "--format", "yaml-map",
               "--key-path", "services.vllm.environment")
    assert r.exit_code == 0, r.stderr
    for i, kv in enumerate(["VLLM_CPU_KVCACHE_SPACE=80", "VLLM_USE_V1=1"]):
        r = ledger(*C, "record", "knob", "vllm", kv, "--class", "perf", "--title", f"k{i}")
        assert r.exit_code == 0, r.stderr
    applied = f.read_text()
    assert compose_env(applied)["VLLM_USE_V1"] == "1"
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == COMPOSE_ENV_LIST
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied


def test_helm_values_argument_list_through_record_flag(tmp_path, ledger):
    """Issue 25 item 1: a Helm values list of server arguments (production-stack's
    `vllmConfig.extraArgs`) as a yaml-map target with --flags: record flag, --unset of a
    switch, revert byte-identical, restore exact; PyYAML reads the list the chart renders."""
    from tests.envknobs.foreign_shapes import HELM_VALUES

    def extra_args(text: str) -> list[str]:
        return yaml.safe_load(text)["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]["extraArgs"]

    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "values.yaml"
    f.write_text(HELM_VALUES)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "helm", str(f), "--format", "yaml-map", "--flags", "vllm",
               "--key-path", "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs")
    assert r.exit_code == 0, r.stderr
    # (a switch removed from a flow list and put back goes at its end: the same argv to
    # argparse, not the same bytes; the k8s tests hold --unset of a block-list switch)
    steps = [("--max-num-seqs=64",), ("--enable-prefix-caching",)]
    for i, step in enumerate(steps):
        r = ledger(*C, "record", "flag", "helm", *step, "--class", "perf", "--title", f"s{i}")
        assert r.exit_code == 0, r.stderr
    applied = f.read_text()
    assert extra_args(applied) == ["--disable-log-requests", "--max-num-seqs", "64",
                                   "--enable-prefix-caching"]
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == HELM_VALUES
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied
    r = ledger(*C, "record", "flag", "helm", "--disable-log-requests", "--unset", "--class",
               "perf", "--title", "log requests")
    assert r.exit_code == 0 and "--disable-log-requests" not in extra_args(f.read_text())
