"""accounts capability."""
