"""Live services: restarting them after a change, probing their health, rolling back a
command whose health check failed (:mod:`ledger.live.rollback`)."""

# The record of a ``--restart`` in flight, ``.ledger/restart.json``: every command looks
# for it (a killed restart is rolled back by the next command), so its name is known
# without loading the rollback machinery.
RESTART_RECORD = "restart.json"
