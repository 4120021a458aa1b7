"""search capability."""
