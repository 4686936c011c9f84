"""Containers that keep their server flags in YAML, modelled on public manifests.

* ``SPLIT_TOKENS``: an SGLang Deployment (the sglang repo's k8s examples): ``command:``
  as a flow list, ``args:`` mixing ``--x=v`` items, split tokens, quoted numbers and a
  switch with a comment;
* ``SHELL_BLOCK``: the two-node SGLang StatefulSet shape (``command: [/bin/bash, -c]``
  then a ``- |`` block holding ``python3 -m sglang.launch_server ... \\`` lines);
* ``ALL_IN_COMMAND``: an AIBrix-style vLLM Deployment whose whole launch is ``command:``
  (``python3 -m vllm.entrypoints.openai.api_server`` and its flags, no ``args:``);
* ``FLOW_ARGS``: the vllm/vllm-openai image (its entrypoint is the server) with a flow
  list of args, as llm-d and production-stack render them.
"""

SPLIT_TOKENS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang
spec:
  template:
    spec:
      containers:
        - name: sglang
          image: docker.io/lmsysorg/sglang:latest
          command: ["python3", "-m", "sglang.launch_server"]
          args:
            - --model-path=meta-llama/Llama-3.1-8B-Instruct
            - --tp
            - "1"
            - --enable-metrics   # scraped by prometheus
            - --mem-fraction-static
            - '0.85'
          env:
            - name: SGLANG_ENABLE_TORCH_COMPILE
              value: "0"
"""

SHELL_BLOCK = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: distributed-sglang
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: sglang-container
        image: docker.io/lmsysorg/sglang:latest
        command:
        - /bin/bash
        - -c
        # please modify the sglang serving arguments below, as necessary.
        - |
          python3 -m sglang.launch_server \\
          --model /llm-folder \\
          --dist-init-addr sglang-master-pod:5000 \\
          --tensor-parallel-size 16 \\
          --nnodes 2 \\
          --node-rank $POD_INDEX \\
          --trust-remote-code \\
          --host 0.0.0.0 \\
          --port 8000 \\
          --enable-metrics
        env:
        - name: POD_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
"""

ALL_IN_COMMAND = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-3-1-8b
  labels:
    model.aibrix.ai/name: llama-3-1-8b
spec:
  template:
    spec:
      containers:
        - name: vllm-openai
          image: vllm/vllm-openai:v0.7.1
          command:
            - python3
            - -m
            - vllm.entrypoints.openai.api_server
            - --host
            - "0.0.0.0"
            - --port
            - "8000"
            - --model
            - meta-llama/Llama-3.1-8B-Instruct
            - --served-model-name
            - llama-3-1-8b
          ports:
            - containerPort: 8000
"""

FLOW_ARGS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-decode
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.8.5
        args: ["Qwen/Qwen2.5-7B-Instruct", "--max-num-seqs=64", "--enforce-eager"]
"""

DYNAMO_GRAPH = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: vllm-disagg
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 1
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
    VllmDecodeWorker:
      envFromSecret: hf-token-secret
      componentType: worker
      replicas: 1
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
          workingDir: /workspace/components/backends/vllm
          command:
          - /bin/sh
          - -c
          args:
            - "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --max-num-seqs 64"
"""

KSERVE_PREDICTOR = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: huggingface-llama3
spec:
  predictor:
    model:
      modelFormat:
        name: huggingface
      args:
        - --model_name=llama3
        - --model_id=meta-llama/meta-llama-3-8b-instruct
        - --max-model-len=4096
      env:
        - name: HF_TOKEN
          valueFrom:
            secretKeyRef:
              name: hf-secret
              key: HF_TOKEN
              optional: false
        - name: VLLM_LOGGING_LEVEL
          value: INFO
      resources:
        limits:
          nvidia.com/gpu: "1"
"""
