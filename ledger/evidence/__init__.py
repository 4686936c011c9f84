"""A/B evidence: run benches for two sides, import results, judge them, store them.

What lives where:

* ``runner``: :func:`run_alternating` - run a bench template alternately A B A B …;
* ``store``: :func:`record_ab` - judge and store a run;
  :func:`load_summaries`, :func:`latest_summary`, :func:`load_run` - read it back;
  :func:`headline`, :func:`is_stale` - one line for ``show/list/diff/restore``, staleness;
* ``import_run``: :func:`import_evidence` - ``evidence add``: join result files to a run;

* ``importers`` (bench result files), ``stats`` (verdicts), ``summary``, ``runs_csv``;
* ``view``: the ledger's view of an entry's evidence (headline, verdict, staleness);
* ``defaults``: the A/B defaults the CLI shows (cheap to import).

Nothing here prints; progress goes through a callback.  numpy, pandas and scipy are
imported inside the functions that need them, and this package's ``__init__`` imports nothing.
"""
