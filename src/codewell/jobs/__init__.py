"""Durable background jobs: one table, claimed with row locks, run in `codewell serve` or `codewell worker`."""
