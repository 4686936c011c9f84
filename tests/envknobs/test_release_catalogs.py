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
from envknobs.timeline import release_catalog as release_data

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


def test_generator_reads_deprecations_the_way_each_engine_writes_them():
    """SGLang's ``Deprecated*Action(new_flag=...)`` (a store-true one is still a switch);
    vLLM's ``_X_DEPRECATION_MESSAGE`` constants (the flag first, a replacement if named)."""
    _, sg = release_catalog("sglang", FIXTURES / "sglang")
    flags = {f["name"]: f for f in sg["flags"]}
    assert flags["--disable-cuda-graph"]["type"] == "bool"
    assert flags["--disable-cuda-graph"]["deprecated"] == "--cuda-graph-backend-{decode,prefill}=disabled"
    _, vl = release_catalog("vllm", FIXTURES / "vllm")
    vflags = {f["name"]: f for f in vl["flags"]}
    assert vflags["--log-config-file"]["deprecated"] == "--logging-config.pylogging_config_file"
    assert vflags["--disable-cascade-attn"]["deprecated"] == ""
    assert vflags["--disable-cascade-attn"]["deprecated_note"].startswith("--disable-cascade-attn is "
                                                                         "deprecated and has no effect")
    assert "deprecated" not in vflags["--enforce-eager"]
    assert release_warnings("vllm==0.34.0", "--log-config-file", "x.json") == [
        "--log-config-file: deprecated in vLLM 0.34.0 (use --logging-config.pylogging_config_file)"]
    (cascade,) = release_warnings("vllm==0.34.0", "--disable-cascade-attn", None)
    assert cascade.startswith("--disable-cascade-attn: deprecated in vLLM 0.34.0 (--disable-cascade-attn "
                              "is deprecated and has no effect")
    assert release_warnings("sglang==0.5.23", "--enable-dp-attention", "true") == [
        "--enable-dp-attention: deprecated in SGLang 0.5.23 (use --attn-dp-size <dp-size>)"]
    assert release_warnings("sglang==0.5.23", "--disable-radix-cache", "true") == []


def test_generator_reads_each_engines_bool_words_and_defaults():
    """SGLang's ``EnvBool.parse`` word lists; vLLM's ``.lower() in ("true", "1")`` tuples
    (also inside an ``or``), with the default that tuple makes of ``os.getenv(X, "False")``."""
    _, sg = release_catalog("sglang", FIXTURES / "sglang")
    assert sg["bool_words"] == {"true": ["true", "1", "yes", "y"], "false": ["false", "0", "no", "n"]}
    _, vl = release_catalog("vllm", FIXTURES / "vllm")
    knobs = {k["name"]: k for k in vl["knobs"]}
    assert "bool_words" not in vl
    assert knobs["VLLM_DISABLE_PYNCCL"]["default"] is False  # "False".lower() is not in it
    assert knobs["VLLM_DISABLE_PYNCCL"]["true_words"] == ["true", "1"]
    assert knobs["VLLM_USE_PRECOMPILED"]["type"] == "bool"  # `... in (...) or bool(...)`
    assert knobs["VLLM_USE_PRECOMPILED"]["default"] is False  # its own getenv, not the other
    assert knobs["VLLM_BATCH_INVARIANT"].get("true_words") is None  # bool(int(...)): an int


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
    assert release_default("vllm==0.30.0", "--port") == 8000  # launchers/cli_args.py there
    assert release_warnings("vllm==0.30.0", "--api-server-count", "2") == []
    for flag in ("--api-key", "--host", "--served-model-name", "--api-server-count"):
        assert release_warnings("vllm==0.34.0", flag, "x" if flag != "--api-server-count" else "2") == []
    with pytest.raises(KnobError, match="not a valid int"):
        release_warnings("vllm==0.34.0", "--port", "http")
    _, flags, _ = load_release("vllm", "0.34.0")
    assert flags.get("--enable-prefix-caching").negatable  # `**{**cache_kwargs[...], ...}`
    assert flags.get("--enable-log-deltas").negatable and not flags.get("--headless").negatable
    assert release_warnings("vllm==0.34.0", "--no-enable-prefix-caching", None) == []
    assert "unknown to vLLM 0.34.0" in release_warnings("vllm==0.34.0", "--no-headless", None)[0]
    assert len(release_data("vllm", "0.34.0")["flags"]) >= 320  # 260 engine flags + 67 frontend ones


