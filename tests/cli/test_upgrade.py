"""`ledger upgrade plan` and upgrade entries (`ledger record upgrade`), end to end.

The fixtures are modelled on public deploy files: a vLLM serve script that pins the
wheel and exports tuning env vars; a Kubernetes Deployment running
``vllm/vllm-openai:vX`` with ``args`` and an ``env`` list (the shape of vLLM's own k8s
docs and many deploy repos); a docker-compose service running ``lmsysorg/sglang:vX-cu129``
with an ``environment:`` map and a folded ``command:``; a Helm chart's values with
``image.repository``/``image.tag`` (the layout ``helm create`` writes) and an ``env`` map.
The release pairs are the bundled ones: vLLM 0.30.0 -> 0.34.0, SGLang 0.5.20 -> 0.5.23.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_check import deploy  # noqa: F401  (a fixture: the deploy repo)
from tests.cli.test_check import line_of

SERVE = """\
#!/usr/bin/env bash
# vLLM decode server, pinned wheel (see the ledger for every change)
set -euo pipefail
pip install "vllm==0.30.0"
export VLLM_ENGINE_ITERATION_TIMEOUT_S=120
export VLLM_ROCM_USE_AITER_FP4BMM=0
exec vllm serve meta-llama/Llama-3.1-8B-Instruct \\
    --gpu-memory-utilization 0.9 \\
    --disable-cascade-attn
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-vllm
spec:
  replicas: 1
  selector:
    matchLabels:
      app: llama-vllm
  template:
    metadata:
      labels:
        app: llama-vllm
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.30.0   # pinned after the 0.29 regression
        args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.92"]
        env:
        - name: VLLM_ENGINE_ITERATION_TIMEOUT_S
          value: "600"
        ports:
        - containerPort: 8000
"""

COMPOSE = """\
services:
  sglang:
    image: lmsysorg/sglang:v0.5.20-cu129
    container_name: sglang
    volumes:
      - ${HOME}/.cache/huggingface:/root/.cache/huggingface
    restart: always
    network_mode: host
    environment:
      SGLANG_ENABLE_UNIFIED_RADIX_TREE: "1"
      SGLANG_OPT_SWA_RELEASE_LEAF_LOCK_AFTER_WINDOW: "1"
      SGLANG_FLASHINFER_MOE_FUSED_FINALIZE: "false"
    entrypoint: python3 -m sglang.launch_server
    command:
      --model-path meta-llama/Llama-3.1-8B-Instruct
      --host 0.0.0.0
      --mem-fraction-static 0.8
"""

HELM = """\
# Default values for llama-serve.
replicaCount: 1

image:
  repository: vllm/vllm-openai
  pullPolicy: IfNotPresent
  # Overrides the image tag whose default is the chart appVersion.
  tag: "v0.30.0"

env:
  VLLM_ENGINE_ITERATION_TIMEOUT_S: "600"
  VLLM_ROCM_USE_AITER_FP4BMM: "0"

service:
  type: ClusterIP
  port: 8000
