"""The workspace on disk: config and entries, its git repo, transactions, atomic writes, targets."""
