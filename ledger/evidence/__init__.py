"""A/B evidence: run benches for two sides, import results, judge them, store them.

The public API the ledger core and CLI call:

* :func:`run_ab` (runner) - run a bench template alternately A B A B …;
* :func:`record_ab`, :func:`import_evidence` (store) - judge and store a run;
* :func:`load_summaries`, :func:`latest_summary`, :func:`load_run` - read it back;
* :func:`headline`, :func:`is_stale` - one line for ``show/list/diff/restore``, staleness.

Nothing here prints; progress goes through a callback.  numpy, pandas and scipy are
imported inside the functions that need them, so importing this package is cheap.
"""

from __future__ import annotations

from ledger.evidence.importers import ImportFormatError
from ledger.evidence.importers import load_result_file
from ledger.evidence.runner import DEFAULT_BENCH_COMMAND
from ledger.evidence.runner import AbResult
from ledger.evidence.runner import Side
from ledger.evidence.runner import run_ab
from ledger.evidence.stats import PRIMARY_METRIC
from ledger.evidence.store import headline
from ledger.evidence.store import import_evidence
from ledger.evidence.store import is_stale
from ledger.evidence.store import latest_summary
from ledger.evidence.store import load_run
from ledger.evidence.store import load_summaries
from ledger.evidence.store import record_ab

__all__ = [
    "DEFAULT_BENCH_COMMAND",
    "PRIMARY_METRIC",
    "AbResult",
    "ImportFormatError",
    "Side",
    "headline",
    "import_evidence",
    "is_stale",
    "latest_summary",
    "load_result_file",
    "load_run",
    "load_summaries",
    "record_ab",
    "run_ab",
]
