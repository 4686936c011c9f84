"""The service behind a target: how to see it running, restart it, and check its health.

Written per target in ``ledger.yaml`` (all optional)::

    targets:
      decode:
        path: deploy/serve_decode.sh
        format: bash
        live: {pid_file: run/decode.pid}        # or systemd: UNIT | process: REGEX
                                                # or url: http://127.0.0.1:30200/server_info
        restart: [systemctl, restart, decode]   # argv, run without a shell
        health: {url: http://127.0.0.1:30200/health, expect: 200, timeout_s: 60}
                                                # or health: {command: [argv...], timeout_s: N}
                                                # or health: {generate: http://127.0.0.1:30000}

``restart`` is a list of arguments, run as is; a string is refused unless the target also
says ``shell: true`` (then it is handed to ``/bin/sh -c``: the operator wrote it, in
``ledger.yaml``).  Nothing a user types into a command (knob values, titles, reasons)
ever reaches these commands or URLs.  Relative ``pid_file`` paths are relative to the
workspace; commands run with the workspace as their working directory.

Pure: no files, no processes.  Validation errors are :class:`~ledger.errors.InvalidValue`
naming the target and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from typing import Mapping
from urllib.parse import urlsplit

from ledger.errors import InvalidValue

PROBE_KINDS = ("pid_file", "systemd", "process", "url")
DEFAULT_HEALTH_TIMEOUT_S = 60.0
DEFAULT_RESTART_TIMEOUT_S = 120.0
SERVICE_KEYS = ("live", "restart", "shell", "health", "restart_timeout_s")


@dataclass(frozen=True)
class LiveProbe:
    """How to find the running process: ``kind`` is one of :data:`PROBE_KINDS`."""

    kind: str
    value: str

    def to_dict(self) -> dict[str, str]:
        return {self.kind: self.value}

    def describe(self) -> str:
        return f"{self.kind} {self.value}"


@dataclass(frozen=True)
class Health:
    """A health check: an HTTP GET answering ``expect``, a command exiting 0, or a
    generating check (``generate``: the server's base URL): a real 1-token completion
    (``POST /v1/completions``, or SGLang's ``/generate`` where the former is 404) must
    bring a token back within the timeout.  A server whose ``/health`` answers 200 while its
    engine loop is dead (vllm #39863) fails the last one only."""

    url: str | None = None
    command: tuple[str, ...] = ()
    expect: int = 200
    timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S
    generate: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.generate:
            d: dict[str, Any] = {"generate": self.generate}
        elif self.url:
            d = {"url": self.url, "expect": self.expect}
        else:
            d = {"command": list(self.command)}
        d["timeout_s"] = self.timeout_s
        return d

    def describe(self) -> str:
        if self.generate:
            what = f"a 1-token completion from {self.generate}"
        elif self.url:
            what = f"GET {self.url} = {self.expect}"
        else:
            what = f"`{' '.join(self.command)}` exits 0"
        return f"{what} within {self.timeout_s:g}s"


@dataclass(frozen=True)
class Service:
    live: LiveProbe | None = None
    restart: tuple[str, ...] | str | None = None  # a string only with shell
    shell: bool = False
    health: Health | None = None
    restart_timeout_s: float = DEFAULT_RESTART_TIMEOUT_S

    @property
    def empty(self) -> bool:
        return self.live is None and self.restart is None and self.health is None

    def restart_argv(self) -> list[str]:
        """The argv that restarts the service (``/bin/sh -c`` only for ``shell: true``)."""
        if isinstance(self.restart, str):
            return ["/bin/sh", "-c", self.restart]
        return list(self.restart or ())

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.live:
            d["live"] = self.live.to_dict()
        if self.restart is not None:
            d["restart"] = self.restart if isinstance(self.restart, str) else list(self.restart)
        if self.shell:
            d["shell"] = True
        if self.restart_timeout_s != DEFAULT_RESTART_TIMEOUT_S:
            d["restart_timeout_s"] = self.restart_timeout_s
        if self.health:
            d["health"] = self.health.to_dict()
        return d


def check_url(url: Any, where: str) -> str:
    if not isinstance(url, str) or not url:
        raise InvalidValue(f"{where}: a URL is required")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValue(f"{where}: {url!r} is not an http(s)://host[:port]/path URL")
    return url


def _argv(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in value):
        raise InvalidValue(f"{where}: expected a non-empty list of arguments")
    return tuple(str(a) for a in value)


def _seconds(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise InvalidValue(f"{where}: expected seconds in (0, 86400], got {value!r}")
    return float(value)


def parse_probe(node: Any, where: str) -> LiveProbe:
    if not isinstance(node, Mapping) or len(node) != 1:
        raise InvalidValue(f"{where}: give exactly one of {', '.join(PROBE_KINDS)}")
    (kind, value), = node.items()
    if kind not in PROBE_KINDS:
        raise InvalidValue(f"{where}: unknown probe {kind!r} (use {', '.join(PROBE_KINDS)})")
    if not isinstance(value, str) or not value.strip():
        raise InvalidValue(f"{where}.{kind}: expected a non-empty string")
    if kind == "url":
        check_url(value, f"{where}.url")
    if kind == "process":
        try:
            re.compile(value)
        except re.error as e:
            raise InvalidValue(f"{where}.process: not a valid regular expression: {e}") from None
    return LiveProbe(kind, value)


def parse_health(node: Any, where: str) -> Health:
    kinds = [k for k in ("url", "command", "generate") if isinstance(node, Mapping) and k in node]
    if len(kinds) != 1:
        raise InvalidValue(f"{where}: give url (with expect), command or generate, one of them")
    unknown = sorted(set(node) - {"url", "command", "generate", "expect", "timeout_s"})
    if unknown:
        raise InvalidValue(f"{where}: unknown key {', '.join(map(str, unknown))}")
    expect = node.get("expect", 200)
    if isinstance(expect, bool) or not isinstance(expect, int) or not 100 <= expect <= 599:
        raise InvalidValue(f"{where}.expect: an HTTP status code, got {expect!r}")
    timeout = _seconds(node.get("timeout_s"), f"{where}.timeout_s", DEFAULT_HEALTH_TIMEOUT_S)
    if "generate" in node:
        return Health(generate=check_url(node["generate"], f"{where}.generate").rstrip("/"),
                      timeout_s=timeout)
    if "url" in node:
        return Health(url=check_url(node["url"], f"{where}.url"), expect=expect,
                      timeout_s=timeout)
    return Health(command=_argv(node["command"], f"{where}.command"), timeout_s=timeout)


def parse_service(spec: Mapping[str, Any], target: str) -> Service | None:
    """The service keys of one target's mapping in ledger.yaml (None when it has none)."""
    where = f"target {target}"
    if not any(k in spec for k in SERVICE_KEYS):
        return None
    shell = spec.get("shell", False)
    if not isinstance(shell, bool):
        raise InvalidValue(f"{where}.shell: true or false")
    restart = spec.get("restart")
    if isinstance(restart, str):
        if not shell:
            raise InvalidValue(
                f"{where}.restart: a string would need a shell; write the argv as a list "
                "([systemctl, restart, UNIT]) or add `shell: true` to the target")
    elif restart is not None:
        restart = _argv(restart, f"{where}.restart")
    elif shell:
        raise InvalidValue(f"{where}.shell: true needs a restart command string")
    return Service(
        live=parse_probe(spec["live"], f"{where}.live") if spec.get("live") is not None
        else None,
        restart=restart, shell=shell,
        health=parse_health(spec["health"], f"{where}.health") if spec.get("health")
        is not None else None,
        restart_timeout_s=_seconds(spec.get("restart_timeout_s"), f"{where}.restart_timeout_s",
                                   DEFAULT_RESTART_TIMEOUT_S),
    )
