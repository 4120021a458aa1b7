"""agents capability."""
