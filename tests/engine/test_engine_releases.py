"""The bundled engine's releases: defaults per release, the pin on the launch line, and
the generated catalogs the ledger reads them from (envknobs.catalogs.bundled_engine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.knobs import REGISTRY
from engine.knobs import RELEASE
from engine.knobs import RELEASES
from engine.knobs import KnobError
from engine.knobs import load_knobs
from engine.knobs import release_defaults
from envknobs.catalogs import bundled_engine as engine_catalog

REPO = Path(__file__).resolve().parents[2]


def test_a_release_moves_defaults_and_a_set_knob_keeps_its_value():
    assert load_knobs({}).release == RELEASE == "1.0.0"
    assert load_knobs({}).max_running_requests == 64
    newer = load_knobs({}, "knob-ledger-engine==1.1.0")
    assert (newer.release, newer.max_running_requests, newer.inflight_timeout_s) == (
        "1.1.0", 4, 20.0)
    assert newer.page_size == load_knobs({}).page_size  # what 1.1.0 did not move
    pinned = load_knobs({"ENGINE_MAX_RUNNING_REQUESTS": "64"}, "1.1.0")
    assert pinned.max_running_requests == 64  # a knob set in the script wins over defaults


@pytest.mark.parametrize("pin", ["knob-ledger-engine==9.9.9", "vllm==1.1.0", "1.0"])
def test_a_release_the_engine_does_not_carry_is_refused_naming_those_it_does(pin):
    with pytest.raises(KnobError) as e:
        load_knobs({}, pin)
    assert pin in str(e.value)
    assert "knob-ledger-engine==1.0.0, knob-ledger-engine==1.1.0" in str(e.value)


def test_generated_catalogs_are_this_tree_regenerated_byte_for_byte(tmp_path):
    written = engine_catalog.write_catalogs(REPO, tmp_path / "knob-ledger-engine.json")
    assert written[0].read_bytes() == engine_catalog.TIMELINE.read_bytes(), (
        "the bundled engine's timeline is stale: run python -m envknobs.catalogs.bundled_engine")
    assert engine_catalog.releases() == list(RELEASES)


def test_the_catalogs_hold_what_the_engine_runs_with():
    for version in RELEASES:
        catalog = engine_catalog.load_release(version)
        assert {k.name: k.default for k in catalog} == release_defaults(version)
        assert {k.name for k in catalog} == {k.name for k in REGISTRY}
    assert engine_catalog.moved_defaults("1.0.0", "1.1.0") == [
        ("ENGINE_INFLIGHT_TIMEOUT_S", 30.0, 20.0), ("ENGINE_MAX_RUNNING_REQUESTS", 64, 4)]


def test_the_serve_scripts_pin_the_release_they_run():
    for role in ("prefill", "decode", "router"):
        text = (REPO / "engine" / "scripts" / f"serve_{role}.sh").read_text()
        pins = engine_catalog.detect_pins(text)
        assert [spec for spec, _ in pins] == [f"knob-ledger-engine=={RELEASE}"]
        line = text.splitlines()[pins[0][1] - 1]
        assert line.startswith('exec "$PYTHON" -m engine serve --role ')


def test_the_cli_runs_the_pinned_release_and_refuses_an_unknown_one(tmp_path):
    out = tmp_path / "bench.jsonl"
    base = [sys.executable, "-m", "engine", "bench", "--preset", "tiny", "--concurrency", "2",
            "--num-prompts", "2", "--input-len", "4", "--output-len", "2"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "ENGINE_NUM_THREADS": "1",
           "ENGINE_CPU_KERNELS": "off"}
    r = subprocess.run([*base, "--release", "knob-ledger-engine==1.1.0", "--json", str(out)],
                       env=env, capture_output=True, text=True, cwd=str(tmp_path), check=False)
    assert r.returncode == 0, r.stderr
    row = json.loads(out.read_text().splitlines()[0])
    assert row["engine_release"] == "1.1.0"
    assert row["knobs"]["ENGINE_MAX_RUNNING_REQUESTS"] == 4
    r = subprocess.run([*base, "--release", "knob-ledger-engine==2.0.0"], env=env,
                       capture_output=True, text=True, cwd=str(tmp_path), check=False)
    assert r.returncode == 1
    assert r.stderr.startswith("error: engine release 'knob-ledger-engine==2.0.0': this engine "
                               "carries knob-ledger-engine==1.0.0, knob-ledger-engine==1.1.0")


@pytest.mark.parametrize("release,default", [("1.0.0", 64), ("1.1.0", 4)])
def test_status_shows_the_default_of_the_release_the_script_pins(tmp_path, ledger, release,
                                                                  default):
    text = (REPO / "engine" / "scripts" / "serve_decode.sh").read_text()
    script = tmp_path / "serve_decode.sh"
    script.write_text("".join(ln for ln in text.splitlines(keepends=True)
                              if "ENGINE_MAX_RUNNING_REQUESTS" not in ln)
                      .replace("knob-ledger-engine==1.0.0", f"knob-ledger-engine=={release}"))
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"t={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "decode", script, "--format", "bash"
                  ).exit_code == 0
    r = ledger("-C", root, "record", "knob", "decode", "ENGINE_MAX_RUNNING_REQUESTS=32",
               "--class", "perf", "--title", "mrr 32")
    assert r.exit_code == 0, r.stderr
    r = ledger("-C", root, "status")
    assert f"ENGINE_MAX_RUNNING_REQUESTS: unset (default {default}) -> 32" in r.stdout
