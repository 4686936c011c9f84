"""Issue 25 item 2: knobs that reach a container through `envFrom` ConfigMaps.

The oracle is what Kubernetes gives the container, computed from PyYAML's reading of the
file: every key of each `envFrom` ConfigMap (a later source wins), then its `env:` items
(they win); `valueFrom` items have no value in the file.
"""

from __future__ import annotations

import pytest
import yaml

from envknobs.formats import FormatError
from envknobs.formats import get_format
from tests.envknobs.envfrom_shapes import ELSEWHERE
from tests.envknobs.envfrom_shapes import OPEA_VLLM
from tests.envknobs.envfrom_shapes import SHARED

FMT = get_format("k8s", container="vllm")


def container_env(text: str) -> dict[str, str]:
    docs = list(yaml.safe_load_all(text))
    maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
    (c,) = [c for d in docs if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
    env: dict[str, str] = {}
    for src in c.get("envFrom", []):
        env.update(maps.get(src.get("configMapRef", {}).get("name"), {}))
    for item in c.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env.pop(item["name"], None)
    return env


def test_the_configmap_keys_are_knobs_of_the_container_with_their_lines():
    env = {k: v for k, v in FMT.parse(OPEA_VLLM).items() if not k.startswith("--")}
    assert env == container_env(OPEA_VLLM)
    summary = FMT.summary(OPEA_VLLM)
    lines = OPEA_VLLM.splitlines()
    (place,) = summary.get("VLLM_CPU_KVCACHE_SPACE").places
    assert lines[place.line - 1] == '  VLLM_CPU_KVCACHE_SPACE: "40"'
    assert "ConfigMap vllm-config" in place.scope
    (token,) = summary.get("HF_TOKEN").places  # a valueFrom item is named, computed
    assert token.computed and lines[token.line - 1].strip() == "- name: HF_TOKEN"
    assert any("Secret hf-token" in n for n in summary.notes)


@pytest.mark.parametrize(("knob", "value"), [("VLLM_CPU_KVCACHE_SPACE", "80"),
                                             ("LLM_DEVICE", "hpu"), ("no_proxy", "localhost")])
def test_record_edits_the_configmap_data_never_a_shadowing_env_item(knob, value):
    out = FMT.set(OPEA_VLLM, knob, value)
    assert container_env(out)[knob] == value
    cm = next(yaml.safe_load_all(out))["data"]
    assert cm[knob] == value and isinstance(cm[knob], str)  # ConfigMap data is strings
    assert out.count(knob) == OPEA_VLLM.count(knob)  # no env: item was added
    assert len(out.splitlines()) == len(OPEA_VLLM.splitlines())
    back = FMT.set(out, knob, FMT.parse(OPEA_VLLM)[knob], source=FMT.source(OPEA_VLLM, knob))
    assert back == OPEA_VLLM


def test_a_number_stays_a_string_and_unset_removes_the_data_key():
    out = FMT.set(OPEA_VLLM, "PORT", "8000")
    assert '  PORT: "8000"' in out.splitlines()
    out = FMT.unset(OPEA_VLLM, "PORT")
    assert "PORT" not in container_env(out) and "PORT" not in FMT.parse(out)
    assert len(out.splitlines()) == len(OPEA_VLLM.splitlines()) - 1


def test_a_knob_neither_holds_is_refused_or_goes_where_in_says():
    with pytest.raises(FormatError, match=r"env: list of container vllm \(line 32\) or in "
                       r"the data: of ConfigMap vllm-config \(line 9\).*--in env or --in conf"):
        FMT.set(OPEA_VLLM, "VLLM_USE_V1", "1")
    for into in ("env", "configmap"):
        out = FMT.placed(into).set(OPEA_VLLM, "VLLM_USE_V1", "1")
        assert container_env(out)["VLLM_USE_V1"] == "1"
        assert ("VLLM_USE_V1" in next(yaml.safe_load_all(out))["data"]) == (into == "configmap")
        assert FMT.unset(out, "VLLM_USE_V1") == OPEA_VLLM


def test_a_configmap_other_containers_take_is_refused_naming_them():
    with pytest.raises(FormatError, match=r"container warmup \(line \d+\) also take"):
        FMT.set(SHARED, "PORT", "8000")
    with pytest.raises(FormatError, match="warmup"):
        FMT.unset(SHARED, "PORT")


@pytest.mark.parametrize("knob", ["VLLM_USE_V1", "PORT"])
def test_a_configmap_in_another_file_is_named_not_shadowed(knob):
    with pytest.raises(FormatError, match=r"ConfigMap vllm-runtime-config \(envFrom, line 28\)"):
        FMT.set(ELSEWHERE, knob, "1")
    with pytest.raises(FormatError, match="vllm-runtime-config"):
        FMT.unset(ELSEWHERE, knob)
    # a knob the env: list holds is edited there: env wins over envFrom
    out = FMT.set(ELSEWHERE, "VLLM_CPU_OMP_THREADS_BIND", "0-31")
    assert container_env(out)["VLLM_CPU_OMP_THREADS_BIND"] == "0-31"


def test_value_from_is_refused_and_unsetting_an_env_item_over_the_configmap_too():
    with pytest.raises(FormatError, match="line 35: HF_TOKEN .* valueFrom"):
        FMT.set(OPEA_VLLM, "HF_TOKEN", "x")
    text = OPEA_VLLM.replace('              value: "all"\n',
                             '              value: "all"\n            - name: PORT\n'
                             '              value: "9000"\n')
    assert container_env(text)["PORT"] == "9000" == FMT.parse(text)["PORT"]
    with pytest.raises(FormatError, match=r"lets the value of ConfigMap vllm-config \(line 12\)"):
        FMT.unset(text, "PORT")
    out = FMT.set(text, "PORT", "9100")  # the env item is the one that takes effect
    assert container_env(out)["PORT"] == "9100" and '  PORT: "2080"' in out


def test_record_revert_restore_through_the_cli(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "chatqna.yaml"
    f.write_text(OPEA_VLLM)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "vllm", str(f), "--format", "k8s", "--container", "vllm")
    assert r.exit_code == 0, r.stderr
    r = ledger(*C, "target", "show", "vllm")
    assert r.exit_code == 0 and "VLLM_CPU_KVCACHE_SPACE" in r.stdout, r.stdout
    r = ledger(*C, "record", "knob", "vllm", "VLLM_CPU_KVCACHE_SPACE=80", "--class", "perf",
               "--title", "more kv")
    assert r.exit_code == 0, r.stderr
    applied = f.read_text()
    assert container_env(applied)["VLLM_CPU_KVCACHE_SPACE"] == "80"
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_text() == OPEA_VLLM
    assert ledger(*C, "restore", "--perf-only").exit_code == 0
    assert f.read_text() == applied
    f.write_text(ELSEWHERE)
    r = ledger(*C, "record", "knob", "vllm", "VLLM_USE_V1=1", "--class", "perf", "--title",
               "v1", "--force")
    assert r.exit_code == 1 and "vllm-runtime-config" in r.stderr, r.stderr
    assert f.read_text() == ELSEWHERE
