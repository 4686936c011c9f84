"""`ledger check` on real git repositories: a deploy repo holding the workspace (ledger.yaml
at its top) and the files it manages, a main branch and a feature branch made here.

The fixtures are modelled on public SGLang deploy files: a PD decode serve script
(``python -m sglang.launch_server … --disaggregation-mode decode``) and a Kubernetes
Deployment of ``lmsysorg/sglang`` whose container passes server flags in ``args:`` and
knobs in ``env:``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SERVE_DECODE

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang-decode
  labels:
    app: sglang-decode
spec:
  replicas: 1
  selector:
    matchLabels:
      app: sglang-decode
  template:
    metadata:
      labels:
        app: sglang-decode
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.20-cu129
          command: ["python3", "-m", "sglang.launch_server"]
          args:
            - --model-path
            - /models/glm
            - --disaggregation-mode
            - decode
            - --cuda-graph-max-bs
            - "64"
            - --enable-metrics
          env:
            - name: SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT
              value: "300"
          resources:
            limits:
              nvidia.com/gpu: 1
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV)
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=env, check=check)


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


class Deploy:
    def __init__(self, root: Path, ledger):
        self.root, self.run = root, ledger
        self.script = root / "serve_decode.sh"
        self.manifest = root / "k8s" / "decode.yaml"

    def ledger(self, *args: str):
        return self.run("-C", self.root, *args)

    def check(self, *args: str):
        return self.ledger("check", "--base", "main", *args)

    def edit(self, path: Path, old: str, new: str, message: str = "hand edit") -> None:
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))
        commit_all(self.root, message)


@pytest.fixture
def deploy(tmp_path, ledger) -> Deploy:
    """The deploy repo: workspace at its top, a serve script and a manifest as targets,
    on branch main; the test works on branch feature."""
    root = tmp_path / "deploy"
    assert ledger("init", root).exit_code == 0
    (root / "k8s").mkdir()
    (root / "serve_decode.sh").write_text(SERVE_DECODE)
    (root / "k8s" / "decode.yaml").write_text(MANIFEST)
    d = Deploy(root, ledger)
    r = d.ledger("target", "add", "decode", root / "serve_decode.sh", "--format", "bash")
    assert r.exit_code == 0, r.stderr
    r = d.ledger("target", "add", "decode-k8s", root / "k8s" / "decode.yaml", "--format", "k8s",
                 "--container", "sglang")
    assert r.exit_code == 0, r.stderr
    assert git(root, "status", "--porcelain").stdout == ""  # the files are committed
    git(root, "checkout", "-q", "-b", "feature")
    return d


def bench_file(tmp_path: Path, name: str, throughput: float) -> Path:
    """sglang bench_serving JSONL: three runs at concurrency 16 around ``throughput``."""
    path = tmp_path / name
    path.write_text("".join(json.dumps({
        "backend": "sglang", "dataset_name": "random", "max_concurrency": 16, "completed": 64,
        "duration": 10.0, "request_throughput": 6.4, "input_throughput": 2000.0,
        "output_throughput": throughput + i, "median_tpot_ms": 20.0,
        "total_input_tokens": 20000, "total_output_tokens": 10000, "mean_ttft_ms": 50.0,
        "p99_itl_ms": 30.0}) + "\n" for i in range(5)))
    return path


def add_evidence(d: Deploy, tmp_path: Path, entry: str, a: float, b: float) -> None:
    for side, tput in (("A", a), ("B", b)):
        r = d.ledger("evidence", "add", entry, bench_file(tmp_path, f"{side}.jsonl", tput),
                     "--side", side)
        assert r.exit_code == 0, r.stderr


def fix_commands(stdout: str) -> list[str]:
    return [line.split("fix: ", 1)[1] for line in stdout.splitlines()
            if line.startswith("  fix: ")]


def run_fix(d: Deploy, command: str) -> None:
    """Run a printed fix (``ledger …`` words, possibly ``&&``-joined) in the workspace."""
    for part in command.split(" && "):
        words = shlex.split(part)
        assert words[0] == "ledger"
        r = d.ledger(*words[1:])
        assert r.exit_code == 0, (part, r.stdout, r.stderr)


# -- the Done-when cases ---------------------------------------------------------------

def test_a_perf_knob_added_by_hand_fails_naming_file_line_and_the_command(deploy, tmp_path):
    d = deploy
    d.edit(d.script, "export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\n",
           "export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\nexport SGLANG_SM120_MMA_TARGET_CTAS_X=512\n")
    line = line_of(d.script, "SGLANG_SM120_MMA_TARGET_CTAS_X")
    r = d.check()
    assert r.exit_code == 1
    assert (f"error: serve_decode.sh:{line}: SGLANG_SM120_MMA_TARGET_CTAS_X: unset -> 512 in "
            "target decode is not in the ledger [unledgered]") in r.stdout
    fixes = fix_commands(r.stdout)
    assert fixes == ["ledger record knob decode SGLANG_SM120_MMA_TARGET_CTAS_X=512 --adopt "
                     "--before-unset --class perf --title 'SGLANG_SM120_MMA_TARGET_CTAS_X "
                     "unset -> 512'"]
    # the printed command records it; a perf entry then still needs its evidence
    run_fix(d, fixes[0] + " --no-validate")
    r = d.check()
    assert r.exit_code == 1 and "a perf change added without evidence [evidence]" in r.stdout
    entry = d.ledger("list", "--json").json()[-1]["id"]
    assert json.loads(d.check("--emit-matrix").stdout)["include"][0]["entry"] == entry
    add_evidence(d, tmp_path, entry, 1000.0, 1130.0)
    r = d.check()
    assert r.exit_code == 0, r.stdout
    assert f"entry {entry} added (perf)" in r.stdout and "gain +" in r.stdout
    assert json.loads(d.check("--emit-matrix").stdout) == {"include": []}


def test_recording_through_the_ledger_with_evidence_passes(deploy, tmp_path):
    d = deploy
    r = d.ledger("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
                 "perf", "--title", "CTAS 512 on decode", "--json")
    assert r.exit_code == 0, r.stderr
    entry = r.json()["id"]
    assert d.check().exit_code == 1  # no evidence yet
    add_evidence(d, tmp_path, entry, 1000.0, 1128.0)
    r = d.check("--json")
    assert r.exit_code == 0, r.stdout
    out = r.json()
    assert out["ok"] and out["errors"] == 0
    assert out["changes"][0]["knob"] == "SGLANG_SM120_MMA_TARGET_CTAS"
    assert out["changes"][0]["entries"] == [entry]
    assert out["entries"][0]["verdict"] == "gain"


def test_a_bugfix_without_evidence_passes(deploy):
    d = deploy
    r = d.ledger("record", "knob", "decode-k8s", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600",
                 "--class", "bugfix", "--title", "longer bootstrap timeout")
    assert r.exit_code == 0, r.stderr
    r = d.check()
    assert r.exit_code == 0, r.stdout
    assert "0 errors, 0 warnings" in r.stdout and "added (bugfix)" in r.stdout


def test_a_flag_removed_by_hand_from_k8s_args_fails_and_adopt_records_it(deploy, monkeypatch):
    d = deploy
    line = line_of(d.manifest, "- --enable-metrics")
    d.edit(d.manifest, "            - --enable-metrics\n", "")
    r = d.check()
    assert r.exit_code == 1
    assert (f"error: k8s/decode.yaml:{line}: --enable-metrics: true -> unset in target "
            f"decode-k8s is not in the ledger (removed: line {line} of the base)") in r.stdout
    fixes = fix_commands(r.stdout)
    assert fixes == ["ledger adopt decode-k8s --git . --path k8s/decode.yaml && "
                     "ledger adopt --apply adopt-decode-k8s.yaml"]
    monkeypatch.chdir(d.root)  # the printed commands run from the workspace, as an operator would
    run_fix(d, fixes[0])
    r = d.check()
    assert r.exit_code == 0, r.stdout  # adopted as the catalog's class (not perf)


def test_an_image_tag_bump_without_an_entry_fails(deploy):
    d = deploy
    line = line_of(d.manifest, "image:")
    d.edit(d.manifest, "lmsysorg/sglang:v0.5.20-cu129", "lmsysorg/sglang:v0.5.23-cu129")
    r = d.check()
    assert r.exit_code == 1
    assert (f"error: k8s/decode.yaml:{line}: engine release: sglang==0.5.20 -> sglang==0.5.23 "
            "in target decode-k8s has no entry") in r.stdout
    # an entry of the range on that target naming the release explains it
    r = d.ledger("record", "knob", "decode-k8s", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600",
                 "--class", "bugfix", "--title", "upgrade to sglang 0.5.23: longer bootstrap")
    assert r.exit_code == 0, r.stderr
    assert d.check().exit_code == 0


def test_severities_come_from_the_base_and_can_warn(deploy):
    d = deploy
    git(d.root, "checkout", "-q", "main")
    with open(d.root / "ledger.yaml", "a") as f:
        f.write("checks:\n  release: warn\n  evidence: off\n")
    commit_all(d.root, "checks")
    git(d.root, "checkout", "-q", "feature")
    git(d.root, "merge", "-q", "main")
    d.edit(d.manifest, "v0.5.20-cu129", "v0.5.23-cu129")
    r = d.check()
    assert r.exit_code == 0 and "warn: k8s/decode.yaml:" in r.stdout and "[release]" in r.stdout
    assert d.check("--fail-on", "warn").exit_code == 1
    # a branch cannot switch its own gate off: the base's checks judge it
    d.edit(d.root / "ledger.yaml", "  release: warn\n", "  release: warn\n  unledgered: off\n")
    d.edit(d.script, "CTAS=256", "CTAS=384")
    r = d.check()
    assert r.exit_code == 1 and "[unledgered]" in r.stdout


def test_a_bad_severity_is_refused_naming_the_file(deploy):
    d = deploy
    with open(d.root / "ledger.yaml", "a") as f:
        f.write("checks:\n  unledgered: loud\n")
    commit_all(d.root, "checks")
    r = d.check()
    assert r.exit_code == 1 and "ledger.yaml" in r.stderr and "'loud' is no severity" in r.stderr


def test_a_rewritten_entry_history_fails(deploy):
    d = deploy
    git(d.root, "checkout", "-q", "main")
    r = d.ledger("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
                 "bugfix", "--title", "CTAS 512", "--why", "a hang at c64", "--json")
    entry = r.json()["id"]
    git(d.root, "checkout", "-q", "feature")
    git(d.root, "merge", "-q", "main")
    assert d.check().exit_code == 0
    entries = d.root / "entries.jsonl"
    text = entries.read_text()
    assert text.count('"why": "a hang at c64"') == 2  # the entry's and its record action's
    entries.write_text(text.replace('"why": "a hang at c64"', '"why": "it was always fine"'))
    commit_all(d.root, "tidy the history")
    r = d.check()
    assert r.exit_code == 1
    assert f"entry {entry} (CTAS 512): its history was rewritten" in r.stdout
    git(d.root, "revert", "--no-edit", "HEAD")
    assert d.check().exit_code == 0
    entries.write_text("")
    commit_all(d.root, "drop the entry")
    r = d.check()
    assert r.exit_code == 1 and f"entry {entry} (CTAS 512) was removed" in r.stdout


def test_an_entry_whose_file_disagrees_at_head_fails(deploy):
    d = deploy
    r = d.ledger("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8", "--class",
                 "bugfix", "--title", "queue 8")
    assert r.exit_code == 0
    d.edit(d.script, "QUEUE_SIZE=8", "QUEUE_SIZE=16")  # a hand edit on top, same range
    r = d.check()
    assert r.exit_code == 1
    assert ("SGLANG_DISAGGREGATION_QUEUE_SIZE is 16 in the file at head, the ledger expects 8"
            in r.stdout) and "[state]" in r.stdout


def test_a_regression_fails_and_stale_evidence_warns(deploy, tmp_path):
    d = deploy
    r = d.ledger("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
                 "perf", "--title", "CTAS 512", "--json")
    entry = r.json()["id"]
    add_evidence(d, tmp_path, entry, 1000.0, 800.0)
    r = d.check()
    assert r.exit_code == 1 and "its evidence says regression: regression" in r.stdout
    d2 = d.ledger("record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8", "--class",
                  "bugfix", "--title", "queue 8")
    assert d2.exit_code == 0
    r = d.check("--json").json()
    rules = {(f["rule"], f["severity"]) for f in r["findings"]}
    assert ("stale-evidence", "warn") in rules and ("evidence", "error") in rules


def test_unreadable_target_at_head_is_an_error_not_a_pass(deploy):
    d = deploy
    d.edit(d.manifest, "          args:\n", "          args: [\n")
    r = d.check()
    assert r.exit_code == 1
    assert "error: k8s/decode.yaml: target decode-k8s: k8s/decode.yaml at head" in r.stdout
    assert "[unreadable]" in r.stdout
    git(d.root, "rm", "-q", "k8s/decode.yaml")
    commit_all(d.root, "gone")
    r = d.check()
    assert r.exit_code == 1 and "is not in the repository at head" in r.stdout


def test_check_reads_commits_and_never_writes(deploy):
    d = deploy
    d.edit(d.script, "CTAS=256", "CTAS=384")
    # the work tree says otherwise: only the commits count
    d.script.write_text(SERVE_DECODE)
    before = _snapshot(d.root)
    r = d.check()
    assert r.exit_code == 1 and "SGLANG_SM120_MMA_TARGET_CTAS: 256 -> 384" in r.stdout
    assert d.ledger("check", "--base", "main", "--head", "main").exit_code == 0
    assert _snapshot(d.root) == before


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_revisions_are_data(deploy):
    d = deploy
    r = d.ledger("check", "--base", "--output=/tmp/x")
    assert r.exit_code != 0 and not Path("/tmp/x").exists()
    r = d.ledger("check", "--base", "no-such-branch")
    assert r.exit_code == 2 and "names no commit" in r.stderr
    r = d.ledger("check")  # a branch without upstream
    assert r.exit_code == 2 and "give --base REF" in r.stderr


# -- outputs ----------------------------------------------------------------------------

def test_markdown_comment_has_the_marker_classes_verdicts_and_escapes(deploy, tmp_path):
    d = deploy
    r = d.ledger("record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512", "--class",
                 "perf", "--title", "CTAS <b>512</b> | fast", "--json")
    entry = r.json()["id"]
    add_evidence(d, tmp_path, entry, 1000.0, 1130.0)
    d.ledger("record", "knob", "decode-k8s", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600",
             "--class", "bugfix", "--title", "bootstrap 600")
    d.edit(d.manifest, '            - "64"\n', '            - "128"\n')
    r = d.check("--format", "markdown")
    assert r.exit_code == 1
    md = r.stdout
    assert md.startswith("<!-- knob-ledger-check -->\n### knob ledger check: failed\n")
    assert "#### perf entries" in md and "#### bugfix entries" in md
    assert md.index("#### perf entries") < md.index("#### bugfix entries")
    assert "<b>" not in md and "CTAS &lt;b&gt;512&lt;/b&gt; \\| fast" in md
    perf_row = next(line for line in md.splitlines() if line.startswith(f"| {entry} |"))
    assert "| added |" in perf_row and "| gain |" in perf_row and "gain +" in perf_row
    assert "no evidence" in next(line for line in md.splitlines() if "bootstrap 600" in line)
    line = line_of(d.manifest, '"128"') - 1  # the flag's line
    assert f"k8s/decode.yaml:{line}" in md and "**none**" in md
    assert "```\nledger adopt decode-k8s --git . --path k8s/decode.yaml" in md


def test_github_annotations(deploy):
    d = deploy
    d.edit(d.script, "CTAS=256", "CTAS=384")
    line = line_of(d.script, "CTAS=384")
    r = d.check("--format", "github")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"::error file=serve_decode.sh,line={line},title=ledger check%3A unledgered::"
        "SGLANG_SM120_MMA_TARGET_CTAS: 256 -> 384 in target decode is not in the ledger"
        "%0Afix: ledger record knob decode SGLANG_SM120_MMA_TARGET_CTAS=384 --adopt "
        "--before 256 --class perf")


def test_a_target_outside_the_repository_is_named_and_the_separate_layout_turns_it_off(
        story, ledger):
    """conftest's story: the serve script lives outside the workspace repo, under a root."""
    root = story.root
    git(root, "checkout", "-q", "-b", "feature")
    r = ledger("-C", root, "check", "--base", "main")
    assert r.exit_code == 1 and "[outside-repo]" in r.stdout
    assert f"{story.script} is outside the repository" in r.stdout
    git(root, "checkout", "-q", "main")
    with open(root / "ledger.yaml", "a") as f:
        f.write("checks:\n  outside-repo: off\n")
    commit_all(root, "a separate ledger repo")
    git(root, "checkout", "-q", "feature")
    git(root, "merge", "-q", "main")
    r = ledger("-C", root, "record", "knob", "decode", "SGLANG_DISAGGREGATION_QUEUE_SIZE=8",
               "--class", "bugfix", "--title", "queue 8")
    assert r.exit_code == 0, r.stderr
    r = ledger("-C", root, "check", "--base", "main")
    assert r.exit_code == 0, r.stdout  # the ledger's own history is still judged
    (root / "entries.jsonl").write_text("")  # an entry of the range dropped in the range:
    commit_all(root, "drop")                  # no history of the base was rewritten
    assert ledger("-C", root, "check", "--base", "main").exit_code == 0


def test_a_perf_tuning_taken_out_by_hand_is_recorded_as_reverted(deploy):
    """The inversion trap: recording the removal as an applied perf change would make an
    incident's `revert --perf-only` put the tuning back; the printed command records the
    tuning off the table instead, and runs."""
    d = deploy
    d.edit(d.script, "export SGLANG_SM120_MMA_TARGET_CTAS=256   # wave quantisation at c64: "
           "see ledger\n", "")
    r = d.check()
    assert r.exit_code == 1
    (fix,) = fix_commands(r.stdout)
    assert fix == ("ledger record knob decode SGLANG_SM120_MMA_TARGET_CTAS=256 --class perf "
                   "--title 'SGLANG_SM120_MMA_TARGET_CTAS=256 (taken back by hand)' "
                   "--already-reverted")
    run_fix(d, fix)
    r = d.check()
    assert r.exit_code == 0, r.stdout  # reverted: no evidence asked of it
    off = d.ledger("diff").stdout
    assert "off the table: 1 reverted entry" in off and "SGLANG_SM120_MMA_TARGET_CTAS" in off
