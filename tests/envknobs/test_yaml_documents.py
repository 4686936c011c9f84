"""Issue 50 item 4: a ``yaml-map`` target in a file of several YAML documents.

The fixture is shaped like public vLLM manifests: a ConfigMap whose ``data:`` is the
server's env (mounted with ``envFrom: configMapRef``), then the Deployment and its
Service, in one file.  The key path picks the document it is found in; where it is found
in several, the edit is refused naming each document and the ``DOC:PATH`` that picks one.
"""

from __future__ import annotations

import pytest

from envknobs.formats import get_format
from envknobs.formats.common import FormatError
from tests.cli.test_exact_reverts import ws  # noqa: F401  (the workspace fixture)

BUNDLE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: vllm-llama-env
data:
  VLLM_ATTENTION_BACKEND: FLASHINFER
  # tuned on H100
  VLLM_USE_V1: "1"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-llama
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.9.2
          args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "128"]
          envFrom:
            - configMapRef:
                name: vllm-llama-env
---
apiVersion: v1
kind: Service
metadata:
  name: vllm-llama
spec:
  ports:
    - port: 8000
"""


def test_the_key_path_picks_the_document_it_is_in():
    env = get_format("yaml-map", key_path="data", strings=True)
    assert env.parse(BUNDLE) == {"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_V1": "1"}
    out = env.set(BUNDLE, "VLLM_LOGGING_LEVEL", "DEBUG")
    assert '  VLLM_USE_V1: "1"\n  VLLM_LOGGING_LEVEL: DEBUG\n---\n' in out
    assert env.unset(out, "VLLM_LOGGING_LEVEL") == BUNDLE


def test_a_path_in_several_documents_is_refused_naming_each():
    with pytest.raises(FormatError) as e:
        get_format("yaml-map", key_path="metadata").parse(BUNDLE)
    said = str(e.value)
    assert "the key path is in 3 YAML documents" in said
    assert "document 1 at line 1 (ConfigMap/vllm-llama-env)" in said
    assert "document 2 at line 10 (Deployment/vllm-llama)" in said
    assert "document 3 at line 26 (Service/vllm-llama)" in said
    assert "--key-path DOC:metadata" in said
    assert get_format("yaml-map", key_path="3:metadata").parse(BUNDLE) == {"name": "vllm-llama"}
    with pytest.raises(FormatError, match="no YAML document 4 .it holds 3"):
        get_format("yaml-map", key_path="4:metadata").parse(BUNDLE)
    with pytest.raises(FormatError, match="the file holds 3 YAML documents"):
        get_format("yaml-map").parse(BUNDLE)


def test_a_record_in_a_bundle_reverts_byte_for_byte(ws):  # noqa: F811
    path = ws.add("vllm.yaml", BUNDLE, "--format", "yaml-map", "--key-path", "1:data")
    r = ws.record("VLLM_ATTENTION_BACKEND=FLASH_ATTN")
    assert "FLASHINFER -> FLASH_ATTN" in r.stdout
    ws.record("VLLM_USE_V1", "--unset")
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == BUNDLE
    shown = ws.run("target", "show", "t").stdout
    assert "VLLM_ATTENTION_BACKEND" in shown and "vllm-llama" not in shown.split("\n", 1)[1]


def test_a_document_is_picked_by_its_kind_and_name():
    env = get_format("yaml-map", key_path="ConfigMap/vllm-llama-env:data", strings=True)
    assert env.parse(BUNDLE)["VLLM_USE_V1"] == "1"
    out = env.set(BUNDLE, "VLLM_USE_V1", "0")
    assert out == BUNDLE.replace('VLLM_USE_V1: "1"', 'VLLM_USE_V1: "0"')
    meta = get_format("yaml-map", key_path="Service/vllm-llama:metadata")
    assert meta.parse(BUNDLE) == {"name": "vllm-llama"}
    with pytest.raises(FormatError, match=r"no YAML document is Deployment/other: document 1 "
                                          r"at line 1 \(ConfigMap/vllm-llama-env\); document 2 "
                                          r"at line 10 \(Deployment/vllm-llama\); document 3 at "
                                          r"line 26 \(Service/vllm-llama\); pick one with --doc N"):
        get_format("yaml-map", key_path="Deployment/other:metadata").parse(BUNDLE)


def test_target_add_doc_selects_the_document_and_the_refusal_offers_it(ws):  # noqa: F811
    path = ws.add("bundle.yaml", BUNDLE, "--format", "yaml-map", "--doc",
                  "ConfigMap/vllm-llama-env", "--key-path", "data")
    ws.record("VLLM_USE_V1=0")
    assert 'VLLM_USE_V1: "0"' in path.read_text()
    assert ws.run("revert", "--perf-only", "--why", "w").exit_code == 0
    assert path.read_text() == BUNDLE
    r = ws.run("target", "add", "u", path, "--format", "yaml-map", "--key-path", "metadata")
    assert r.exit_code == 1 and "bundle.yaml" in r.stderr
    assert "document 1 at line 1 (ConfigMap/vllm-llama-env)" in r.stderr
    assert "pick one with --doc N or --doc KIND/NAME" in r.stderr
    r = ws.run("target", "add", "v", path, "--format", "k8s", "--doc", "1")
    assert r.exit_code == 2 and "--doc selects a document of a yaml-map target" in r.stderr
