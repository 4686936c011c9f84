"""Issue 50 item 4: `record knob ... --in env|configmap`, where a k8s container's new knob
goes when it also takes a ConfigMap of the file through `envFrom` (envknobs.formats.yaml.
envfrom's docstring).  The oracle is what Kubernetes gives the container, read by PyYAML
(test_k8s_envfrom.container_env); the CLI runs for real on a real git workspace."""

from __future__ import annotations

import pytest
import yaml

from tests.envknobs.envfrom_shapes import ELSEWHERE
from tests.envknobs.envfrom_shapes import SGLANG_CM

NAME = "meta-llama-31-8b-instruct-sglang"


def container_env(text: str) -> dict[str, str]:
    docs = list(yaml.safe_load_all(text))
    (cm,) = [d["data"] for d in docs if d["kind"] == "ConfigMap"]
    (c,) = [c for d in docs if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"]]
    env = dict(cm)
    env.update({i["name"]: i["value"] for i in c["env"] if "value" in i})
    return env


def line_of(text: str, needle: str) -> int:
    (n,) = [k for k, ln in enumerate(text.splitlines(), 1) if ln.strip() == needle]
    return n


def workspace(tmp_path, ledger, text: str):
    """A workspace managing ``text`` as the k8s target ``sg``: (run, file)."""
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "sglang.yaml"
    f.write_text(text)
    C = ["-C", str(root)]
    r = ledger(*C, "target", "add", "sg", str(f), "--format", "k8s", "--container", NAME)
    assert r.exit_code == 0, r.stderr

    def run(*args):
        return ledger(*C, *args)
    return run, f


@pytest.fixture
def ws(tmp_path, ledger):
    return workspace(tmp_path, ledger, SGLANG_CM)


def record(run, *args):
    return run("record", "knob", "sg", *args, "--class", "perf", "--title", "t")


def test_a_new_knob_without_in_is_refused_naming_both_places(ws):
    run, f = ws
    r = record(run, "SGLANG_DISABLE_CUDNN_CHECK=1")
    assert r.exit_code == 1 and r.stderr.startswith("error:"), r.stderr
    assert str(f) in r.stderr
    assert f"env: list of container {NAME} (line {line_of(SGLANG_CM, 'env:')})" in r.stderr
    assert f"ConfigMap sglang-env (line {line_of(SGLANG_CM, 'data:')})" in r.stderr
    assert "--in env" in r.stderr and "--in configmap" in r.stderr
    assert f.read_text() == SGLANG_CM


@pytest.mark.parametrize("into", ["env", "configmap"])
def test_in_selects_the_place_and_revert_is_byte_exact(ws, into):
    run, f = ws
    r = record(run, "SGLANG_DISABLE_CUDNN_CHECK=1", "--in", into)
    assert r.exit_code == 0, r.stderr
    out = f.read_text()
    assert container_env(out)["SGLANG_DISABLE_CUDNN_CHECK"] == "1"
    docs = list(yaml.safe_load_all(out))
    in_cm = "SGLANG_DISABLE_CUDNN_CHECK" in docs[0]["data"]
    assert in_cm == (into == "configmap")
    if in_cm:
        assert docs[0]["data"]["SGLANG_DISABLE_CUDNN_CHECK"] == "1"  # a string, as data holds
    assert len(out.splitlines()) == len(SGLANG_CM.splitlines()) + (1 if in_cm else 2)
    r = run("target", "show", "sg")
    assert r.exit_code == 0 and "SGLANG_DISABLE_CUDNN_CHECK" in r.stdout, r.stdout
    assert run("revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_bytes() == SGLANG_CM.encode()


def test_a_knob_in_both_places_is_edited_where_it_takes_effect(ws):
    run, f = ws
    r = record(run, "SGLANG_TORCH_PROFILER_DIR=/x", "--in", "configmap")
    assert r.exit_code == 1 and r.stderr.startswith("error:"), r.stderr
    env_line = line_of(SGLANG_CM, "- name: SGLANG_TORCH_PROFILER_DIR")
    cm_line = line_of(SGLANG_CM, 'SGLANG_TORCH_PROFILER_DIR: "/tmp/profiles"')
    assert f"(line {env_line}) and in ConfigMap sglang-env (line {cm_line})" in r.stderr
    assert "the env: item is the one that takes effect" in r.stderr
    assert f.read_text() == SGLANG_CM
    for args in (("--in", "env"), ()):
        r = record(run, "SGLANG_TORCH_PROFILER_DIR=/y", *args)
        assert r.exit_code == 0, r.stderr
        assert container_env(f.read_text())["SGLANG_TORCH_PROFILER_DIR"] == "/y"
        assert 'SGLANG_TORCH_PROFILER_DIR: "/tmp/profiles"' in f.read_text()
        assert run("revert", "--perf-only", "--why", "x").exit_code == 0
        assert f.read_bytes() == SGLANG_CM.encode()


def test_in_env_over_a_configmap_only_knob_is_refused(ws):
    run, f = ws
    r = record(run, "SGLANG_ENABLE_TORCH_COMPILE=1", "--in", "env")
    assert r.exit_code == 1 and "is set in ConfigMap sglang-env (line 6)" in r.stderr, r.stderr
    assert f.read_text() == SGLANG_CM
    r = record(run, "SGLANG_ENABLE_TORCH_COMPILE=1", "--in", "configmap")
    assert r.exit_code == 0, r.stderr
    assert '  SGLANG_ENABLE_TORCH_COMPILE: "1"' in f.read_text().splitlines()


def test_a_configmap_in_another_file_takes_in_env_not_in_configmap(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", str(root), "--root", f"tmp={tmp_path}").exit_code == 0
    f = tmp_path / "chatqna.yaml"
    f.write_text(ELSEWHERE)
    C = ["-C", str(root)]
    assert ledger(*C, "target", "add", "v", str(f), "--format", "k8s",
                  "--container", "vllm").exit_code == 0
    rec = ("record", "knob", "v", "VLLM_USE_V1=1", "--class", "perf", "--title", "t")
    r = ledger(*C, *rec)
    assert r.exit_code == 1 and "--in env" in r.stderr, r.stderr
    r = ledger(*C, *rec, "--in", "configmap")
    assert r.exit_code == 1 and "none of them is in this file" in r.stderr, r.stderr
    assert f.read_text() == ELSEWHERE
    r = ledger(*C, *rec, "--in", "env")
    assert r.exit_code == 0, r.stderr
    assert ledger(*C, "revert", "--perf-only", "--why", "x").exit_code == 0
    assert f.read_bytes() == ELSEWHERE.encode()


@pytest.mark.parametrize(("args", "status"), [(("X=1", "--in", "foo"), 1),
                                              (("X", "--unset", "--in", "env"), 2)])
def test_a_bad_in_is_an_error(ws, args, status):
    """A bad value is bad input (1); --in with --unset a command line that makes no sense
    (2, as --string with --unset)."""
    run, f = ws
    r = record(run, *args)
    assert r.exit_code == status and r.stderr.startswith("error:"), (r.exit_code, r.stderr)
    assert f.read_text() == SGLANG_CM


@pytest.mark.parametrize("into", ["env", "configmap"])
def test_restore_puts_the_knob_back_where_in_put_it(ws, into):
    run, f = ws
    assert record(run, "SGLANG_DISABLE_CUDNN_CHECK=1", "--in", into).exit_code == 0
    recorded = f.read_bytes()
    assert run("revert", "--perf-only", "--why", "x").exit_code == 0
    r = run("restore", "--perf-only")
    assert r.exit_code == 0, r.stderr
    assert f.read_bytes() == recorded


# Two ConfigMaps of the file feed the container (a shared tuning map, then a per-model
# one, as operators split SGLang's env): the refusal names each and --in configmap:NAME
# picks one (issue 50).
TWO_MAPS = SGLANG_CM.replace("""\
  SGLANG_TORCH_PROFILER_DIR: "/tmp/profiles"
""", """\
  SGLANG_TORCH_PROFILER_DIR: "/tmp/profiles"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: sglang-tuning
data:
  SGLANG_SET_CPU_AFFINITY: "1"
""", 1).replace("""\
            - configMapRef:
                name: sglang-env
""", """\
            - configMapRef:
                name: sglang-env
            - configMapRef:
                name: sglang-tuning
""")


@pytest.fixture
def two(tmp_path, ledger):
    return workspace(tmp_path, ledger, TWO_MAPS)


def test_several_configmaps_are_named_and_configmap_name_picks_one(two):
    run, f = two
    r = record(run, "SGLANG_DISABLE_CUDNN_CHECK=1")
    assert r.exit_code == 1 and str(f) in r.stderr
    data = [k for k, ln in enumerate(TWO_MAPS.splitlines(), 1) if ln.strip() == "data:"]
    assert f"ConfigMap sglang-env (line {data[0]})" in r.stderr
    assert f"ConfigMap sglang-tuning (line {data[1]})" in r.stderr
    assert "--in configmap:sglang-env or --in configmap:sglang-tuning" in r.stderr
    r = record(run, "SGLANG_DISABLE_CUDNN_CHECK=1", "--in", "configmap")
    assert r.exit_code == 1 and "name one with --in configmap:sglang-env" in r.stderr
    assert f.read_text() == TWO_MAPS
    r = record(run, "SGLANG_DISABLE_CUDNN_CHECK=1", "--in", "configmap:sglang-tuning")
    assert r.exit_code == 0, r.stderr
    assert '  SGLANG_SET_CPU_AFFINITY: "1"\n  SGLANG_DISABLE_CUDNN_CHECK: "1"\n' in f.read_text()
    assert container_env_two(f.read_text())["SGLANG_DISABLE_CUDNN_CHECK"] == "1"
    r = record(run, "SGLANG_X=1", "--in", "configmap:other")
    assert r.exit_code == 1 and "none of them in this file is other" in r.stderr
    assert run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert f.read_text() == TWO_MAPS


def container_env_two(text: str) -> dict[str, str]:
    docs = list(yaml.safe_load_all(text))
    env: dict[str, str] = {}
    for d in docs:  # envFrom order: sglang-env, then sglang-tuning (later wins)
        if d["kind"] == "ConfigMap":
            env.update(d["data"])
    return env
