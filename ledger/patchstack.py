"""Bridge between the ledger's plans and the engine repo's patch stack (ledger.patches)."""

from __future__ import annotations

from typing import Sequence

from ledger import planner
from ledger.apply import EnginePlan
from ledger.errors import PatchError
from ledger.model import Entry
from ledger.workspace import Workspace


def engine_step_for(ws: Workspace, entries: Sequence[Entry], plan: planner.Plan) -> EnginePlan | None:
    raise PatchError("patch entries are not supported yet")
