"""Issue 25 item 8: a flag added to a launch whose last argument is a value on its own
line (`--kv-transfer-config \\` then the JSON, as vLLM's disaggregated-prefill examples
write it): bash itself passes the new flag and leaves the pair together."""

from __future__ import annotations

import subprocess

from envknobs.formats import get_format

SCRIPT = """\
#!/bin/bash
# decode instance (vLLM P/D with NIXL)
CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen2.5-7B-Instruct \\
    --port 8200 \\
    --kv-transfer-config \\
    '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""


def bash_argv(script: str) -> list[str]:
    shim = 'vllm() { printf "%s\\n" "$@"; }\n'
    out = subprocess.run(["bash", "-c", shim + script], capture_output=True, text=True,
                         check=True, timeout=30)
    return out.stdout.splitlines()


def test_new_flag_goes_before_the_flag_whose_value_is_on_the_last_line():
    fmt = get_format("bash")
    out = fmt.set(SCRIPT, "--max-num-seqs", "32")
    argv = bash_argv(out)
    k = argv.index("--kv-transfer-config")
    assert argv[k + 1] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert argv[argv.index("--max-num-seqs") + 1] == "32"
    assert fmt.parse(out)["--kv-transfer-config"] == argv[k + 1]
    assert fmt.unset(out, "--max-num-seqs") == SCRIPT


MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-decode
spec:
  template:
    spec:
      containers:
        - name: decode
          image: vllm/vllm-openai:latest
          command: ["/bin/sh", "-c"]
          args:
            - |
              vllm serve Qwen/Qwen2.5-7B-Instruct \\
                --port 8200 \\
                --kv-transfer-config \\
                '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""

UNIT = """\
[Service]
ExecStart=/opt/vllm/bin/vllm serve Qwen/Qwen2.5-7B-Instruct \\
    --port 8200 \\
    --kv-transfer-config \\
    '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""


def test_a_yaml_block_script_gets_the_new_flag_before_the_pair_too():
    import yaml

    fmt = get_format("k8s", container="decode")
    out = fmt.set(MANIFEST, "--max-num-seqs", "32")
    script = yaml.safe_load(out)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    argv = bash_argv(script)
    k = argv.index("--kv-transfer-config")
    assert argv[k + 1] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert argv[argv.index("--max-num-seqs") + 1] == "32"
    assert fmt.unset(out, "--max-num-seqs") == MANIFEST


def test_a_units_command_gets_the_new_flag_before_the_pair(tmp_path):
    from tests.envknobs.systemd_oracle import SYSTEMD_ANALYZE
    from tests.envknobs.systemd_oracle import systemd_reads

    fmt = get_format("systemd")
    out = fmt.set(UNIT, "--max-num-seqs", "32")
    assert out == UNIT.replace("    --kv-transfer-config", "    --max-num-seqs 32 \\\n"
                               "    --kv-transfer-config")
    if SYSTEMD_ANALYZE is not None:
        (argv,) = systemd_reads(out, tmp_path).commands
        k = argv.index("--kv-transfer-config")
        assert argv[k + 1] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert fmt.unset(out, "--max-num-seqs") == UNIT
