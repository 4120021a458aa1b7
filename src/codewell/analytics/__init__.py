"""analytics capability."""