"""

# name -> (file, text, target add options, the release before, after, the line edited)
TARGETS = {
    "bash": ("serve.sh", SERVE, ["--format", "bash"], "vllm==0.30.0", "vllm==0.34.0",
             ('pip install "vllm==0.30.0"', 'pip install "vllm==0.34.0"')),
    "k8s": ("deploy.yaml", DEPLOYMENT, ["--format", "k8s", "--container", "vllm"],
            "vllm==0.30.0", "vllm==0.34.0",
            ("image: vllm/vllm-openai:v0.30.0", "image: vllm/vllm-openai:v0.34.0")),
    "compose": ("compose.yaml", COMPOSE,
                ["--format", "yaml-map", "--key-path", "services.sglang.environment"],
                "sglang==0.5.20", "sglang==0.5.23",
                ("lmsysorg/sglang:v0.5.20-cu129", "lmsysorg/sglang:v0.5.23-cu129")),
    "helm": ("values.yaml", HELM, ["--format", "yaml-map", "--key-path", "env"],
             "vllm==0.30.0", "vllm==0.34.0", ('tag: "v0.30.0"', 'tag: "v0.34.0"')),
}


@pytest.fixture
def ws(tmp_path, ledger):
    root = tmp_path / "ws"
    assert ledger("init", root, "--root", f"tmp={tmp_path}").exit_code == 0
    for name, (file, text, opts, *_rest) in TARGETS.items():
        (tmp_path / file).write_text(text)
        r = ledger("-C", root, "target", "add", name, tmp_path / file, *opts)
        assert r.exit_code == 0, r.stderr
    return root


def _paths(root: Path) -> dict[str, Path]:
    return {name: root.parent / file for name, (file, *_r) in TARGETS.items()}


@pytest.mark.parametrize("name", list(TARGETS))
def test_record_revert_restore_byte_exact(ws, ledger, name):
    _file, text, _opts, before, after, (old_line, new_line) = TARGETS[name]
    path = _paths(ws)[name]
    r = ledger("-C", ws, "--json", "record", "upgrade", name, "--to", after, "--class", "perf",
               "--title", f"{name} to {after}")
    assert r.exit_code == 0, r.stderr
    entry = r.json()
    assert (entry["kind"], entry["before"], entry["after"]) == ("upgrade", before, after)
    upgraded = path.read_text()
    assert upgraded == text.replace(old_line, new_line)  # only the version moved
    assert [p["to"] for p in [entry["plan"]]] == [after]
    assert "Defaults moved" in entry["body"]

    r = ledger("-C", ws, "revert", entry["id"], "--why", "p99 doubled after the upgrade")
    assert r.exit_code == 0, r.stderr
    assert path.read_bytes() == text.encode()
    r = ledger("-C", ws, "restore", entry["id"])
    assert r.exit_code == 0, r.stderr
    assert path.read_text() == upgraded
    status = {row["id"]: row for row in ledger("-C", ws, "--json", "status").json()["entries"]}
    assert status[entry["id"]]["live_state"] == "ok"


def test_plan_rows_name_file_lines_and_commands(ws, ledger):
    r = ledger("-C", ws, "--json", "upgrade", "plan", "bash", "--to", "vllm==0.34.0")
    assert r.exit_code == 0, r.stderr
    (plan,) = r.json()["plans"]
    assert (plan["from"], plan["from_source"]) == ("vllm==0.30.0", "detected")
    rows = {(row["change"], row["name"]): row for row in plan["rows"]}
    path = str(_paths(ws)["bash"])
    release = rows[("release", "vllm==0.30.0")]
    assert release["where"] == f"{path}:4"
    removed = rows[("removed", "VLLM_ENGINE_ITERATION_TIMEOUT_S")]
    assert removed["where"] == f"{path}:5" and removed["value"] == "120"
    assert removed["command"].startswith(
        "ledger record knob bash VLLM_ENGINE_ITERATION_TIMEOUT_S --unset --class bugfix")
    assert rows[("deprecated", "--disable-cascade-attn")]["where"] == f"{path}:9"
    redundant = rows[("redundant", "VLLM_ROCM_USE_AITER_FP4BMM")]  # 0 is the new default
    assert (redundant["old_default"], redundant["new_default"]) == (True, False)
    moved = rows[("default", "VLLM_ROCM_USE_AITER_FP8BMM")]  # unset in the file
    assert moved["where"] == f"{path}:4"
    assert "VLLM_ROCM_USE_AITER_FP8BMM=true" in moved["command"]
    # --gpu-memory-utilization is set (0.9): its moved default is the file's business
    assert not any(n == "--gpu-memory-utilization" for _c, n in rows)


def test_plan_of_a_rename_and_the_markdown(ws, ledger):
    r = ledger("-C", ws, "--json", "upgrade", "plan", "compose", "--to", "sglang==0.5.23")
    (plan,) = r.json()["plans"]
    rename = next(row for row in plan["rows"] if row["change"] == "renamed")
    assert rename["name"] == "SGLANG_OPT_SWA_RELEASE_LEAF_LOCK_AFTER_WINDOW"
    assert rename["new_value"] == "1" and "inverts" not in rename
    assert "SGLANG_OPT_RELEASE_PREFILL_SWA=1" in rename["command"]
    md = ledger("-C", ws, "upgrade", "plan", "compose", "helm", "--to", "sglang==0.5.23",
                "--format", "markdown")
    assert md.exit_code == 1  # helm runs vLLM: named, so planned, and refused
    md = ledger("-C", ws, "upgrade", "plan", "--to", "sglang==0.5.23", "--format", "markdown")
    assert md.exit_code == 0, md.stderr
    assert md.stdout.startswith("## compose: sglang==0.5.20 -> sglang==0.5.23\n")
    assert "### Renamed (set in the file)" in md.stdout
    assert "| default |" not in md.stdout and "### Defaults moved (unset in the file)" in md.stdout


def test_unknown_release_warns_with_the_nearest_never_refuses(ws, ledger):
    from envknobs.release_diff import nearest

    r = ledger("-C", ws, "upgrade", "plan", "k8s", "--to", "vllm==0.33.99")
    assert r.exit_code == 0, r.stderr
    near = ", ".join(nearest("vllm", "0.33.99"))
    assert f"vllm 0.33.99 has no bundled catalog (nearest known: {near})" in r.stderr
    assert near.startswith("0.")


def test_two_releases_in_one_file_are_refused_naming_each_place(tmp_path, ws, ledger):
    path = _paths(ws)["k8s"]
    path.write_text(DEPLOYMENT + "      - name: router\n"
                    "        image: vllm/vllm-openai:v0.29.1\n")
    r = ledger("-C", ws, "upgrade", "plan", "k8s", "--to", "vllm==0.34.0")
    assert r.exit_code == 1
    assert f"{path}:17: vllm==0.30.0" in r.stderr and f"{path}:25: vllm==0.29.1" in r.stderr
    assert "--from vllm==VERSION" in r.stderr
    r = ledger("-C", ws, "upgrade", "plan", "k8s", "--to", "vllm==0.34.0",
               "--from", "vllm==0.30.0")
    assert r.exit_code == 0, r.stderr
    before = path.read_bytes()
    r = ledger("-C", ws, "record", "upgrade", "k8s", "--to", "vllm==0.34.0", "--class", "perf",
               "--title", "t")
    assert r.exit_code == 1 and f"{path}:25" in r.stderr
    assert path.read_bytes() == before


def test_no_release_detectable_is_refused_with_the_way_out(tmp_path, ws, ledger):
    path = _paths(ws)["helm"]
    path.write_text(HELM.replace('tag: "v0.30.0"', 'tag: "latest"'))
    r = ledger("-C", ws, "upgrade", "plan", "helm", "--to", "vllm==0.34.0")
    assert r.exit_code == 1
    assert "no vllm release detectable" in r.stderr and f"{path}:5:" in r.stderr
    assert "--from vllm==VERSION" in r.stderr
    r = ledger("-C", ws, "upgrade", "plan", "helm", "--to", "vllm==0.34.0",
               "--from", "vllm==0.30.0")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("args,message", [
    (["--to", "vllm=0.34.0"], "--to 'vllm=0.34.0': write the release as"),
    (["--to", "sglang==0.5.23"], "names no sglang release to change"),
    (["--to", "vllm==0.30.0"], "already runs vllm==0.30.0"),
    (["--to", "vllm==0.34.0", "--adopt", "--before", "vllm==0.30.0"],
     "names vllm==0.30.0, not vllm==0.34.0: --adopt records an upgrade already made"),
    (["--to", "vllm==0.34.0", "--adopt", "--before", "sglang==0.5.20"], "name two engines"),
])
def test_bad_input_changes_nothing(ws, ledger, args, message):
    path = _paths(ws)["bash"]
    before = path.read_bytes()
    r = ledger("-C", ws, "record", "upgrade", "bash", *args, "--class", "perf", "--title", "t")
    assert r.exit_code in (1, 2) and message in r.stderr, r.stderr
    assert r.stderr.startswith("error:") or "\nerror:" in r.stderr
    assert path.read_bytes() == before
    assert ledger("-C", ws, "--json", "list").json() == []


def test_adopt_a_hand_upgrade(ws, ledger):
    path = _paths(ws)["compose"]
    path.write_text(COMPOSE.replace("v0.5.20-cu129", "v0.5.23-cu129"))  # by hand
    hand = path.read_bytes()
    r = ledger("-C", ws, "--json", "record", "upgrade", "compose", "--to", "sglang==0.5.23",
               "--adopt", "--before", "sglang==0.5.20", "--class", "perf", "--title", "0.5.23")
    assert r.exit_code == 0, r.stderr
    entry = r.json()
    assert path.read_bytes() == hand  # adopting writes nothing
    assert entry["history"][0]["action"] == "adopt"
    assert ledger("-C", ws, "revert", entry["id"], "--why", "t").exit_code == 0
    assert path.read_text() == COMPOSE
    assert ledger("-C", ws, "restore", entry["id"]).exit_code == 0
    assert path.read_bytes() == hand


def test_show_diff_and_docs_name_the_moved_defaults(ws, ledger, tmp_path):
    r = ledger("-C", ws, "--json", "record", "upgrade", "compose", "--to", "sglang==0.5.23",
               "--class", "perf", "--title", "SGLang 0.5.23")
    eid = r.json()["id"]
    show = ledger("-C", ws, "show", eid)
    assert re.search(r"upgrade sglang==0\.5\.20 -> sglang==0\.5\.23 \(\d+ defaults moved\)",
                     show.stdout)
    assert "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND (unset): default python -> rust" in show.stdout
    ledger("-C", ws, "revert", eid, "--why", "TTFT regressed")
    diff = ledger("-C", ws, "diff")
    assert "moved     default" in diff.stdout
    assert "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND (unset): default python -> rust" in diff.stdout
    out = tmp_path / "docs"
    assert ledger("-C", ws, "render", "--out", out).exit_code == 0
    page = (out / "entries" / f"{eid}.md").read_text()
    assert "Engine upgrade of `compose`: `sglang==0.5.20` → `sglang==0.5.23`." in page
    assert "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND (unset): default python -> rust" in page
    assert re.search(r"\(\d+ defaults moved\)", (out / "CHANGELOG.md").read_text())


def _git(repo: Path, *args: str, date: str = "") -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date \
        else None
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_adopt_proposes_the_image_bump_of_a_deploy_repo(tmp_path, ledger):
    repo = tmp_path / "deploy"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "op@example.com")
    _git(repo, "config", "user.name", "op")
    (repo / "deploy.yaml").write_text(DEPLOYMENT)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "llama on vLLM", date="2026-11-01T10:00:00Z")
    (repo / "deploy.yaml").write_text(DEPLOYMENT.replace("v0.30.0", "v0.34.0"))
    _git(repo, "commit", "-qam", "bump vLLM to 0.34.0", date="2026-11-20T10:00:00Z")
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    ledger("-C", root, "target", "add", "k8s", repo / "deploy.yaml", "--format", "k8s",
           "--container", "vllm")
    plan = tmp_path / "plan.yaml"
    r = ledger("-C", root, "adopt", "k8s", "--git", repo, "--path", "deploy.yaml",
               "--out", plan)
    assert r.exit_code == 0, r.stderr
    assert "engine release: vllm==0.30.0 -> vllm==0.34.0" in r.stdout
    plan.write_text(plan.read_text().replace("  class:\n", "  class: perf\n"))
    r = ledger("-C", root, "adopt", "--apply", plan)
    assert r.exit_code == 0, r.stderr
    (entry,) = ledger("-C", root, "--json", "list").json()
    assert (entry["kind"], entry["before"], entry["after"]) == (
        "upgrade", "vllm==0.30.0", "vllm==0.34.0")
    shown = ledger("-C", root, "--json", "show", entry["id"]).json()
    assert shown["history"][0]["when"] == "2026-11-20T10:00:00Z"
    assert shown["origin"].startswith("commit ")
    assert ledger("-C", root, "revert", entry["id"], "--why", "t").exit_code == 0
    assert (repo / "deploy.yaml").read_text() == DEPLOYMENT


def _raw_release(engine: str, version: str) -> dict:
    """A release catalog read with a plain YAML loader: the independent side."""
    import yaml

    from envknobs.catalog_release import RELEASES

    data = yaml.safe_load((RELEASES / f"{engine}-{version}.yaml").read_text())
    return {item["name"]: item for item in data["knobs"]}


def _pairs():
    from tests.envknobs.test_release_diff import release_pairs

    return release_pairs()


@pytest.mark.parametrize("engine,old,new", _pairs())
def test_plan_of_real_release_pairs_against_the_catalogs(tmp_path, ledger, engine, old, new):
    """A script that sets every env var the new release drops, upgraded one release up:
    each is a row on its own line; every env var whose default moved is a default row
    with the defaults the two catalogs (read plainly) declare."""
    before, after = _raw_release(engine, old), _raw_release(engine, new)
    gone = sorted(set(before) - set(after))
    lines = ["#!/usr/bin/env bash", f'pip install "{engine}=={old}"',
             *(f"export {name}=1" for name in gone), f"exec {engine} serve m"]
    script = tmp_path / "serve.sh"
    script.write_text("\n".join(lines) + "\n")
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    ledger("-C", root, "target", "add", "t", script, "--format", "bash")
    r = ledger("-C", root, "--json", "upgrade", "plan", "--to", f"{engine}=={new}")
    assert r.exit_code == 0, r.stderr
    rows = r.json()["plans"][0]["rows"]
    dropped = {row["name"]: row for row in rows
               if row["change"] in ("removed", "renamed", "deprecated")}
    assert sorted(dropped) == gone and gone
    for i, name in enumerate(gone, start=3):
        assert dropped[name]["where"] == f"{script}:{i}"
    moved = {row["name"]: row for row in rows if row["change"] == "default"}
    checked = 0
    for name, item in after.items():
        was = before.get(name)
        if was is None or was["type"] != item["type"] or None in (was["default"], item["default"]):
            continue
        if (bool(was["default"]) != bool(item["default"]) if item["type"] == "bool"
                else was["default"] != item["default"]):
            assert (moved[name]["old_default"], moved[name]["new_default"]) == (
                was["default"], item["default"]), name
            checked += 1
    assert checked >= 3  # a pair of real releases moves defaults under unset names


def test_check_names_the_adopt_command_for_a_hand_bump_and_passes_once_recorded(deploy):
    d = deploy  # ledger check's own deploy repo (tests/cli/test_check.py)
    line = line_of(d.manifest, "image:")
    d.edit(d.manifest, "lmsysorg/sglang:v0.5.20-cu129", "lmsysorg/sglang:v0.5.23-cu129")
    r = d.check()
    assert r.exit_code == 1
    assert (f"k8s/decode.yaml:{line}: engine release: sglang==0.5.20 -> sglang==0.5.23"
            in r.stdout)
    assert ("fix: record it: `ledger record upgrade decode-k8s --adopt --before sglang==0.5.20 "
            "--to sglang==0.5.23") in r.stdout
    r = d.ledger("record", "upgrade", "decode-k8s", "--adopt", "--before", "sglang==0.5.20",
                 "--to", "sglang==0.5.23", "--class", "perf", "--title", "SGLang 0.5.23")
    assert r.exit_code == 0, r.stderr
    r = d.check()  # the release is explained; a perf upgrade still wants its A/B evidence
    assert r.exit_code == 1 and "has no entry" not in r.stdout and "[state]" not in r.stdout
    assert "a perf change added without evidence [evidence]" in r.stdout


PD_PAIR = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: glm-pd
spec:
  template:
    spec:
      containers:
      - name: prefill
        image: lmsysorg/sglang:v0.5.20-cu129
        env:
        - name: SGLANG_DISAGGREGATION_QUEUE_SIZE
          value: "4"
      - name: decode
        image: lmsysorg/sglang:v0.5.20-cu129
        env:
        - name: SGLANG_DISAGGREGATION_QUEUE_SIZE
          value: "4"
"""


