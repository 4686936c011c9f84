"""Files nested deeper than any reader follows (issue 30): a k8s manifest 1,500 levels
deep, the same as yaml-map, dotenv or bash, and bash compound commands 1,500 deep.  Every
reader has a depth limit (``envknobs.formats.common.text.MAX_NESTING``): through the real
CLI the answer is an ``error:`` naming the file and the line, exit 1, no RecursionError
traceback, nothing changed; a file at the limit is read and edited as any other."""

from __future__ import annotations

import pytest

from envknobs.formats.common.text import MAX_NESTING
from tests.store.kit import assert_refused
from tests.store.kit import git
from tests.store.kit import run_cli
from tests.store.kit import tree

# A decode Deployment (its shape from the SGLang PD examples); its pod carries an
# annotation-like subtree that is then nested LEVELS deep.
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang-decode
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.5
          env:
            - name: SGLANG_SM120_MMA_TARGET_CTAS
              value: "256"
          resources:
            limits:
              nvidia.com/gpu: "8"
"""


def block_nested(levels: int) -> str:
    """MANIFEST with a block mapping ``levels`` deep under the container (at depth 7)."""
    lines, indent = [], 10
    for i in range(levels - 7):
        lines.append(" " * indent + f"k{i}:")
        indent += 2
    return MANIFEST + "\n".join(lines) + " leaf\n"


def flow_nested(levels: int) -> str:
    return MANIFEST + "          extra: " + "[" * levels + "]" * levels + "\n"


def workspace(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    root = tmp_path / "ws"
    assert run_cli(tmp_path, "init", root, "--root", f"tmp={tmp_path}").returncode == 0
    return root, path


def add(root, path, fmt):
    extra = ("--container", "sglang") if fmt == "k8s" else ()
    return run_cli(root, "target", "add", "decode", path, "--format", fmt, *extra)


DEEP = {
    "k8s block": ("k8s", "decode.yaml", block_nested(1500), "mappings and lists nested more than"),
    "k8s flow": ("k8s", "decode.yaml", flow_nested(1500), "mappings and lists nested more than"),
    "yaml-map": ("yaml-map", "decode.yaml", block_nested(1500), "nested more than"),
    "dotenv": ("dotenv", "decode.env", block_nested(1500), "YAML nested more than"),
    "dotenv flow": ("dotenv", "decode.env", flow_nested(1500), "YAML nested more than"),
    "bash yaml": ("bash", "serve.sh", block_nested(1500), "YAML nested more than"),
    "bash if": ("bash", "serve.sh", "if true; then\n" * 1500 + "export A=1\n" + "fi\n" * 1500,
                "compound commands"),
    "bash subshell": ("bash", "serve.sh", "( " * 1500 + "export A=1" + " )" * 1500 + "\n",
                      "compound commands"),
    "bash group": ("bash", "serve.sh", "{ " * 1500 + "export A=1; " + "}; " * 1500 + "\n",
                   "compound commands"),
    "bash functions": ("bash", "serve.sh", "".join(f"f{i}() {{\n" for i in range(1500))
                       + "export A=1\n" + "}\n" * 1500, "compound commands"),
}


@pytest.mark.parametrize("case", list(DEEP))
def test_a_file_nested_1500_deep_is_refused_naming_it(tmp_path, case):
    fmt, name, text, says = DEEP[case]
    root, path = workspace(tmp_path, name, text)
    head = git(root, "rev-parse", "HEAD")
    r = add(root, path, fmt)
    assert_refused(r, f"{path}: line ", says, f"than {MAX_NESTING} deep")
    assert "RecursionError" not in r.stderr + r.stdout
    assert git(root, "rev-parse", "HEAD") == head and "decode" not in run_cli(
        root, "target", "list").stdout


def test_a_managed_manifest_edited_to_1500_deep(tmp_path):
    """Added sane, then nested by hand: writers refuse, readers and doctor report it."""
    root, path = workspace(tmp_path, "decode.yaml", MANIFEST)
    assert add(root, path, "k8s").returncode == 0
    r = run_cli(root, "record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
                "--class", "perf", "--title", "ctas")
    assert r.returncode == 0, r.stderr
    path.write_text(block_nested(1500).replace('"256"', '"512"'))
    before = tree(root, path), git(root, "rev-parse", "HEAD")
    for command in (("revert", "ctas"), ("record", "knob", "decode",
                                          "SGLANG_SM120_MMA_TARGET_CTAS=64", "--class", "perf",
                                          "--title", "x")):
        assert_refused(run_cli(root, *command), str(path), "nested more than 100 deep")
    for command in (("status",), ("diff",), ("doctor",), ("target", "show", "decode")):
        r = run_cli(root, *command)
        assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr + r.stdout
        assert "nested more than 100 deep" in r.stderr + r.stdout, (command, r.stderr)
    assert (tree(root, path), git(root, "rev-parse", "HEAD")) == before


@pytest.mark.parametrize("fmt,text", [
    ("k8s", block_nested(MAX_NESTING)),
    ("k8s", flow_nested(MAX_NESTING - 6)),
    ("bash", "#!/bin/bash\n" + "if true; then\n" * (MAX_NESTING - 1)
     + "export SGLANG_SM120_MMA_TARGET_CTAS=256\n" + "fi\n" * (MAX_NESTING - 1)
     + "export SGLANG_SM120_MMA_TARGET_CTAS=256\nexec python -m sglang.launch_server\n"),
])
def test_a_file_at_the_limit_is_read_and_edited(tmp_path, ledger, fmt, text):
    """Also in-process (the CliRunner's deeper stack): the limit leaves room to recurse."""
    root, path = workspace(tmp_path, "decode.yaml" if fmt == "k8s" else "serve.sh", text)
    assert add(root, path, fmt).returncode == 0
    r = ledger("-C", root, "record", "knob", "decode", "SGLANG_SM120_MMA_TARGET_CTAS=512",
               "--class", "perf", "--title", "ctas", *(("--at", str(text.count("\n") - 1))
                                                       if fmt == "bash" else ()))
    assert r.exit_code == 0, r.stderr
    assert ledger("-C", root, "revert", "ctas").exit_code == 0
    assert path.read_text() == text