def test_committed_releases_cover_env_vars_and_flags(capsys):
    for engine in ("sglang", "vllm"):
        releases = bundled_releases(engine)
        assert len(releases) >= 2
        for version in releases:
            knobs, flags, _ = load_release(engine, version)
            data = release_data(engine, version)
            typed = sum(1 for k in [*knobs, *flags] if k.type)
            total = len(knobs) + len(flags)
            with capsys.disabled():
                print(f"\n{engine} {version}: {len(knobs)} env vars, {len(flags)} flags, "
                      f"{typed / total:.0%} with type and default field, "
                      f"{sum(k.default is not None for k in [*knobs, *flags])} literal defaults")
            assert typed / total >= 0.95
            assert sum("default" in item for item in [*data["knobs"], *data["flags"]]) == total


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
    assert release_warnings("sglang==0.5.23", "--cuda-graph-max-bs", "8") == [
        "--cuda-graph-max-bs: split in SGLang 0.5.23 "
        "(use --cuda-graph-max-bs-decode / --cuda-graph-max-bs-prefill)"]  # the overlay says so
    (ambiguous,) = release_warnings("sglang==0.5.23", "--cuda-graph-max", "8")
    assert "ambiguous to SGLang 0.5.23's argparse" in ambiguous
    assert "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" in ambiguous
    (unknown,) = release_warnings("vllm==0.34.0", "--cuda-graph-max-bs", "8")
    assert "unknown to vLLM 0.34.0" in unknown
    assert release_warnings("sglang==0.5.23", "SGLANG_ENABLE_JIT_DEEPGEMM", "1") == []


def test_each_engines_bool_grammar():
    with pytest.raises(KnobError, match="not a valid int.*as vLLM 0.34.0 reads it"):
        release_warnings("vllm==0.34.0", "VLLM_BATCH_INVARIANT", "yes")  # bool(int(...))
    assert release_warnings("vllm==0.34.0", "VLLM_BATCH_INVARIANT", "1") == []
    assert release_warnings("sglang==0.5.23", "SGLANG_ENABLE_TORCH_INFERENCE_MODE", "yes") == []
    assert release_warnings("sglang==0.5.23", "SGLANG_ENABLE_TORCH_INFERENCE_MODE", "Y") == []
    with pytest.raises(KnobError, match="'on': not a boolean the engine takes.*as SGLang 0.5.23"):
        release_warnings("sglang==0.5.23", "SGLANG_ENABLE_TORCH_INFERENCE_MODE", "on")  # EnvBool raises
    # vLLM's `.lower() in ("true", "1")`: `yes` would be read as false, so it is refused
    with pytest.raises(KnobError, match="'yes': read as false.*as vLLM 0.34.0 reads it"):
        release_warnings("vllm==0.34.0", "VLLM_DISABLE_PYNCCL", "yes")
    for word in ("True", "1", "0", "false"):
        assert release_warnings("vllm==0.34.0", "VLLM_DISABLE_PYNCCL", word) == []
    assert release_default("vllm==0.34.0", "VLLM_DISABLE_PYNCCL") is False
    with pytest.raises(KnobError, match="above the maximum 1"):
        release_warnings("vllm==0.34.0", "--gpu-memory-utilization", "1.5")


def test_defaults_from_the_release():
    assert release_default("vllm==0.34.0", "VLLM_BATCH_INVARIANT") == 0
    assert release_default("sglang==0.5.23", "--radix-eviction-policy") == "lru"
