"""Licensing: plans, signed license keys, the trial of a fresh install and the feature gates built on them."""
