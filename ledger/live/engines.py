"""What a real serving engine says it runs: SGLang's and vLLM's answers, read into the
knob names the ledger compares (pure; the HTTP side is :func:`ledger.live.probe.observe`).

Answers understood:

* **the bundled engine**'s ``/server_info``: ``env`` (raw values), ``knobs`` (effective),
  ``argv`` (read by :func:`ledger.live.probe._observe_url` itself);
* **SGLang**'s ``/server_info`` (``/get_server_info`` in releases before 0.4.8, still an
  alias after): ``ServerArgs`` flattened into the answer (``dataclasses.asdict``, beside
  ``scheduler_info``, ``internal_states`` and ``version``), or nested under
  ``server_args`` (the gRPC ``GetServerInfo`` answer, sglang #11303);
* **vLLM**'s ``/server_info`` (served only with ``VLLM_SERVER_DEV_MODE=1``; asked with
  ``?config_format=json``): ``vllm_config`` (one mapping per sub-config) and
  ``vllm_env`` (``VLLM_*`` variables, defaults included); without it, the labels of
  ``vllm:cache_config_info`` in ``/metrics`` (vllm #3100: ``CacheConfig``'s fields).

A field becomes the launch flag an operator writes for it: ``mem_fraction_static`` is
``--mem-fraction-static``, values spelled as the bash format spells flags (``true``,
``0.85``, lists joined by spaces); a field whose flag has another name is mapped
(:data:`VLLM_FLAG_NAMES`); ``None`` is unset.

These answers hold **effective** values (defaults applied), not the command line: a flag
the serve script leaves unset shows up with its default.  :attr:`ServerState.effective_only`
says so, and ``status --live`` then counts a value equal to the catalog default as the
file's unset (see :mod:`ledger.live.status`), never as a pending restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

from ledger.values import default_text

# vLLM config fields whose CLI flag is not the field's name (vllm/engine/arg_utils.py).
VLLM_FLAG_NAMES = {"cache_dtype": "--kv-cache-dtype", "num_gpu_blocks_override":
                   "--num-gpu-blocks-override", "swap_space_bytes": None,
                   "num_gpu_blocks": None, "num_cpu_blocks": None}
# SGLang answer keys that are state, not launch arguments.
SGLANG_NOT_FLAGS = {"internal_states", "version", "server_args", "status"}
# Keys that only SGLang's ServerArgs has (any two of them identify the answer).
SGLANG_MARKERS = ("model_path", "tp_size", "mem_fraction_static", "chunked_prefill_size",
                  "schedule_policy")


@dataclass
class ServerState:
    """What a server reported, as the ledger names knobs."""

    engine: str  # sglang | vllm
    flags: dict[str, str] = field(default_factory=dict)  # --flag -> value
    env: dict[str, str] = field(default_factory=dict)  # reported env vars (effective)
    version: str | None = None
    effective_only: bool = True


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _flags(fields: dict[str, Any], renames: dict[str, str | None] | None = None
           ) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in fields.items():
        if value is None or isinstance(value, dict):
            continue
        flag = (renames or {}).get(name, flag_name(name))
        if flag is None:
            continue
        out[flag] = default_text(value)
    return out


def is_sglang(info: dict[str, Any]) -> bool:
    args = info.get("server_args") if isinstance(info.get("server_args"), dict) else info
    return sum(k in args for k in SGLANG_MARKERS) >= 2


def from_sglang(info: dict[str, Any]) -> ServerState:
    """SGLang's server_info, flattened or nested (module docstring)."""
    nested = info.get("server_args")
    args = nested if isinstance(nested, dict) else \
        {k: v for k, v in info.items() if k not in SGLANG_NOT_FLAGS}
    version = info.get("version")
    return ServerState("sglang", _flags(args), version=version if isinstance(version, str)
                       else None)


def from_vllm(info: dict[str, Any]) -> ServerState:
    """vLLM's ``/server_info?config_format=json``: each sub-config's fields as flags."""
    config = info.get("vllm_config")
    flags: dict[str, str] = {}
    if isinstance(config, dict):
        for sub in config.values():
            if isinstance(sub, dict):
                flags.update(_flags(sub, VLLM_FLAG_NAMES))
    env = info.get("vllm_env") if isinstance(info.get("vllm_env"), dict) else {}
    return ServerState("vllm", flags, {str(k): default_text(v) for k, v in env.items()
                                       if v is not None})


def from_vllm_metrics(text: str) -> ServerState | None:
    """The ``vllm:cache_config_info`` labels of a ``/metrics`` text, or None without it.

    Read here (the ledger does not depend on prometheus_client): the exposition format's
    one-line form ``name{label="value",...} 1.0``, with its escapes."""
    labels = _info_labels(text, "vllm:cache_config_info")
    if labels is None:
        return None
    values = {k: v for k, v in labels.items() if v != "None"}
    return ServerState("vllm", _flags(values, VLLM_FLAG_NAMES))


def _info_labels(text: str, metric: str) -> dict[str, str] | None:
    for line in text.splitlines():
        if not line.startswith(metric + "{"):
            continue
        body = line[len(metric) + 1:line.rindex("}")]
        return dict(_label_pairs(body))
    return None


def _label_pairs(body: str):
    """``a="x",b="y\\"z"`` as (name, value) pairs (the exposition format's escapes)."""
    i = 0
    while i < len(body):
        eq = body.index("=", i)
        name = body[i:eq].strip().lstrip(",").strip()
        j = eq + 2  # past ="
        value = []
        while body[j] != '"':
            if body[j] == "\\":
                j += 1
                value.append({"n": "\n"}.get(body[j], body[j]))
            else:
                value.append(body[j])
            j += 1
        yield name, "".join(value)
        i = j + 1
