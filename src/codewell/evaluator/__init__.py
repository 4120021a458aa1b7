"""evaluator capability."""
