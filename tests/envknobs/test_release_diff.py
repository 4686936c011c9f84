"""What changes between two releases (envknobs.release_diff) and where a file writes its
release (envknobs.release_spots), against the bundled catalogs of real releases.

Release pairs checked: vLLM 0.30.0 -> 0.34.0 and SGLang 0.5.20 -> 0.5.23, and each
engine's newest two bundled releases (the same pairs today).  Facts
verified by hand in the engines' released sources, not only in our catalogs:

* vLLM ``envs.py``: ``"VLLM_ENGINE_ITERATION_TIMEOUT_S": lambda: int(os.environ.get(...,
  "60"))`` — an int defaulting to 60 in the older release; 0.34.0 no longer declares it.
* SGLang ``environ.py`` before: ``SGLANG_OPT_SWA_RELEASE_LEAF_LOCK_AFTER_WINDOW =
  EnvBool(False)`` and ``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND = EnvStr("python")``;
  after: ``SGLANG_OPT_RELEASE_PREFILL_SWA = EnvBoolWithAlias(False,
  deprecated_name="SGLANG_OPT_SWA_RELEASE_LEAF_LOCK_AFTER_WINDOW")`` (a rename that keeps
  the meaning) and ``EnvStr("rust")`` (a moved default).
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from envknobs.catalog_release import RELEASES
from envknobs.catalog_release import bundled_releases
from envknobs.release_diff import changes_between
from envknobs.release_diff import inverted
from envknobs.release_diff import nearest
from envknobs.release_diff import stand_in
from envknobs.release_diff import translated_value
from envknobs.release_diff import version_key
from envknobs.registry import KnobError
from envknobs.release_spots import release_spots
from envknobs.release_spots import with_release

VERIFIED = [("vllm", "0.30.0", "0.34.0"), ("sglang", "0.5.20", "0.5.23")]


def release_pairs() -> list[tuple[str, str, str]]:
    """The pairs verified by hand, and each engine's newest two releases (a timeline of
    forty releases would make every pair a long test: these stand for them)."""
    newest = [(e, *bundled_releases(e)[-2:]) for e in ("vllm", "sglang")
              if len(bundled_releases(e)) >= 2]
    return list(dict.fromkeys([p for p in VERIFIED if all(
        v in bundled_releases(p[0]) for v in p[1:])] + newest))


PAIRS = release_pairs()


def _raw(engine: str, version: str) -> dict:
    """A release catalog read with a plain YAML loader: the independent side of the check."""
    data = yaml.safe_load((RELEASES / f"{engine}-{version}.yaml").read_text())
    return {item["name"]: item for item in [*data["knobs"], *data["flags"]]}


def test_verified_source_facts():
    v = changes_between("vllm", "0.30.0", "0.34.0")
    assert v.get("VLLM_ENGINE_ITERATION_TIMEOUT_S").change == "removed"
    s = changes_between("sglang", "0.5.20", "0.5.23")
    rename = s.get("SGLANG_OPT_SWA_RELEASE_LEAF_LOCK_AFTER_WINDOW")
    assert (rename.change, rename.replacement, rename.inverts) == (
        "renamed", "SGLANG_OPT_RELEASE_PREFILL_SWA", False)
    moved = s.get("SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND")
    assert (moved.change, moved.old_default, moved.new_default) == ("default", "python", "rust")
    assert s.get("--enable-dp-attention").change == "deprecated"
    assert s.get("--enable-dp-attention").replacement == "--attn-dp-size <dp-size>"


@pytest.mark.parametrize("engine,old,new", PAIRS)
def test_every_change_holds_in_the_catalogs_read_plainly(engine, old, new):
    before, after = _raw(engine, old), _raw(engine, new)
    changes = changes_between(engine, old, new)
    assert changes.changes, "two releases with nothing between them: the diff reads nothing"
    for c in changes.changes.values():
        if c.change in ("removed", "renamed") or (c.change == "deprecated" and c.name not in after):
            assert c.name in before and c.name not in after, c
        elif c.change == "deprecated":
            assert after[c.name].get("deprecated") is not None, c
            assert before[c.name].get("deprecated") is None, c
        elif c.change == "default":
            a, b = before[c.name], after[c.name]
            assert a["default"] != b["default"] or a["type"] != b["type"], c
        else:
            assert c.change == "new" and c.name in after and c.name not in before, c
    # and the other way round: every name gone from the catalog is named
    gone = set(before) - set(after)
    assert gone <= {c.name for c in changes.changes.values()}


def test_an_upgrade_and_its_downgrade_mirror_each_other():
    up, down = changes_between("sglang", "0.5.20", "0.5.23"), changes_between(
        "sglang", "0.5.23", "0.5.20")
    up_moved = {c.name: (c.old_default, c.new_default) for c in up.of("default")}
    down_moved = {c.name: (c.new_default, c.old_default) for c in down.of("default")}
    assert up_moved == down_moved


@pytest.mark.parametrize("old,new,inverts", [
    ("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", True),
    ("--enable-piecewise-cuda-graph", "--disable-piecewise-cuda-graph", True),
    ("--enable-flashinfer-autotune", "--disable-flashinfer-autotune", True),
    ("--enable-x", "--no-enable-x", True),
    ("SGLANG_OPT_SWA_RELEASE_LEAF_LOCK_AFTER_WINDOW", "SGLANG_OPT_RELEASE_PREFILL_SWA", False),
    ("--file-storage-pth", "--file-storage-path", False),
    ("SGL_ENABLE_JIT_DEEPGEMM", "SGLANG_ENABLE_JIT_DEEPGEMM", False),
])
def test_renames_that_invert_the_meaning(old, new, inverts):
    assert inverted(old, new) is inverts


@pytest.mark.parametrize("value,expected", [("1", "0"), ("true", "false"), ("True", "False"),
                                            ("FALSE", "TRUE"), ("no", "yes"), ("0", "1")])
def test_translated_value_keeps_the_spelling(value, expected):
    assert translated_value(value, True) == expected
    assert translated_value(value, False) == value


def test_a_value_that_is_no_boolean_is_not_translated():
    with pytest.raises(KnobError, match="translate it by hand"):
        translated_value("auto", True)


def test_unknown_releases_stand_in_with_the_nearest():
    known = bundled_releases("vllm")
    below = [v for v in known if version_key(v) <= version_key("0.33.99")]
    above = [v for v in known if version_key(v) > version_key("0.33.99")]
    near = nearest("vllm", "0.33.99")
    assert near and set(near) <= set(known)
    assert below[-1] in near and (not above or above[0] in near)
    assert stand_in("vllm", "0.33.99") in near
    assert stand_in("vllm", "0.0.1") == known[0]  # none below: the nearest above
    assert all(stand_in("vllm", v) == v for v in known)
    assert version_key("0.5.7") < version_key("0.5.7.post1") < version_key("0.5.10")
    assert version_key("0.9.2") < version_key("0.13.0")


# -- where a file writes its release ---------------------------------------------------

HELM_VALUES = """\
# Default values for llama-serve.
replicaCount: 1

