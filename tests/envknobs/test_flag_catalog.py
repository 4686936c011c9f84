"""The SGLang and vLLM flag catalogs: server arguments declared as knobs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ruamel.yaml import YAML

from envknobs.catalog import CatalogError
from envknobs.catalog import bundled_catalogs
from envknobs.catalog import bundled_flag_catalogs
from envknobs.catalog import check_assignment
from envknobs.catalog import check_flag_assignment
from envknobs.catalog import default_registry
from envknobs.catalog import flag_registries
from envknobs.catalog import load_flag_catalog
from envknobs.catalog import lookup_flag
from envknobs.flags import Flag
from envknobs.flags import canonical_flag
from envknobs.flags import normalize_flag
from envknobs.registry import KnobError


def test_catalogs_hold_enough_real_server_arguments() -> None:
    registries = flag_registries()
    assert len(registries["sglang"]) >= 40 and len(registries["vllm"]) >= 20
    for engine, registry in registries.items():
        for flag in registry:
            assert flag.engine == engine and flag.name.startswith("--")
            assert flag.class_hint in ("perf", "bugfix") and flag.doc and "\n" not in flag.doc


def test_flag_catalogs_are_apart_from_env_catalogs() -> None:
    assert {p.name for p in bundled_flag_catalogs()} == {"sglang_flags.yaml", "vllm_flags.yaml"}
    assert not set(bundled_catalogs()) & set(bundled_flag_catalogs())
    assert "--mem-fraction-static" not in default_registry()


@pytest.mark.parametrize("path", bundled_flag_catalogs(), ids=lambda p: p.name)
def test_flag_catalogs_read_the_same_in_yaml_11_and_12(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert yaml.safe_load(text) == YAML(typ="safe", pure=True).load(text)


@pytest.mark.parametrize(
    "spelling",
    ["--mem-fraction-static", "mem-fraction-static", "mem_fraction_static", "--mem_fraction_static"],
)
def test_lookup_normalizes_dashes_and_underscores(spelling: str) -> None:
    # The --config YAML key and the launch-line flag are one knob.
    flag = lookup_flag(spelling)
    assert flag is not None and flag.name == "--mem-fraction-static" and flag.engine == "sglang"
    assert canonical_flag(spelling) == "--mem-fraction-static"
    assert normalize_flag(spelling) == "mem-fraction-static"


def test_aliases_and_engines() -> None:
    assert lookup_flag("--tp").name == "--tp-size"
    assert lookup_flag("--tensor-parallel-size").name == "--tp-size"  # sglang first
    assert lookup_flag("--tensor-parallel-size", "vllm").name == "--tensor-parallel-size"
    assert lookup_flag("-tp", "vllm").name == "--tensor-parallel-size"
    assert lookup_flag("--gpu-memory-utilization").engine == "vllm"
    assert lookup_flag("--gpu-memory-utilization", "sglang") is None
    assert lookup_flag("--no-such-flag") is None
    assert lookup_flag("--x", "no-such-engine") is None


def test_values_are_validated_like_env_knobs() -> None:
    registry = default_registry()
    assert check_assignment(registry, "--cuda-graph-max-bs", "256") == []
    assert check_assignment(registry, "--cuda-graph-bs", "1 2 4 8") == []
    assert check_assignment(registry, "--disable-radix-cache", "true") == []
    assert check_assignment(registry, "--enable-prefix-caching", "false") == []  # --no- form
    for flag, value, rule in [
        ("--cuda-graph-max-bs", "lots", "not a valid int"),
        ("--mem-fraction-static", "1.5", "above the maximum"),
        ("--cuda-graph-bs", "1 x", "not a valid int"),
        ("--disaggregation-mode", "both", "must be one of"),
        ("--disable-radix-cache", "false", "remove it with --unset"),
        ("--port", "1\n2", "newline"),
    ]:
        with pytest.raises(KnobError, match=rule):
            check_assignment(registry, flag, value)
    [warning] = check_flag_assignment("--cuda-graph-max-b", "256")
    assert warning.startswith("unknown flag --cuda-graph-max-b (closest known: --cuda-graph-max-bs")
    assert check_flag_assignment("--anything", None) == []
    with pytest.raises(KnobError, match="invalid flag"):
        check_flag_assignment("--bad flag", "1")


def test_flag_declarations_are_checked(tmp_path: Path) -> None:
    with pytest.raises(KnobError, match="only a bool flag can be negatable"):
        Flag(name="--x", type="int", negatable=True)
    with pytest.raises(KnobError, match="spelled with '--'"):
        Flag(name="-x", type="int")
    bad = tmp_path / "bad_flags.yaml"
    bad.write_text("engine: e\nflags:\n  - {name: --a, type: int}\n  - {name: --b, type: int, aliases: [--a]}\n")
    with pytest.raises(CatalogError, match=r"bad_flags.yaml:4: flag --b: 'a' already names --a"):
        load_flag_catalog(bad)
    bad.write_text("flags: []\n")
    with pytest.raises(CatalogError, match="names its 'engine'"):
        load_flag_catalog(bad)
