"""oauth capability."""
