"""The library functions behind each `ledger` command, one module per command family."""
