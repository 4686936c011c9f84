"""Container addresses on every manifest shape: each suggested address selects exactly its container."""

from __future__ import annotations

import re

import pytest

from envknobs.formats import FormatError
from envknobs.formats import get_format
from envknobs.formats.yaml.containers import ContainerAmbiguous
from envknobs.formats.yaml.k8s import K8sFormat

from tests.envknobs.k8s_shapes import LWS
from tests.envknobs.k8s_shapes import LWS_PD
from tests.envknobs.k8s_shapes import NO_CONTAINERS
from tests.envknobs.k8s_shapes import OME_PD
from tests.envknobs.k8s_shapes import OME_SIMPLE
from tests.envknobs.k8s_shapes import RBG_V1
from tests.envknobs.k8s_shapes import RBG_V2
from tests.envknobs.k8s_shapes import SHAPES
from tests.envknobs.k8s_shapes import TWINS

ADDRESS_LINE = re.compile(r"^  (\S+)\s+\(line (\d+): ", re.M)


def every(text: str):
    return K8sFormat("x").containers(text)


def selected(text: str, address: str):
    """(doc, path) of the container an address selects."""
    found = get_format("k8s", container=address)._locate(text).found  # type: ignore[attr-defined]
    return found.doc, found.path


def suggested(error: FormatError) -> list[tuple[str, int]]:
    return [(a, int(n)) for a, n in ADDRESS_LINE.findall(str(error))]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_listed_address_selects_exactly_its_container(shape: str) -> None:
    text = SHAPES[shape]
    containers = every(text)
    assert containers
    seen = set()
    for c in containers:
        assert selected(text, c.address) == (c.doc, c.path), c.address
        assert selected(text, c.path_address) == (c.doc, c.path)
        assert text.splitlines()[c.line - 1].strip().lstrip("- ").startswith(
            ("name:", "image:")
        )
        seen.add((c.doc, c.path))
    assert len(seen) == len(containers)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_ambiguity_suggests_addresses_that_work(shape: str) -> None:
    text = SHAPES[shape]
    containers = every(text)
    names = {c.name for c in containers if c.name}
    for name in names:
        same = [c for c in containers if c.name == name]
        if len(same) == 1:
            assert selected(text, name) == (same[0].doc, same[0].path)
            continue
        with pytest.raises(ContainerAmbiguous) as ei:
            get_format("k8s", container=name).parse(text)
        listed = suggested(ei.value)
        assert len(listed) == len(same)
        picked = {selected(text, address) for address, _ in listed}
        assert picked == {(c.doc, c.path) for c in same}
        for (address, line), c in zip(listed, same):
            assert line == c.line
            assert address != name


def test_lws_leader_and_worker_by_name_and_by_role() -> None:
    assert [c.address for c in every(LWS)] == ["sglang-leader", "sglang-worker"]
    leader = get_format("k8s", container="sglang-leader")
    # its env, then the flags of its argv (issue 25: `- --tp` / `- "16"` in its command)
    assert leader.parse(LWS) == {"HF_TOKEN": "$HF_TOKEN", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "300",
                                 "--tp-size": "16"}
    for address in ("sglang/sglang-leader", "leader/sglang-leader",
                    "LeaderWorkerSet/sglang/leader/sglang-leader",
                    "sglang/leaderTemplate/sglang-leader"):
        assert selected(LWS, address) == selected(LWS, "sglang-leader")


def test_two_lws_with_same_container_names() -> None:
    assert [c.address for c in every(LWS_PD)] == [
        "prefill/leader/sglang", "prefill/worker/sglang", "decode/leader/sglang",
        "decode/worker/sglang",
    ]
    with pytest.raises(ContainerAmbiguous) as ei:
        get_format("k8s", container="leader/sglang").parse(LWS_PD)
    assert [a for a, _ in suggested(ei.value)] == ["prefill/leader/sglang", "decode/leader/sglang"]
    fmt = get_format("k8s", container="decode/leader/sglang")
    assert fmt.parse(LWS_PD) == {"MODE": "decode", "SGLANG_SM120_MMA_TARGET_CTAS": "512"}


