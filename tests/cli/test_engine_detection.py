"""The engine release a target runs, when ledger.yaml does not name it for the target: the
one the file names itself (an image tag, a pip pin, ``pip show`` output), else the
workspace's top-level ``engine:``."""

from __future__ import annotations

from envknobs.catalog_release import detect_engines
from tests.envknobs.bash_fixtures import DOCKER_VLLM
from tests.envknobs.bash_fixtures import PD_SGLANG

DOCKER_VLLM_034 = DOCKER_VLLM.replace("vllm/vllm-openai:latest", "vllm/vllm-openai:v0.34.0")


def test_detect_engines_reads_tags_pins_and_pip_show_and_guesses_nothing_else():
    assert detect_engines(DOCKER_VLLM_034) == [("vllm==0.34.0", 12)]
    assert detect_engines(DOCKER_VLLM) == []  # :latest is no release
    compose = "services:\n  sglang:\n    image: lmsysorg/sglang:v0.5.23-cu129\n"
    assert detect_engines(compose) == [("sglang==0.5.23", 3)]
    assert detect_engines('pip install "sglang[all]==0.5.23" sglang-router==0.2.1\n') == \
        [("sglang==0.5.23", 1)]
    assert detect_engines("# $ pip show vllm\n# Name: vllm\n# Version: 0.30.0\n") == [("vllm==0.30.0", 2)]
    for text in ("image: my-sglang:1.0.0\n", "image: lmsysorg/sglang-router:v0.2.1\n",
                 "pip install vllm-flash-attn==2.6.1\n", "pip install 'vllm>=0.30.0'\n"):
        assert detect_engines(text) == [], text


def _workspace(tmp_path, ledger, **scripts):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"t={tmp_path}").exit_code == 0
    for name, text in scripts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        assert ledger("-C", root, "target", "add", name, path, "--format", "bash").exit_code == 0
    return root


def test_an_image_tag_in_the_file_is_its_release_and_doctor_lists_every_target(tmp_path, ledger):
    root = _workspace(tmp_path, ledger, docker=DOCKER_VLLM_034, pd=PD_SGLANG)
    assert ledger("-C", root, "target", "show", "docker", "--json").json()["engine"] == "vllm==0.34.0"
    r = ledger("-C", root, "record", "knob", "docker", "VLLM_USE_V1=0", "--class", "perf",
               "--title", "v0")
    assert r.exit_code == 0, r.stderr
    assert "VLLM_USE_V1: removed in vLLM 0.34.0" in r.stderr
    config = root / "ledger.yaml"
    config.write_text(config.read_text().replace("version: 1\n", "version: 1\nengine: sglang==0.5.23\n", 1))
    assert ledger("-C", root, "target", "show", "pd", "--json").json()["engine"] == "sglang==0.5.23"
    assert ledger("-C", root, "target", "show", "docker", "--json").json()["engine"] == "vllm==0.34.0"
    assert ledger("-C", root, "target", "set", "pd", "--health-command", "true").exit_code == 0
    assert "\nengine: sglang==0.5.23\n" in config.read_text()  # kept when ledger.yaml is rewritten
    problems = [f["problem"] for f in ledger("-C", root, "doctor", "--json").json()["findings"]
                if f["check"] == "engine"]
    assert any(p.startswith("docker (vllm==0.34.0): VLLM_ATTENTION_BACKEND: removed in vLLM 0.34.0 "
                            "(use --attention-backend)") for p in problems), problems
    assert any(p.startswith("pd (sglang==0.5.23): ") for p in problems), problems


def test_a_file_naming_two_releases_names_none_and_doctor_says_where(tmp_path, ledger):
    text = DOCKER_VLLM_034.replace("# vLLM in a container.\n",
                                   "# vLLM in a container.\n# was vllm/vllm-openai:v0.30.0\n")
    root = _workspace(tmp_path, ledger, docker=text)
    assert ledger("-C", root, "target", "show", "docker", "--json").json()["engine"] is None
    problems = [f["problem"] for f in ledger("-C", root, "doctor", "--json").json()["findings"]
                if f["check"] == "engine"]
    assert problems == ["docker: names several engine releases (vllm==0.30.0 at line 3, "
                        "vllm==0.34.0 at line 13): none is used; declare one with `engine:` "
                        "for the target in ledger.yaml"]
    config = root / "ledger.yaml"
    config.write_text(config.read_text().replace("format: bash\n", "format: bash\n    engine: vllm==0.34.0\n", 1))
    assert ledger("-C", root, "target", "show", "docker", "--json").json()["engine"] == "vllm==0.34.0"


def test_a_bad_workspace_engine_is_refused_naming_the_line(tmp_path, ledger):
    root = _workspace(tmp_path, ledger)
    config = root / "ledger.yaml"
    config.write_text(config.read_text().replace("version: 1\n", "version: 1\nengine: vllm-0.34\n", 1))
    r = ledger("-C", root, "status")
    assert r.exit_code == 1 and "ledger.yaml:3" in r.stderr and "vllm==X" in r.stderr
