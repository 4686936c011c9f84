"""The engines' release timelines: built byte-stable from source trees, every release's
catalog given back as the generator read it, knob histories checked against facts read in
the releases' own sources, and ``ledger knob``."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from envknobs.catalog_release import bundled_releases
from envknobs.catalog_release import checked_for_engine
from envknobs.catalog_release import load_release
from envknobs.catalog_release import release_warnings
from envknobs.catalogs import timeline_build
from envknobs.catalogs._source import EngineSource
from envknobs.catalogs.generate import main
from envknobs.catalogs.generate import release_catalog
from envknobs.timeline import TIMELINES
from envknobs.timeline import expand
from envknobs.timeline import knob_history
from envknobs.timeline import nearest_releases
from envknobs.timeline import release_catalog as timeline_release
from ledger.cli import cli

FIXTURES = Path(__file__).parent / "catalog_src"


def _bumped(tmp_path: Path, version: str, old: str, new: str) -> Path:
    """A copy of the SGLang fixture tree as release ``version`` with one line changed."""
    tree = tmp_path / f"sglang-{version}"
    shutil.copytree(FIXTURES / "sglang", tree)
    (tree / "sglang" / "version.py").write_text(f'__version__ = "{version}"\n')
    environ = tree / "sglang" / "srt" / "environ.py"
    text = environ.read_text()
    assert old in text
    environ.write_text(text.replace(old, new))
    return tree


def test_the_timeline_is_the_same_bytes_from_the_same_sources_in_any_order(tmp_path):
    newer = _bumped(tmp_path, "0.6.0", "SGLANG_SM120_MMA_TARGET_CTAS = EnvInt(256)",
                    "SGLANG_SM120_MMA_TARGET_CTAS = EnvInt(512)")
    out = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    assert main(["--rebuild", "--sglang", str(FIXTURES / "sglang"), "--sglang", str(newer),
                 "--timeline-dir", str(out[0])]) == 0
    assert main(["--rebuild", "--sglang", str(newer), "--sglang", str(FIXTURES / "sglang"),
                 "--timeline-dir", str(out[1])]) == 0
    # one release at a time, the newer first: merged into the timeline as it grows
    assert main(["--sglang", str(newer), "--timeline-dir", str(out[2])]) == 0
    assert main(["--sglang", str(FIXTURES / "sglang"), "--timeline-dir", str(out[2])]) == 0
    first = (out[0] / "sglang.json").read_bytes()
    assert first == (out[1] / "sglang.json").read_bytes() == (out[2] / "sglang.json").read_bytes()
    data = json.loads(first)
    assert data["releases"] == ["0.5.99", "0.6.0"]
    assert data["knobs"]["SGLANG_SM120_MMA_TARGET_CTAS"]["attrs"]["default"] == [["0.5.99", 256], ["0.6.0", 512]]
    # each release comes back exactly as the generator read it
    for version, source in (("0.5.99", FIXTURES / "sglang"), ("0.6.0", newer)):
        _, read = release_catalog("sglang", source)
        back = expand(data, version)
        for section in ("knobs", "flags", "removed"):
            assert [timeline_build._canonical(i) for i in back[section]] == [
                timeline_build._canonical(i) for i in read[section]]
        assert back.get("bool_words") == read.get("bool_words")


def test_an_sdist_tarball_is_read_as_it_is(tmp_path):
    """The members of an sdist are read from the tarball (its top folder taken off): the
    same catalog as the tree, nothing extracted."""
    sdist = tmp_path / "sglang-0.5.99.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(FIXTURES / "sglang" / "sglang", arcname="sglang-0.5.99/sglang")
        info = tarfile.TarInfo("sglang-0.5.99/PKG-INFO")
        body = b"Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.99\n"
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    assert EngineSource(sdist).read("sglang/srt/environ.py") == (
        FIXTURES / "sglang" / "sglang" / "srt" / "environ.py").read_text()
    assert release_catalog("sglang", sdist) == release_catalog("sglang", FIXTURES / "sglang")
    assert not (tmp_path / "sglang-0.5.99").exists()


# sha256 of the catalogs of the four releases bundled as YAML files before the timeline
# (envknobs/catalogs/releases/*.yaml at commit 6012529), each item as that file held it
# (empty values left out); `inverts`, read since, is not part of that.
BEFORE = {
    ("sglang", "0.5.20"): "38b5ebfbd4bb516415f7907788fb8cc2d092efd2823ece01bece390fc8b6a2c1",
    ("sglang", "0.5.23"): "1ad354217c21e1758cbce179cfb9d513f6cb6956903142054d1a78bb3f683283",
    ("vllm", "0.30.0"): "cf173ab4dbeb116bdd33f34fc0f82a4c41c4f8356338ad5aa874333563778175",
    ("vllm", "0.34.0"): "d57ba1726846820c1ba3db36f9ea43e70242f20ec97c35ea34387e1b763ead74",
}


@pytest.mark.parametrize("engine,version", sorted(BEFORE))
def test_the_previously_bundled_releases_come_back_unchanged(engine, version):
    data = timeline_release(engine, version)

    def item(i: dict) -> dict:
        return {**{k: v for k, v in timeline_build._canonical(i).items() if k != "inverts"},
                "name": i["name"]}

    canon = {s: [item(i) for i in data[s]] for s in ("knobs", "flags", "removed")}
    canon["bool_words"] = data.get("bool_words")
    text = json.dumps(canon, sort_keys=True)
    assert hashlib.sha256(text.encode()).hexdigest() == BEFORE[(engine, version)]
    knobs, flags, _ = load_release(engine, version)
    assert len(knobs) == len(data["knobs"]) and len(flags) == len(data["flags"])


def test_the_timelines_cover_forty_releases_each_and_stay_small():
    sglang, vllm = bundled_releases("sglang"), bundled_releases("vllm")
    assert len(sglang) >= 40 and sglang[0] == "0.4.0" and "0.5.23" in sglang
    assert len(vllm) >= 40 and vllm[0] == "0.6.0" and "0.34.0" in vllm
    size = sum(p.stat().st_size for p in TIMELINES.iterdir())
    assert size < 10_000_000, f"timelines {size} bytes"


def test_vllm_histories_as_the_sources_declare_them():
    # vllm/envs.py: `bool(int(os.getenv("VLLM_USE_V1", "0")))` first in 0.6.4, "0" in 0.7.3,
    # "1" in 0.8.0 and still in 0.11.0; no VLLM_USE_V1 key in 0.11.1's envs.py
    use_v1 = knob_history("vllm", "VLLM_USE_V1")
    assert use_v1.spans == [("0.6.4", "0.11.0")]
    assert use_v1.changes["type"] == [("0.6.4", "int")]
    assert use_v1.describe("default") == "default 0 until 0.7.3, 1 from 0.8.0"
    assert use_v1.value_at("default", "0.34.0") is None
    # vllm/engine/arg_utils.py: `max_num_seqs: int = 256` in 0.6.4.post1,
    # `max_num_seqs: Optional[int] = None` (chosen at startup) in 0.6.5
    seqs = knob_history("vllm", "--max-num-seqs")
    assert seqs.value_at("default", "0.6.4.post1") == 256
    assert seqs.value_at("default", "0.6.5") is None
    assert seqs.describe("default") == "default 256 until 0.6.4.post1, none (computed or unset) from 0.6.5"
    # vllm/config/compilation.py of 0.34.0: `cudagraph_mode: CUDAGraphMode = None`, the
    # enum's members FULL_AND_PIECEWISE among them
    mode = knob_history("vllm", "--compilation-config.cudagraph_mode")
    assert mode.section == "fields"
    assert "FULL_AND_PIECEWISE" in mode.value_at("choices", "0.34.0")


def test_sglang_histories_renames_and_inversions():
    # sglang/srt/environ.py of 0.5.17: `SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK =
    # EnvBool(False)`; of 0.5.18: `_DEPRECATED_ENVS["SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK"]
    # = _DeprecatedEnv(replacement="SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", transform=_invert_bool)`
    disable = knob_history("sglang", "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK")
    assert disable.replacement == "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"
    assert disable.inverts
    assert disable.removed[0][:3] == ("0.5.18", "0.5.20", "deprecated")
    assert any("meaning inverts" in line for line in disable.lines())
    # sglang/srt/model_executor/model_runner.py of 0.4.5.post2 (not 0.4.5.post1) reads
    # `get_bool_env_var("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK")` (utils.py: `in ("true", "1")`);
    # environ.py of 0.5.3 rewrites every SGL_ name to SGLANG_ (`key.replace("SGL_", "SGLANG_", 1)`)
    old = knob_history("sglang", "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK")
    assert old.first() == "0.4.5.post2" and old.changes["type"] == [("0.4.5.post2", "bool")]
    assert old.value_at("true_words", "0.4.5.post2") == ["true", "1"]
    assert ("0.5.3", "renamed", "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK") in [
        (r[0], r[2], r[3]) for r in old.removed]
    assert release_warnings("sglang==0.5.10", "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "1")[0].startswith(
        "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK: deprecated in SGLang 0.5.10 (use "
        "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK)")


def test_an_unknown_release_is_a_warning_naming_the_nearest_known_ones():
    assert nearest_releases("vllm", "0.34.0") == ["0.34.0"]
    assert nearest_releases("vllm", "0.33.5") == ["0.33.0", "0.34.0"]
    assert nearest_releases("vllm", "9.0.0") == ["0.34.0"]
    assert nearest_releases("sglang", "0.3.0") == ["0.4.0"]
    found = checked_for_engine("vllm==0.33.5", "--max-num-seqs", "8", lambda: [])
    assert found == ["no bundled catalog for vllm==0.33.5 (nearest catalogued: 0.33.0, 0.34.0)"]


def test_ledger_knob_prints_a_history_and_refuses_an_unknown_name():
    runner = CliRunner()
    result = runner.invoke(cli, ["knob", "VLLM_USE_V1"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "VLLM_USE_V1 (vLLM env var)"
    assert "  default 0 until 0.7.3, 1 from 0.8.0" in result.output.splitlines()
    assert "  gone after 0.11.0" in result.output.splitlines()
    flag = runner.invoke(cli, ["knob", "--max-num-seqs", "--engine", "vllm"])
    assert flag.exit_code == 0 and flag.output.startswith("--max-num-seqs (vLLM flag)")
    data = json.loads(runner.invoke(cli, ["knob", "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK", "--json"]).output)
    assert [(d["engine"], d["replacement"], d["inverts"]) for d in data] == [
        ("sglang", "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", True)]
    bad = runner.invoke(cli, ["knob", "VLLM_ATENTION_BACKEND"])
    assert bad.exit_code == 1
    assert "error: VLLM_ATENTION_BACKEND: not in any catalogued engine release; closest: " \
           "VLLM_ATTENTION_BACKEND" in bad.output
    wrong_engine = runner.invoke(cli, ["knob", "VLLM_USE_V1", "--engine", "sglang"])
    assert wrong_engine.exit_code == 1 and "not in the sglang timeline" in wrong_engine.output


def test_ledger_knob_reads_the_bundled_engines_releases_too():
    """The bundled engine's timeline (its RELEASES) answers like SGLang's and vLLM's: the
    default 1.1.0 moved, which `upgrade plan` and `bisect --upgrade` act on."""
    runner = CliRunner()
    for args in (["knob", "ENGINE_MAX_RUNNING_REQUESTS"],
                 ["knob", "ENGINE_MAX_RUNNING_REQUESTS", "--engine", "knob-ledger-engine"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert lines[0] == "ENGINE_MAX_RUNNING_REQUESTS (knob-ledger-engine env var)"
        assert "  default 64 until 1.0.0, 4 from 1.1.0" in lines, result.output


def test_ledger_knob_offers_every_engine_with_a_timeline():
    """`--engine` lists exactly the engines whose timeline is committed (a new one left
    out of the CLI could never be asked for by name)."""
    from envknobs.timeline import ENGINES

    result = CliRunner().invoke(cli, ["knob", "--help"])
    assert result.exit_code == 0, result.output
    offered = result.output.split("--engine [", 1)[1].split("]", 1)[0].split("|")
    assert sorted(offered) == sorted(ENGINES)
    assert all((TIMELINES / f"{engine}.json").is_file() for engine in ENGINES)
