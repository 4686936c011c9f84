"""knob ledger: a change ledger and safe-rollback tool for LLM serving configs.

The package is a stack of layers; calls go one way, down:

    cli → commands → render → live/evidence → store → patches → core/git_runner → errors →
    procs/values/demo_tools

* ``cli`` parses arguments, calls one command, formats what comes back, and is the one
  place that catches :class:`~ledger.errors.LedgerError`;
* ``commands`` runs one command the user types: reads under the writer lock, asks the
  pure core to decide, hands the plan to one transaction;
* ``render`` (docs), ``live`` (running processes) and ``evidence`` (A/B runs, bench
  imports) are the command's helpers for their domain;
* ``store`` is the workspace on disk: entries, targets, the transaction, recovery, git;
* ``patches`` the engine repo's patch stack; ``core`` the pure model and planner (no
  files, no git, no clock); ``git_runner`` runs git;
* ``errors`` the one error hierarchy; ``procs`` and ``values`` small leaves;
  ``demo_tools`` programs the demo runs as processes.

Names on one row are peers and do not import each other.  ``envknobs`` (formats and
catalogs), ``backups`` (the backup store) and ``engine`` (the bundled engine) sit below
every layer and never import the ledger.  ``tests/test_imports.py`` checks this order on
the real imports; ``docs/ARCHITECTURE.md`` explains it, where each command decides, and
the invariants every write keeps.
"""
