"""`python -m ledger.cli`: the same as the `ledger` console script."""

from ledger.cli import main

main()
