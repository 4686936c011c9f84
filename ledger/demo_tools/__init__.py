"""Stand-alone scripts shipped with `ledger demo` (stdlib only; run as files, never imported
by the ledger): a multi-turn harness check and a faulty proxy to put in front of the router."""
