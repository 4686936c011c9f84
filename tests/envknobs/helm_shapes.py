"""Helm values files that keep server flags and env one level above the pod spec.

* ``PSTACK``: production-stack's values for a CPU model (its EKS tutorial's
  ``cpu-tinyllama-light-local`` values): ``vllmConfig`` with typed keys and a block
  ``extraArgs:`` list of quoted ``--x=v`` items and a ``--no-`` switch, ``env:`` a
  Kubernetes list of name/value items beside a ``valueFrom`` secret;
* ``OPEA``: an OPEA GenAIInfra chart's values (``vllm:``/``tgi:`` sections): a flow
  ``extraCmdArgs`` list of split tokens, typed keys beside quoted strings.
"""

PSTACK = """\
servingEngineSpec:
  enableEngine: true
  runtimeClassName: ""
  startupProbe:
    initialDelaySeconds: 60
    periodSeconds: 30
  modelSpec:
  - name: "tinyllama-cpu"
    repository: "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo"
    tag: "v0.8.5.post1"
    modelURL: "/data/models/tinyllama"
    replicaCount: 1
    requestCPU: 1
    requestMemory: "2Gi"
    requestGPU: 0
    pvcStorage: "10Gi"
    vllmConfig:
      dtype: "bfloat16"
      maxModelLen: 4096
      enablePrefixCaching: false
      extraArgs:
        - "--device=cpu"
        - "--no-enable-prefix-caching"
    env:
      - name: VLLM_CPU_KVCACHE_SPACE
        value: "1"
      - name: VLLM_CPU_OMP_THREADS_BIND
        value: "0-1"
      - name: HUGGING_FACE_HUB_TOKEN
        valueFrom:
          secretKeyRef:
            name: hf-token-secret
            key: token

routerSpec:
  enableRouter: true
  routingLogic: "roundrobin"
"""

OPEA = """\
# Default values for vllm.
replicaCount: 1
image:
  repository: opea/vllm
  tag: "latest"
LLM_MODEL_ID: Intel/neural-chat-7b-v3-3
# Set these to configure vLLM
VLLM_CPU_KVCACHE_SPACE: "40"
extraCmdArgs: ["--tensor-parallel-size", "1", "--block-size", "128", "--max-num-seqs", "256"]
resources: {}
"""
