"""auth capability."""
