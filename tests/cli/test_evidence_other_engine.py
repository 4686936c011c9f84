"""`ledger ab` refuses a bench that cannot read the knob (issue 52): the default bench of a
workspace runs the bundled engine, which never reads an SGLang knob."""

from __future__ import annotations

import subprocess
from pathlib import Path

import engine

# Modelled on public SGLang PD decode launch scripts: env knobs exported, then the server.
SGLANG_DECODE = """#!/usr/bin/env bash
# decode node, image lmsysorg/sglang:v0.5.2-cu126
export SGLANG_SM120_MMA_TARGET_CTAS=256
export SGLANG_DISAGGREGATION_QUEUE_SIZE=4
python3 -m sglang.launch_server --model-path /models/llama \\
  --disaggregation-mode decode --port 30001 --tp 8
"""


def _sglang_ws(tmp_path, ledger):
    script = tmp_path / "decode.sh"
    script.write_text(SGLANG_DECODE)
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    assert ledger("-C", root, "target", "add", "decode", script, "--format", "bash"
                  ).exit_code == 0
    r = ledger("-C", root, "record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
               "--class", "perf", "--title", "target ctas 512", "--json")
    assert r.exit_code == 0, r.stderr
    return root, r.json()["id"]


def test_ab_of_an_sglang_knob_with_the_bundled_bench_is_refused_naming_the_mismatch(
        tmp_path, ledger):
    root, entry = _sglang_ws(tmp_path, ledger)
    before = sorted(p.name for p in root.iterdir())
    for extra in ((), ("--dry-run",)):
        r = ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1", *extra)
        assert r.exit_code == 1, r.stdout
        err = r.stderr
        assert "\nerror: ab " in "\n" + err and "measures the bundled engine" in err
        assert "never reads SGLANG_SM120_MMA_TARGET_CTAS" in err
        assert "target 'decode' runs sglang==0.5.2" in err
        assert "python -m sglang.bench_serving" in err and "vllm bench serve" in err
        assert "aiperf profile" in err and "bench:" in err and "--allow-other-engine" in err
    assert sorted(p.name for p in root.iterdir()) == before  # nothing measured or stored
    assert not (root / "evidence").exists()
    # Asked for: measured all the same (the plan shows it).
    r = ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1", "--dry-run",
               "--allow-other-engine")
    assert r.exit_code == 0 and "would run 8 benches" in r.stdout, r.stderr


def test_a_bench_of_the_operators_own_is_trusted(tmp_path, ledger):
    root, entry = _sglang_ws(tmp_path, ledger)
    r = ledger("-C", root, "ab", entry, "--runs", "3", "--concurrency", "1", "--dry-run",
               "--bench", "bash bench-sglang.sh {env_file} {concurrency} {out}")
    assert r.exit_code == 0, r.stderr


def test_knob_and_bench_engines_from_the_catalogs():
    from engine.knobs import REGISTRY
    from envknobs.catalog import bundled_catalogs
    from envknobs.catalog import load_catalog
    from ledger.evidence.bench_engine import bench_engine
    from ledger.evidence.bench_engine import knob_engine
    from ledger.evidence.runner import DEFAULT_BENCH_COMMAND

    catalogs = {p.stem: load_catalog(p) for p in bundled_catalogs()}
    assert bench_engine(DEFAULT_BENCH_COMMAND) == "bundled"
    assert bench_engine("aiperf:/models/tiny") == "bundled"
    assert bench_engine("python -m sglang.bench_serving --output-file {out}") is None
    assert knob_engine("SGLANG_SM120_MMA_TARGET_CTAS", None, REGISTRY, catalogs) == "sglang"
    assert knob_engine("ENGINE_DECODE_TARGET_CTAS", None, REGISTRY, catalogs) == "bundled"
    assert knob_engine("ENGINE_DECODE_TARGET_CTAS", "vllm==0.9.2", REGISTRY, catalogs) == "vllm"
    assert knob_engine("MY_OWN_KNOB", None, REGISTRY, catalogs) is None


def test_init_writes_the_bundled_bench_only_for_a_bundled_engine_checkout(tmp_path, ledger):
    import shutil

    from ledger.store.config_file import parse_config_text

    plain = tmp_path / "plain"
    assert ledger("init", plain).exit_code == 0
    assert "bench" not in (plain / "ledger.yaml").read_text()
    repo = tmp_path / "engine-repo"
    shutil.copytree(Path(engine.__file__).parent, repo / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bundled = tmp_path / "bundled"
    assert ledger("init", bundled, "--engine-repo", repo).exit_code == 0
    config = parse_config_text((bundled / "ledger.yaml").read_text(), "ledger.yaml")
    assert config.bench_command and "-m engine bench" in config.bench_command


def test_the_verdicts_tolerance_and_guards_come_from_ledger_yaml():
    import pytest

    from ledger.errors import ConfigError
    from ledger.store.config_file import dump_config
    from ledger.store.config_file import parse_config_text

    text = "version: 1\nbench:\n  tolerance_pct: 5\n  guards: [p99_itl_ms]\n"
    config = parse_config_text(text, "ledger.yaml")
    assert config.bench_tolerance_pct == 5.0 and config.bench_guards == ("p99_itl_ms",)
    again = parse_config_text(dump_config(config), "ledger.yaml")
    assert (again.bench_tolerance_pct, again.bench_guards) == (5.0, ("p99_itl_ms",))
    with pytest.raises(ConfigError, match="tolerance_pct 'two'"):
        parse_config_text("version: 1\nbench:\n  tolerance_pct: two\n", "ledger.yaml")
    with pytest.raises(ConfigError, match="guards must be a list"):
        parse_config_text("version: 1\nbench:\n  guards: p99_itl_ms\n", "ledger.yaml")