def test_rbg_roles_sharing_a_sidecar_name() -> None:
    with pytest.raises(ContainerAmbiguous) as ei:
        get_format("k8s", container="patio-runtime").parse(RBG_V1)
    listed = suggested(ei.value)
    assert [a for a, _ in listed] == ["prefill/patio-runtime", "decode/patio-runtime"]
    lines = RBG_V1.splitlines()
    assert all(lines[n - 1].strip() == "- name: patio-runtime" for _, n in listed)
    assert get_format("k8s", container="prefill/patio-runtime").parse(RBG_V1) == {
        "PATIO_PORT": "9091"
    }
    assert get_format("k8s", container="decode/sglang").parse(RBG_V1) == {
        "SGLANG_DISAGGREGATION_THREAD_POOL_SIZE": "16"
    }
    # The old advice (WORKLOAD/CONTAINER) is refused again, but now with addresses that work.
    with pytest.raises(ContainerAmbiguous, match="sglang-pd/sglang.*ambiguous"):
        get_format("k8s", container="sglang-pd/sglang").parse(RBG_V1)


def test_rbg_patterns_templates_and_patches() -> None:
    assert [c.address for c in every(RBG_V2)] == [
        "roleTemplates/sglang-base/sglang", "prefill/sglang", "decode/sglang",
        "decode/leader/sglang", "decode/worker/sglang",
    ]
    assert get_format("k8s", container="decode/worker/sglang").parse(RBG_V2) == {
        "ROLE": "worker"
    }
    long = "RoleBasedGroup/pd-lws/decode/leaderTemplatePatch/sglang"
    assert selected(RBG_V2, long) == selected(RBG_V2, "decode/leader/sglang")


def test_ome_runners() -> None:
    assert [c.address for c in every(OME_PD)] == [
        "engine/leader/ome-container", "engine/worker/ome-container",
        "decoder/leader/ome-container", "decoder/worker/ome-container", "router",
    ]
    fmt = get_format("k8s", container="srt-deepseek-pd/decoderConfig/worker/ome-container")
    assert fmt.parse(OME_PD) == {"SGLANG_DISAGGREGATION_THREAD_POOL_SIZE": "16"}
    # A runner without a name is still a container: addressed by its path.
    runners = every(OME_SIMPLE)
    assert [c.address for c in runners] == ["ome-container", "2:spec.engine.runner"]
    assert get_format("k8s", container="2:spec.engine.runner").parse(OME_SIMPLE) == {
        "SGLANG_ENABLE_METRICS": "1"
    }


def test_new_env_list_in_a_runner_follows_the_file_style() -> None:
    fmt = get_format("k8s", container="ome-container")
    out = fmt.set(OME_SIMPLE, "SGLANG_X", "1")
    assert (
        "        - sglang.launch_server\n"
        "      env:\n"
        "        - name: SGLANG_X\n"
        '          value: "1"\n'
        "---\n"
    ) in out
    assert fmt.unset(out, "SGLANG_X") == OME_SIMPLE


def test_identical_documents_need_path_addresses() -> None:
    assert [c.address for c in every(TWINS)] == [
        "1:spec.template.spec.containers[0]", "2:spec.template.spec.containers[0]"
    ]
    second = get_format("k8s", container="2:spec.template.spec.containers[0]")
    out = second.set(TWINS, "A", "2")
    assert out.split("---")[0] == TWINS.split("---")[0]
    assert get_format("k8s", container="1:spec.template.spec.containers[0]").parse(out) == {"A": "1"}


def test_init_containers_are_selectable() -> None:
    from tests.envknobs.k8s_shapes import DEPLOYMENTS

    fmt = get_format("k8s", container="fetch-model")
    assert fmt.parse(DEPLOYMENTS) == {"MODEL_URL": "s3://models/llama3"}
    assert "init container" in every(DEPLOYMENTS)[0].where


def test_a_file_without_containers_says_what_it_holds() -> None:
    with pytest.raises(FormatError) as ei:
        get_format("k8s", container="sglang").parse(NO_CONTAINERS)
    msg = str(ei.value)
    assert "no containers in the file" in msg
    assert "document 1 (line 1): Service/sglang-router (spec keys: ports, selector)" in msg
    assert "document 2 (line 11): ConfigMap/cfg (keys: apiVersion, kind, metadata, data)" in msg


@pytest.mark.parametrize(
    "address", ["a//b", "a b", "0:spec.containers[0]", "1:spec..x", "1:[x]"]
)
def test_malformed_addresses_are_refused(address: str) -> None:
    with pytest.raises(FormatError, match="invalid"):
        get_format("k8s", container=address)


def test_not_found_lists_every_container_with_its_address() -> None:
    with pytest.raises(FormatError) as ei:
        get_format("k8s", container="decode/sglang-leader").parse(LWS)
    lines = LWS.splitlines()
    listed = suggested(ei.value)
    assert [a for a, _ in listed] == ["sglang-leader", "sglang-worker"]
    assert [lines[n - 1].strip() for _, n in listed] == [
        "- name: sglang-leader", "- name: sglang-worker"
    ]
