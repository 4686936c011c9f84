"""Engine knobs: declaration, parsing, and the CLI's refusal of bad values."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from engine.knobs import REGISTRY
from engine.knobs import EngineKnobs
from engine.knobs import KnobError
from engine.knobs import load_knobs

REQUIRED = ("ENGINE_DTYPE", "ENGINE_DECODE_TARGET_CTAS", "ENGINE_MAX_RUNNING_REQUESTS",
            "ENGINE_PAGE_SIZE", "ENGINE_PREFILL_CHUNK_TOKENS", "ENGINE_NUM_THREADS",
            "ENGINE_INFLIGHT_TIMEOUT_S", "ENGINE_TRANSFER_DROP_PROB")


def test_required_knobs_are_declared_with_docs_and_matching_defaults():
    for name in REQUIRED:
        assert REGISTRY[name].doc
    assert REGISTRY["ENGINE_DECODE_TARGET_CTAS"].class_hint == "perf"
    assert REGISTRY["ENGINE_INFLIGHT_TIMEOUT_S"].class_hint == "bugfix"
    # The dataclass defaults and the registry defaults are one truth.
    assert load_knobs({}) == EngineKnobs()
    assert set(EngineKnobs().as_env()) == {k.name for k in REGISTRY}


def test_values_are_parsed_from_the_environment():
    k = load_knobs({"ENGINE_DTYPE": "bfloat16", "ENGINE_PAGE_SIZE": "8",
                    "ENGINE_INFLIGHT_TIMEOUT_S": "2.5", "UNRELATED": "x"})
    assert (k.dtype, k.page_size, k.inflight_timeout_s) == ("bfloat16", 8, 2.5)
    assert dataclasses.replace(k, page_size=16) != k


@pytest.mark.parametrize("name,value", [("ENGINE_PAGE_SIZE", "0"), ("ENGINE_PAGE_SIZE", "x"),
                                        ("ENGINE_DTYPE", "fp8"),
                                        ("ENGINE_TRANSFER_DROP_PROB", "1.5"),
                                        ("ENGINE_INFLIGHT_TIMEOUT_S", "nan")])
def test_invalid_values_name_knob_and_value(name, value):
    with pytest.raises(KnobError) as e:
        load_knobs({name: value})
    assert name in str(e.value) and value in str(e.value)


def test_cli_refuses_bad_knob_with_exit_1(tmp_path):
    env = {"ENGINE_DECODE_TARGET_CTAS": "-3", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "engine", "generate", "--preset", "tiny",
                        "--prompt", "hi"], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path), check=False)
    assert r.returncode == 1
    assert r.stderr.startswith("error: ENGINE_DECODE_TARGET_CTAS='-3'")


def test_importing_knobs_does_not_import_torch():
    code = "import sys, engine.knobs, engine.tools.cli; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


def test_serve_scripts_export_only_declared_valid_knobs():
    import re
    from pathlib import Path

    scripts = sorted((Path(__file__).resolve().parents[2] / "engine" / "scripts").glob("*.sh"))
    assert [s.name for s in scripts] == ["serve_decode.sh", "serve_prefill.sh",
                                         "serve_router.sh"]
    for script in scripts:
        text = script.read_text()
        exports = re.findall(r"^export (ENGINE_\w+)=(\S+)$", text, flags=re.MULTILINE)
        assert exports, script
        for name, value in exports:
            REGISTRY[name].parse(value)  # declared, and the value is valid
        assert re.search(r"^exec .* -m engine serve --role ", text, flags=re.MULTILINE)
