"""One line of an entry's history: what was done, when, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from typing import Mapping

from ledger.core.frozen import built
from ledger.core.frozen import text_of
from ledger.errors import InvalidValue

# restart: a --restart restarted the entry's service (with the health result);
# rollback: a failed health check (or an interrupted restart) put the entry back.
ACTIONS = ("record", "adopt", "revert", "restore", "suspect", "clear", "restart", "rollback",
           "amend", "bake")


@dataclass(frozen=True)
class Action:
    """One line of an entry's history: what was done, when, and why."""

    at: str
    action: str
    why: str = ""
    # The workspace command that did it, e.g. "revert --perf-only".
    command: str = ""
    # When it really happened, where that is not ``at`` (``--when``, a commit's date, a
    # backup's): history is ordered by it (ledger.core.when).  "" for "at ``at``".
    when: str = ""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise InvalidValue(f"unknown history action {self.action!r}")

    @property
    def happened(self) -> str:
        """When the action happened: ``when`` where given, else ``at``."""
        return self.when or self.at

    def to_dict(self) -> dict[str, Any]:
        d = {"at": self.at, "action": self.action, "why": self.why, "command": self.command}
        if self.when:  # absent otherwise: ledgers without real dates keep their bytes
            d["when"] = self.when
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Action":
        at, action = text_of(d["at"]), text_of(d["action"])
        why, command, when = d.get("why"), d.get("command"), d.get("when")
        return built(cls, {
            "at": at,
            "action": action,
            "why": why if type(why) is str else str(why or ""),
            "command": command if type(command) is str else str(command or ""),
            "when": when if type(when) is str else str(when or ""),
        })


def shared_action(d: Mapping[str, Any], shared: dict) -> Action:
    """``Action.from_dict(d)``, built once per distinct JSON object (its items, as read)
    and once per distinct action: ``shared`` holds both (a tuple of items and an action
    are never equal)."""
    try:
        key = tuple(d.items())
        found = shared.get(key)
    except TypeError:  # an unhashable value: built (and refused) as it is
        key = found = None
    if found is None:
        action = Action.from_dict(d)
        found = shared.setdefault(action, action)
        if key is not None:
            shared[key] = found
    return found


__all__ = ["ACTIONS", "Action", "shared_action"]