image:
  repository: vllm/vllm-openai
  pullPolicy: IfNotPresent
  # Overrides the image tag whose default is the chart appVersion.
  tag: "v0.30.0"

modelDownloader:
  image:
    repository: us-docker.pkg.dev/acme/library/model-downloader
    tag: "35349530904f"
"""


def test_spots_in_real_shapes():
    text = ("docker run --gpus all lmsysorg/sglang:v0.5.20-cu129 \\\n"
            "  python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B\n"
            'pip install "sglang[all]==0.5.20"\n'
            "FROM docker.io/vllm/vllm-openai:v0.30.0\n")
    spots = release_spots(text)
    assert [(s.spec, s.line, s.kind) for s in spots] == [
        ("sglang==0.5.20", 1, "image"), ("sglang==0.5.20", 3, "pin"),
        ("vllm==0.30.0", 4, "image")]
    helm = release_spots(HELM_VALUES)
    assert [(s.spec, s.line, s.kind) for s in helm] == [("vllm==0.30.0", 8, "helm tag")]
    assert release_spots("image: vllm/vllm-openai:latest\nimage: my-sglang:1.0\n") == []


def test_a_new_release_keeps_every_other_byte():
    text = "image: lmsysorg/sglang:v0.5.20-cu129   # pinned\n"
    out = with_release(text, release_spots(text), "0.5.23")
    assert out == "image: lmsysorg/sglang:v0.5.23-cu129   # pinned\n"
    new = with_release(HELM_VALUES, release_spots(HELM_VALUES), "0.34.0")
    assert new == HELM_VALUES.replace('tag: "v0.30.0"', 'tag: "v0.34.0"')


@settings(max_examples=60)
@given(st.sampled_from(["vllm/vllm-openai:v{}", "lmsysorg/sglang:v{}-cu129",
                        "pip install vllm=={}", "  tag: v{}"]),
       st.lists(st.integers(0, 40), min_size=3, max_size=3),
       st.lists(st.integers(0, 40), min_size=3, max_size=3),
       st.text(alphabet=" #abc\n", max_size=12))
def test_there_and_back_is_byte_exact(shape, a, b, tail):
    old, new = ".".join(map(str, a)), ".".join(map(str, b))
    head = "image:\n  repository: vllm/vllm-openai\n" if shape.startswith("  tag") else ""
    text = head + shape.format(old) + "\n" + tail
    spots = release_spots(text)
    assert [s.version for s in spots] == [old]
    there = with_release(text, spots, new)
    assert with_release(there, release_spots(there), old) == text
