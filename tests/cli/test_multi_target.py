"""One change across several targets (issue 27 item 6): `ledger record knob
decode,prefill,decode-k8s K=V` is one entry with one id, shown once, reverted and restored
together, all or nothing across the files."""

from __future__ import annotations

import pytest

from tests.cli.after_the_incident import BEFORE_TUNING
from tests.cli.after_the_incident import CTAS
from tests.cli.test_story import live_value

PREFILL = BEFORE_TUNING.replace("--disaggregation-mode decode --port 30001",
                                "--disaggregation-mode prefill --port 30000").replace(
    "export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\n",
    f"export SGLANG_DISAGGREGATION_QUEUE_SIZE=4\nexport {CTAS}=256  # as shipped\n")
# The decode Deployment as the k8s side of the same pair runs it (LWS/Dynamo-style env).
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: glm-decode
  labels:
    app: glm
    role: decode
spec:
  replicas: 1
  selector:
    matchLabels:
      app: glm
      role: decode
  template:
    metadata:
      labels:
        app: glm
        role: decode
    spec:
      containers:
        - name: decode
          image: lmsysorg/sglang:v0.5.3-cu129
          command: ["python3", "-m", "sglang.launch_server"]
          args: ["--model-path", "/models/glm", "--disaggregation-mode", "decode"]
          env:
            - name: SGLANG_DISAGGREGATION_QUEUE_SIZE
              value: "4"
          resources:
            limits:
              nvidia.com/gpu: 4
"""


@pytest.fixture
def pair(tmp_path, ledger):
    files = {"decode": tmp_path / "serve_decode.sh", "prefill": tmp_path / "serve_prefill.sh",
             "decode-k8s": tmp_path / "decode.yaml"}
    files["decode"].write_text(BEFORE_TUNING)
    files["prefill"].write_text(PREFILL)
    files["decode-k8s"].write_text(MANIFEST)
    ws = tmp_path / "ws"
    assert ledger("init", ws, "--root", f"ops={tmp_path}").exit_code == 0
    for name, fmt in (("decode", ["bash"]), ("prefill", ["bash"]),
                      ("decode-k8s", ["k8s", "--container", "decode"])):
        r = ledger("-C", ws, "target", "add", name, files[name], "--format", *fmt)
        assert r.exit_code == 0, r.stderr
    return ws, files


def _texts(files) -> dict:
    return {name: p.read_bytes() for name, p in files.items()}


def test_one_entry_across_three_targets_reverted_and_restored_together(pair, ledger):
    ws, files = pair
    start = _texts(files)
    r = ledger("-C", ws, "record", "knob", "decode,prefill,decode-k8s", f"{CTAS}=512",
               "--class", "perf", "--title", "CTAS 512 on the PD pair", "--json")
    assert r.exit_code == 0, r.stderr
    e = r.json()
    assert e["target"] == "decode" and sorted(e["also"]) == ["decode-k8s", "prefill"]
    assert (e["before"], e["also"]["prefill"]["before"], e["also"]["decode-k8s"]["before"]) \
        == (None, "256", None)
    assert live_value(files["decode"], CTAS) == "512"
    assert live_value(files["prefill"], CTAS) == "512"
    assert f"export {CTAS}=512  # as shipped" in files["prefill"].read_text()  # in place
    assert f'- name: {CTAS}\n              value: "512"' in files["decode-k8s"].read_text()
    rows = ledger("-C", ws, "list", "--json").json()
    assert len(rows) == 1 and rows[0]["id"] == e["id"]  # one entry, one id
    show = ledger("-C", ws, "show", e["id"]).stdout
    assert f"{CTAS} in decode, decode-k8s, prefill: unset (default 256) | 256 -> 512" in show
    assert ledger("-C", ws, "status", "--exit-code").exit_code == 0

    r = ledger("-C", ws, "revert", "--perf-only", "--why", "harness hang")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.count(f"reverted {e['id']}") == 1  # shown once
    assert _texts(files) == start  # every file back, byte for byte
    diff = ledger("-C", ws, "diff").stdout
    assert "off the table: 1 reverted entry" in diff and diff.count("CTAS 512 on the PD") == 1
    r = ledger("-C", ws, "restore", "--perf-only")
    assert r.exit_code == 0, r.stderr
    assert all(live_value(files[n], CTAS) == "512" for n in ("decode", "prefill"))
    assert 'value: "512"' in files["decode-k8s"].read_text()
    assert ledger("-C", ws, "status", "--exit-code").exit_code == 0
    docs = ws.parent / "docs"
    assert ledger("-C", ws, "render", "--out", docs).exit_code == 0
    assert (docs / "CHANGELOG.md").read_text().count("[CTAS 512 on the PD pair]") == 1
    entry_md = (docs / "entries" / f"{e['id']}.md").read_text()
    assert f"| `prefill` | `{CTAS}` | `256` | `512` |" in entry_md
    assert f"| `decode-k8s` | `{CTAS}` | *unset* (default `256`) | `512` |" in entry_md


def test_a_refusal_in_one_target_changes_no_file(pair, ledger):
    ws, files = pair
    assert ledger("-C", ws, "record", "knob", "prefill", f"{CTAS}=384", "--class", "perf",
                  "--title", "prefill ctas").exit_code == 0
    files["prefill"].write_text(PREFILL.replace(f"{CTAS}=256", f"{CTAS}=999"))  # by hand
    start = _texts(files)
    r = ledger("-C", ws, "record", "knob", "decode,prefill,decode-k8s", f"{CTAS}=512",
               "--class", "perf", "--title", "CTAS 512")
    assert r.exit_code == 1 and "serve_prefill.sh" in r.stderr and "999" in r.stderr
    assert _texts(files) == start and len(ledger("-C", ws, "list", "--json").json()) == 1
    files["prefill"].write_text(PREFILL.replace(f"{CTAS}=256", f"{CTAS}=512"))
    r = ledger("-C", ws, "record", "knob", "decode,prefill", f"{CTAS}=512", "--class",
               "perf", "--title", "CTAS 512", "--force")
    assert r.exit_code == 1 and "in prefill is already '512': leave that target out" in r.stderr
    start = _texts(files)
    for args, message in ((["decode,,prefill"], "separated by commas"),
                          (["decode,decode"], "decode named twice"),
                          (["decode,prefill", "--at", "5"], "name one target"),
                          (["decode,decode-k8s", "--string"], "name one target"),
                          (["decode,nope"], "nope")):
        r = ledger("-C", ws, "record", "knob", args[0], f"{CTAS}=512", *args[1:], "--class",
                   "perf", "--title", "t")
        assert r.exit_code in (1, 2) and message in r.stderr, (args, r.stderr)
        assert _texts(files) == start and len(ledger("-C", ws, "list", "--json").json()) == 1


@pytest.mark.parametrize("point", ["after-targets", "after-ledger-files"])
def test_a_kill_mid_revert_puts_every_target_back(pair, ledger, point):
    """SIGKILL after some or all target files were written: the next command rolls the
    whole entry back, in every file (as tests/store/test_kills.py does for one)."""
    from tests.store.kit import run_cli

    ws, files = pair
    assert ledger("-C", ws, "record", "knob", "decode,prefill,decode-k8s", f"{CTAS}=512",
                  "--class", "perf", "--title", "CTAS 512").exit_code == 0
    applied = _texts(files)
    r = run_cli(ws, "revert", "--perf-only", env={"LEDGER_CRASH_AT": point})
    assert r.returncode == -9
    r = run_cli(ws, "status", "--exit-code")
    assert r.returncode == 0 and "rolled back" in r.stderr, r.stderr
    assert _texts(files) == applied
