"""Data audits: leakage between splits, label balance and no-ToM answer shortcuts."""
