"""repos capability."""
