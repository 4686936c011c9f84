"""Generated per-release catalogs: the generator on source fixtures shaped like SGLang's and
vLLM's files, the committed releases' coverage, and the version-aware checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from envknobs.catalog_release import bundled_releases
from envknobs.catalog_release import load_release
from envknobs.catalog_release import release_default
from envknobs.catalog_release import release_warnings
from envknobs.catalogs.generate import dump_catalog
from envknobs.catalogs.generate import main
from envknobs.catalogs.generate import release_catalog
from envknobs.registry import KnobError

FIXTURES = Path(__file__).parent / "catalog_src"


@pytest.mark.parametrize("engine,version", [("sglang", "0.5.99"), ("vllm", "0.99.0")])
def test_generator_reproduces_the_committed_fixture_bytes(tmp_path, engine, version):
    assert main([f"--{engine}", str(FIXTURES / engine), "--out", str(tmp_path)]) == 0
    out = tmp_path / f"{engine}-{version}.yaml"
    assert out.read_bytes() == (FIXTURES / out.name).read_bytes()
    assert dump_catalog(*release_catalog(engine, FIXTURES / engine)) == out.read_text()


def test_generator_reads_types_defaults_choices_aliases_and_deprecations():
    _, sg = release_catalog("sglang", FIXTURES / "sglang")
    flags = {f["name"]: f for f in sg["flags"]}
    assert flags["--speculative-algorithm"]["choices"] == ["EAGLE", "NGRAM"]
    assert flags["--speculative-algorithm"]["aliases"] == ["--speculative-algo-name"]
    assert flags["--radix-eviction-policy"]["choices"] == ["lru", "lfu"]  # via a module name
    assert flags["--enable-dp-attention"]["deprecated"] == "--attn-dp-size"
    assert "--internal" not in flags  # no_cli
    removed = {r["name"]: r for r in sg["removed"]}
    assert removed["SGLANG_OLD_CHUNK"]["replacement"] == "SGLANG_NEW_CHUNK"
    _, vl = release_catalog("vllm", FIXTURES / "vllm")
    vflags = {f["name"]: f for f in vl["flags"]}
    assert vflags["--gpu-memory-utilization"]["default"] == 0.9  # from CacheConfig's Field
    assert vflags["--gpu-memory-utilization"]["max"] == 1
    assert vflags["--block-size"]["choices"] == ["1", "8", "16", "32"]  # Literal alias


def test_generator_reads_vllms_frontend_flags():
    """``vllm serve``'s own flags: ``make_arg_parser``'s calls and the frontend dataclasses."""
    _, vl = release_catalog("vllm", FIXTURES / "vllm")
    flags = {f["name"]: f for f in vl["flags"]}
    assert flags["--port"]["type"] == "int" and flags["--port"]["default"] == 8000
    assert flags["--api-key"]["nargs"] == "+"
    assert flags["--uvicorn-log-level"]["choices"][:2] == ["critical", "error"]
    assert flags["--uvicorn-log-level"]["default"] == "info"
    assert flags["--enable-log-deltas"]["default"] is True  # from the in-module base class
    assert flags["--enable-log-deltas"]["negatable"] is True  # BooleanOptionalAction
    assert flags["--allowed-origins"]["nargs"] is None  # json.loads, nargs deleted
    assert flags["--middleware"]["nargs"] is None  # action="append"
    assert flags["--api-key"]["doc"].startswith("If provided, the server will require")
    assert flags["--api-server-count"]["aliases"] == ["-asc"]
    assert flags["--headless"]["default"] is False
    assert flags["--enable-prefix-caching"]["negatable"] is True  # **cache_kwargs: --no-x too
    assert flags["--enforce-eager"]["negatable"] is False  # a literal store_true
    assert "--not-a-serve-flag" not in flags  # another function's parser


def test_committed_vllm_release_knows_its_frontend_flags():
    assert release_default("vllm==0.34.0", "--port") == 8000
    assert release_default("vllm==0.34.0", "--uvicorn-log-level") == "info"
    for flag in ("--api-key", "--host", "--served-model-name", "--api-server-count"):
        assert release_warnings("vllm==0.34.0", flag, "x" if flag != "--api-server-count" else "2") == []
    with pytest.raises(KnobError, match="not a valid int"):
        release_warnings("vllm==0.34.0", "--port", "http")
    _, flags, _ = load_release("vllm", "0.34.0")
    assert flags.get("--enable-prefix-caching").negatable  # `**{**cache_kwargs[...], ...}`
    assert flags.get("--enable-log-deltas").negatable and not flags.get("--headless").negatable
    assert release_warnings("vllm==0.34.0", "--no-enable-prefix-caching", None) == []
    assert "unknown to vLLM 0.34.0" in release_warnings("vllm==0.34.0", "--no-headless", None)[0]
    text = (Path(__file__).parents[2] / "envknobs" / "catalogs" / "releases" / "vllm-0.34.0.yaml").read_text()
    assert text.count('\n  - name: "--') >= 320  # 260 engine flags + 67 frontend ones


def test_committed_releases_cover_env_vars_and_flags(capsys):
    for engine in ("sglang", "vllm"):
        releases = bundled_releases(engine)
        assert len(releases) >= 2
        for version in releases:
            knobs, flags, _ = load_release(engine, version)
            text = (Path(__file__).parents[2] / "envknobs" / "catalogs" / "releases"
                    / f"{engine}-{version}.yaml").read_text()
            typed = sum(1 for k in [*knobs, *flags] if k.type)
            total = len(knobs) + len(flags)
            with capsys.disabled():
                print(f"\n{engine} {version}: {len(knobs)} env vars, {len(flags)} flags, "
                      f"{typed / total:.0%} with type and default field, "
                      f"{sum(k.default is not None for k in [*knobs, *flags])} literal defaults")
            assert typed / total >= 0.95
            assert text.count("    default: ") == total


def test_removed_knob_names_its_replacement_on_current_vllm():
    current = bundled_releases("vllm")[-1]
    warnings = release_warnings(f"vllm=={current}", "VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    assert warnings == [
        f"VLLM_ATTENTION_BACKEND: removed in vLLM {current} (use --attention-backend)"
    ]


def test_renamed_deprecated_prefix_alias_and_unknown():
    assert release_warnings("sglang==0.5.20", "SGLANG_ENABLE_NVTX", "1") == [
        "SGLANG_ENABLE_NVTX: renamed in SGLang 0.5.20 (use SGLANG_ENABLE_NVTX_SCHEDULER)"
    ]
    assert "deprecated in SGLang 0.5.23 (use --enable-prefill-delayer)" in release_warnings(
        "sglang==0.5.23", "SGLANG_SCHEDULER_DECREASE_PREFILL_IDLE", "1")[0]
    assert release_warnings("sglang==0.5.23", "--speculative-algo", "EAGLE") == [
        "--speculative-algo: argparse reads it as --speculative-algorithm in SGLang 0.5.23"
    ]
    assert release_warnings("vllm==0.34.0", "--device-memory-utilization", "0.5") == []
    (unknown,) = release_warnings("sglang==0.5.23", "--cuda-graph-max-bs", "8")
    assert "unknown to SGLang 0.5.23" in unknown and "--cuda-graph-max-bs-decode" in unknown
    assert release_warnings("sglang==0.5.23", "SGLANG_ENABLE_JIT_DEEPGEMM", "1") == []


def test_each_engines_bool_grammar():
    with pytest.raises(KnobError, match="not a valid int.*as vLLM 0.34.0 reads it"):
        release_warnings("vllm==0.34.0", "VLLM_BATCH_INVARIANT", "yes")  # bool(int(...))
    assert release_warnings("vllm==0.34.0", "VLLM_BATCH_INVARIANT", "1") == []
    assert release_warnings("sglang==0.5.23", "SGLANG_ENABLE_TORCH_INFERENCE_MODE", "yes") == []
    with pytest.raises(KnobError, match="above the maximum 1"):
        release_warnings("vllm==0.34.0", "--gpu-memory-utilization", "1.5")


def test_defaults_from_the_release():
    assert release_default("vllm==0.34.0", "VLLM_BATCH_INVARIANT") == 0
    assert release_default("sglang==0.5.23", "--radix-eviction-policy") == "lru"
