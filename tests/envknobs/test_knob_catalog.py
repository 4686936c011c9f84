"""Knob catalogs: the bundled data, loading errors, and value checks."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from envknobs.catalog import CatalogError
from envknobs.catalog import bundled_catalogs
from envknobs.catalog import check_assignment
from envknobs.catalog import default_registry
from envknobs.catalog import layered
from envknobs.catalog import load_catalog
from envknobs.registry import Knob
from envknobs.registry import KnobError
from envknobs.registry import Registry

CATALOGS = Path(__file__).resolve().parents[2] / "envknobs" / "catalogs"


@pytest.fixture
def sglang() -> Registry:
    return load_catalog(CATALOGS / "sglang.yaml")


def test_sglang_catalog_has_the_real_knobs(sglang: Registry) -> None:
    assert len(sglang) >= 30
    assert all(k.name.startswith("SGLANG_") for k in sglang)
    assert all(k.doc and k.class_hint in ("perf", "bugfix") for k in sglang)
    ctas = sglang["SGLANG_SM120_MMA_TARGET_CTAS"]
    assert (ctas.type, ctas.default, ctas.class_hint) == ("int", 256, "perf")
    waiting = sglang["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"]
    assert (waiting.type, waiting.default, waiting.class_hint, waiting.unit) == (
        "int",
        300,
        "bugfix",
        "s",
    )
    assert sglang["SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL"].default == 5.0
    assert sglang["SGLANG_DISAGG_PREFILL_EARLY_SEND_CACHED_PREFIX"].default is True


@pytest.mark.parametrize("path", bundled_catalogs(), ids=lambda p: p.name)
def test_bundled_catalogs_read_the_same_in_yaml_11_and_12(path: Path) -> None:
    """The fast loader (libyaml, YAML 1.1) and ruamel (1.2) must agree on every field."""
    import yaml

    text = path.read_text()
    assert yaml.load(text, Loader=yaml.CSafeLoader) == YAML(typ="safe", pure=True).load(
        io.StringIO(text)
    )


def test_default_registry_holds_catalogs_and_what_the_caller_adds() -> None:
    from engine.knobs import REGISTRY

    plain = default_registry()
    assert plain is default_registry()  # cached
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in plain and "VLLM_RPC_TIMEOUT" in plain
    assert not any(k.name.startswith("ENGINE_") for k in plain)
    with_engine = default_registry(REGISTRY)
    assert with_engine is default_registry(REGISTRY)
    assert all(with_engine[k.name] == k for k in REGISTRY)


def test_the_ledger_validates_against_the_engine_knobs_too() -> None:
    from ledger.commands.record import knob_registry

    assert "ENGINE_DECODE_TARGET_CTAS" in knob_registry()
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in knob_registry()


def test_later_layers_win() -> None:
    catalog = Registry([Knob("X", "int", 1, class_hint="perf"), Knob("Y", "str")])
    engine = Registry([Knob("X", "int", 2, class_hint="perf", min=0)])
    merged = layered(catalog, engine)
    assert [k.name for k in merged] == ["X", "Y"] and merged["X"].default == 2


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cat.yaml"
    path.write_text(text)
    return path


GOOD_HEAD = "knobs:\n  - name: A_KNOB\n    type: int\n    default: 1\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("knobs: [\n  - a\n", r"cat\.yaml:\d+: invalid YAML"),
        ("engine: x\n", r"cat\.yaml: a catalog is a mapping with a 'knobs' list"),
        (GOOD_HEAD + "  - name: B\n    type: integer\n", r"cat\.yaml:5: knob B: type 'integer'"),
        (GOOD_HEAD + "  - name: 1BAD\n    type: int\n", r"cat\.yaml:5: invalid knob name '1BAD'"),
        (
            GOOD_HEAD + "  - name: C\n    type: int\n    defualt: 3\n",
            r"cat\.yaml:5: unknown field\(s\) defualt",
        ),
        (
            GOOD_HEAD + "  - name: A_KNOB\n    type: int\n",
            r"cat\.yaml:5: knob A_KNOB is declared twice",
        ),
        (
            GOOD_HEAD + "  - name: D\n    type: int\n    default: 0\n    min: 1\n",
            r"cat\.yaml:5: D='0': below",
        ),
        (
            GOOD_HEAD + "  - name: E\n    type: float\n    max: high\n",
            r"cat\.yaml:5: knob E: max must be",
        ),
        (
            GOOD_HEAD + "  - name: F\n    type: bool\n    class_hint: speed\n",
            r"cat\.yaml:5: knob F: class hint",
        ),
    ],
)
def test_bad_catalogs_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        load_catalog(write(tmp_path, text))


def test_missing_catalog_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="nope.yaml: cannot read the catalog"):
        load_catalog(tmp_path / "nope.yaml")


def test_catalog_fields_round_trip(tmp_path: Path) -> None:
    text = (
        "knobs:\n  - name: MODE\n    type: str\n    default: fork\n    choices: [fork, spawn]\n"
        "    class_hint: bugfix\n    unit: ''\n    tags: [liveness]\n    doc: How workers start.\n"
    )
    knob = load_catalog(write(tmp_path, text))["MODE"]
    assert knob == Knob(
        "MODE",
        "str",
        "fork",
        "How workers start.",
        "bugfix",
        None,
        None,
        ("fork", "spawn"),
        "",
        ("liveness",),
    )


def test_check_assignment_warns_on_unknown_knobs_with_closest_names(sglang: Registry) -> None:
    assert check_assignment(sglang, "SGLANG_SM120_MMA_TARGET_CTA", "512") == [
        "unknown knob SGLANG_SM120_MMA_TARGET_CTA (closest known: SGLANG_SM120_MMA_TARGET_CTAS)"
    ]
    assert check_assignment(sglang, "COMPLETELY_OTHER", "1") == [
        "unknown knob COMPLETELY_OTHER (no close match in the catalogs)"
    ]
    assert check_assignment(sglang, "SGLANG_SM120_MMA_TARGET_CTAS", "512") == []
    assert check_assignment(sglang, "SGLANG_SM120_MMA_TARGET_CTAS", None) == []
    assert check_assignment(sglang, "NOT_KNOWN_AT_ALL", None) == []
    assert "empty string" in check_assignment(sglang, "SGLANG_SM120_MMA_TARGET_CTAS", "")[0]


@pytest.mark.parametrize(
    ("knob", "value", "rule"),
    [
        ("SGLANG_SM120_MMA_TARGET_CTAS", "lots", "not a valid int"),
        ("SGLANG_SM120_MMA_TARGET_CTAS", "0", "below the minimum 1"),
        ("SGLANG_INIT_NEW_TOKEN_RATIO", "1.5", "above the maximum 1"),
        ("SGLANG_DISAGG_PREFILL_EARLY_SEND_CACHED_PREFIX", "maybe", "not a boolean"),
    ],
)
def test_check_assignment_refuses_bad_values(
    sglang: Registry, knob: str, value: str, rule: str
) -> None:
    with pytest.raises(KnobError, match=rf"{knob}='{value}': .*{rule}"):
        check_assignment(sglang, knob, value)


def test_check_assignment_refuses_choices_names_and_line_breaks() -> None:
    registry = default_registry()
    with pytest.raises(KnobError, match="must be one of fork, spawn"):
        check_assignment(registry, "VLLM_WORKER_MULTIPROC_METHOD", "forkserver")
    for name in ("A;rm", "1X", "A B"):
        with pytest.raises(KnobError, match="invalid knob name"):
            check_assignment(registry, name, "1")
    with pytest.raises(KnobError, match="newline"):
        check_assignment(registry, "SGLANG_SM120_MMA_TARGET_CTAS", "1\n2")