def test_one_file_runs_one_release_every_place_moves_together(tmp_path, ledger):
    """The decision of envknobs.release_spots: a prefill and a decode image at one tag in
    one manifest both move (and both come back) with the upgrade of either target."""
    path = tmp_path / "pd.yaml"
    path.write_text(PD_PAIR)
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    for c in ("prefill", "decode"):
        ledger("-C", root, "target", "add", c, path, "--format", "k8s", "--container", c)
    r = ledger("-C", root, "--json", "record", "upgrade", "decode", "--to", "sglang==0.5.23",
               "--class", "perf", "--title", "0.5.23")
    assert r.exit_code == 0, r.stderr
    assert path.read_text() == PD_PAIR.replace("v0.5.20", "v0.5.23")
    assert r.json()["plan"]["rows"][0]["where"] == f"{path}:10"
    assert ledger("-C", root, "revert", r.json()["id"], "--why", "t").exit_code == 0
    assert path.read_text() == PD_PAIR


def test_a_declared_release_is_planned_and_cannot_be_recorded_in_the_file(tmp_path, ledger):
    env = tmp_path / "vllm.env"
    env.write_text("VLLM_ENGINE_ITERATION_TIMEOUT_S=120\n")
    root = tmp_path / "ws"
    ledger("init", root, "--root", f"tmp={tmp_path}")
    ledger("-C", root, "target", "add", "env", env, "--format", "dotenv")
    with open(root / "ledger.yaml", "a") as f:
        f.write("engine: vllm==0.30.0\n")
    r = ledger("-C", root, "--json", "upgrade", "plan", "--to", "vllm==0.34.0")
    assert r.exit_code == 0, r.stderr
    (plan,) = r.json()["plans"]
    assert (plan["from"], plan["from_source"]) == ("vllm==0.30.0", "declared")
    assert plan["rows"][0]["where"] == str(env)  # declared in ledger.yaml: no line
    assert ("removed", f"{env}:1") in {(row["change"], row["where"]) for row in plan["rows"]}
    r = ledger("-C", root, "record", "upgrade", "env", "--to", "vllm==0.34.0", "--class", "perf",
               "--title", "t")
    assert r.exit_code == 1 and "names no vllm release to change" in r.stderr
    assert env.read_text() == "VLLM_ENGINE_ITERATION_TIMEOUT_S=120\n"
