"""A config file under management, as ``ledger.yaml`` names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.core.identifiers import ENGINE_SPEC_RE
from ledger.core.identifiers import check_target_name
from ledger.core.service import Service
from ledger.errors import InvalidValue
from ledger.values import FLAG_ENGINES
from ledger.values import FORMATS


@dataclass(frozen=True)
class Target:
    """A config file under management."""

    name: str
    path: str  # as written in ledger.yaml: absolute, or relative to the workspace
    format: str
    container: str | None = None  # k8s: the address of the container whose env list
    key_path: str | None = None  # yaml-map: where the map is (None: the whole file)
    flags: str | None = None  # yaml-map: the keys are this engine's server flags (--config)
    # the running service behind the file: live probe, restart, health (ledger.core.service)
    service: Service | None = None
    # the engine release that reads the file, ``sglang==0.5.23``: knobs are checked
    # against that release's generated catalog (envknobs.catalog_release)
    engine: str | None = None

    def __post_init__(self) -> None:
        check_target_name(self.name)
        if self.engine is not None and not ENGINE_SPEC_RE.match(str(self.engine)):
            raise InvalidValue(
                f"target {self.name}: engine {self.engine!r}: write it as sglang==X or vllm==X"
            )
        if self.format not in FORMATS:
            raise InvalidValue(
                f"target {self.name}: unknown format {self.format!r} (use {', '.join(FORMATS)})"
            )
        if self.format == "k8s" and not self.container:
            raise InvalidValue(f"target {self.name}: a k8s target needs --container")
        if self.format != "k8s" and self.container:
            raise InvalidValue(f"target {self.name}: --container is for k8s targets only")
        if self.format not in ("yaml-map", "bash") and self.key_path or \
                self.format != "yaml-map" and self.flags:
            raise InvalidValue(  # a bash key path: the script in a YAML file (SkyPilot run:)
                f"target {self.name}: --key-path is for yaml-map and bash targets, "
                "--flags for yaml-map targets only"
            )
        if self.flags is not None and self.flags not in FLAG_ENGINES:
            raise InvalidValue(
                f"target {self.name}: unknown --flags {self.flags!r} "
                f"(use {', '.join(FLAG_ENGINES)})"
            )

    def to_dict(self) -> dict[str, Any]:
        d = {"path": self.path, "format": self.format}
        for key in ("container", "key_path", "flags", "engine"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.service is not None:
            d.update(self.service.to_dict())
        return d


__all__ = ["Target"]
