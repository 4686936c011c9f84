"""Env that reaches a container through ``envFrom``, modelled on OPEA's rendered ChatQnA
manifests (GenAIExamples ``kubernetes/.../chatqna.yaml``): a ``vllm-config`` ConfigMap
with quoted ``data:`` values, a Deployment whose vLLM container takes it by
``envFrom: configMapRef`` beside a Secret and an ``env:`` item, and a second ConfigMap
that lives in another file.
"""

OPEA_VLLM = """\
---
# Source: vllm/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: vllm-config
  labels:
    app.kubernetes.io/name: vllm
data:
  HF_HOME: "/tmp/.cache/huggingface"
  LLM_DEVICE: "cpu"
  PORT: "2080"
  VLLM_CPU_KVCACHE_SPACE: "40"
  no_proxy: ""
---
# Source: vllm/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: chatqna-vllm
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: vllm
          envFrom:
            - configMapRef:
                name: vllm-config
            - secretRef:
                name: hf-token
          env:
            - name: VLLM_CPU_OMP_THREADS_BIND
              value: "all"
            - name: HF_TOKEN
              valueFrom:
                secretKeyRef:
                  name: hf-token
                  key: token
          image: "opea/vllm:latest"
          args:
            - "--model"
            - "meta-llama/Meta-Llama-3-8B-Instruct"
            - "--host"
            - "0.0.0.0"
            - "--port"
            - "2080"
"""

# the same Deployment with a sidecar that takes the ConfigMap too, and one taking a
# ConfigMap written elsewhere
SHARED = OPEA_VLLM + """\
        - name: warmup
          image: "opea/vllm:latest"
          envFrom:
            - configMapRef:
                name: vllm-config
"""

ELSEWHERE = OPEA_VLLM.replace("name: vllm-config\n            - secretRef",
                              "name: vllm-runtime-config\n            - secretRef")

# SGLang's k8s service example (sglang `docker/k8s-sglang-service.yaml`) with its tuning env
# moved to a ConfigMap the server container takes by envFrom, as operators split them; one
# knob (SGLANG_TORCH_PROFILER_DIR) is in both places, the env: item winning.
SGLANG_CM = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: sglang-env
data:
  SGLANG_ENABLE_TORCH_COMPILE: "0"
  SGLANG_TORCH_PROFILER_DIR: "/tmp/profiles"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: meta-llama-31-8b-instruct-sglang
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app: meta-llama-31-8b-instruct-sglang
  template:
    metadata:
      labels:
        app: meta-llama-31-8b-instruct-sglang
        model: meta-llama-31-8b-instruct
        engine: sglang
    spec:
      hostIPC: true
      containers:
        - name: meta-llama-31-8b-instruct-sglang
          image: docker.io/lmsysorg/sglang:latest
          imagePullPolicy: Always # IfNotPresent or Never
          ports:
            - containerPort: 30000
          command: ["python3", "-m", "sglang.launch_server"]
          args:
            ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--host", "0.0.0.0", "--port", "30000"]
          envFrom:
            - configMapRef:
                name: sglang-env
          env:
            - name: HF_TOKEN
              valueFrom:
                secretKeyRef:
                  name: hf-token-secret
                  key: token
            - name: SGLANG_TORCH_PROFILER_DIR
              value: /data/profiles
          resources:
            limits:
              nvidia.com/gpu: 1
"""
