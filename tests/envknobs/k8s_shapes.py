"""Manifests in the shapes real SGLang / vLLM deployments take (written for these tests).

Modelled on public examples: LeaderWorkerSet multi-node serving, RoleBasedGroup PD
groups (v1alpha1 ``roles[].template`` and v1alpha2 patterns, role templates and template
patches, a sidecar in every role), mooncake PD files whose roles all call their container
``sglang``, OME ClusterServingRuntimes (``engineConfig``/``decoderConfig`` with leader and
worker ``runner:`` blocks), production-stack style Deployments, CronJobs and ``List``s.
"""

from __future__ import annotations

LWS = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: sglang
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    restartPolicy: RecreateGroupOnPodRestart
    leaderTemplate:
      metadata:
        labels:
          role: leader
      spec:
        containers:
          - name: sglang-leader
            image: lmsysorg/sglang:latest
            env:
              - name: HF_TOKEN
                value: $HF_TOKEN
              - name: LWS_WORKER_INDEX
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.labels['leaderworkerset.sigs.k8s.io/worker-index']
              - name: SGLANG_DISAGGREGATION_WAITING_TIMEOUT
                value: '300'  # liveness
            command:
              - python3
              - -m
              - sglang.launch_server
              - --tp
              - "16"
    workerTemplate:
      spec:
        containers:
          - name: sglang-worker
            image: lmsysorg/sglang:latest
            env:
            - name: HF_TOKEN
              value: $HF_TOKEN
"""

# Two LeaderWorkerSets (prefill and decode) whose leader and worker are both `sglang`.
LWS_PD = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: prefill
spec:
  leaderWorkerTemplate:
    leaderTemplate:
      spec:
        containers:
        - name: sglang
          env:
          - name: MODE
            value: prefill
    workerTemplate:
      spec:
        containers:
        - name: sglang
          env:
          - name: MODE
            value: prefill
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: decode
spec:
  leaderWorkerTemplate:
    leaderTemplate:
      spec:
        containers:
        - name: sglang
          env:
          - {name: MODE, value: decode}
          - {name: SGLANG_SM120_MMA_TARGET_CTAS, value: "512"}
    workerTemplate:
      spec:
        containers:
        - name: sglang
"""

RBG_V1 = """\
apiVersion: workloads.x-k8s.io/v1alpha1
kind: RoleBasedGroup
metadata:
  name: sglang-pd
spec:
  roles:
    - name: router
      replicas: 1
      template:
        spec:
          containers:
            - name: scheduler
              image: lmsysorg/sglang-router
    - name: prefill
      replicas: 1
      template:
        spec:
          containers:
            - name: sglang
              image: lmsysorg/sglang:v0.5.3
              env:
                - name: POD_IP
                  valueFrom:
                    fieldRef:
                      fieldPath: status.podIP
                - name: SGLANG_DISAGGREGATION_THREAD_POOL_SIZE
                  value: "8"
            - name: patio-runtime
              image: patio:v1
              env:
                - name: PATIO_PORT
                  value: "9091"
    - name: decode
      replicas: 1
      template:
        spec:
          containers:
            - name: sglang
              image: lmsysorg/sglang:v0.5.3
              env:
                - name: SGLANG_DISAGGREGATION_THREAD_POOL_SIZE
                  value: "16"
            - name: patio-runtime
              image: patio:v1
"""

RBG_V2 = """\
# PD with role templates and leader/worker patterns
apiVersion: workloads.x-k8s.io/v1alpha2
kind: RoleBasedGroup
metadata:
  name: pd-lws
spec:
  roleTemplates:
    - name: sglang-base
      template:
        spec:
          containers:
            - name: sglang
              image: lmsysorg/sglang:v0.5.5
              env:
                - name: SGLANG_TIMEOUT_KEEP_ALIVE
                  value: "5"
  roles:
    - name: prefill
      standalonePattern:
        templateRef:
          name: sglang-base
          patch:
            spec:
              containers:
                - name: sglang
                  env:
                    - name: SGLANG_X
                      value: "1"
    - name: decode
      leaderWorkerPattern:
        size: 2
        template:
          spec:
            containers:
              - name: sglang
                image: lmsysorg/sglang:v0.5.5
        leaderTemplatePatch:
          spec:
            containers:
              - name: sglang
                env:
                  - name: ROLE
                    value: leader
        workerTemplatePatch:
          spec:
            containers:
              - name: sglang
                env:
                  - name: ROLE
                    value: worker
"""

OME_PD = """\
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: srt-deepseek-pd
spec:
  engineConfig:
    leader:
      runner:
        name: ome-container
        image: docker.io/lmsysorg/sglang:v0.4.8
        env:
          - name: SGLANG_SET_CPU_AFFINITY
            value: "true"
        command:
          - sh
          - -c
          - >
            python3 -m sglang.launch_server --disaggregation-mode prefill
    worker:
      size: 1
      runner:
        name: ome-container
        image: docker.io/lmsysorg/sglang:v0.4.8
        resources:
          limits:
            nvidia.com/gpu: "8"
  decoderConfig:
    leader:
      runner:
        name: ome-container
        env:
          - name: SGLANG_DISAGGREGATION_THREAD_POOL_SIZE
            value: "16"
    worker:
      runner:
        name: ome-container
        env:
          - name: SGLANG_DISAGGREGATION_THREAD_POOL_SIZE
            value: "16"
  routerConfig:
    runner:
      name: router
      image: sgl-router:dev
"""

OME_SIMPLE = """\
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: srt-qwen3-8b
spec:
  engineConfig:
    volumes:
      - name: dshm
        emptyDir:
          medium: Memory
    runner:
      name: ome-container
      image: docker.io/lmsysorg/sglang:v0.5.5
      command:
        - python3
        - -m
        - sglang.launch_server
---
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  engine:
    runner:
      image: docker.io/lmsysorg/sglang:v0.5.5
      env:
        - name: SGLANG_ENABLE_METRICS
          value: "1"
"""

DEPLOYMENTS = """\
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: vllm-llama3-deployment-vllm
  spec:
    template:
      spec:
        initContainers:
        - name: fetch-model
          image: busybox
          env:
          - name: MODEL_URL
            value: s3://models/llama3
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.9.0
          env:
          - name: VLLM_USE_V1
            value: "1"
          - name: EMPTY
            value:
- apiVersion: batch/v1
  kind: CronJob
  metadata:
    name: nightly-bench
  spec:
    jobTemplate:
      spec:
        template:
          spec:
            containers:
            - name: vllm
              image: vllm/vllm-openai:v0.9.0
"""

# The same Deployment twice (a copy-paste accident): only path addresses tell them apart.
TWINS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: twin}
spec:
  template:
    spec:
      containers:
      - name: sglang
        env:
        - name: A
          value: '1'
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: twin}
spec:
  template:
    spec:
      containers:
      - name: sglang
        env:
        - name: A
          value: '1'
"""

NO_CONTAINERS = """\
apiVersion: v1
kind: Service
metadata:
  name: sglang-router
spec:
  ports:
    - port: 8000
  selector:
    app: sglang
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  x: "1"
"""

SHAPES = {
    "lws": LWS,
    "lws_pd": LWS_PD,
    "rbg_v1": RBG_V1,
    "rbg_v2": RBG_V2,
    "ome_pd": OME_PD,
    "ome_simple": OME_SIMPLE,
    "deployments": DEPLOYMENTS,
    "twins": TWINS,
}
