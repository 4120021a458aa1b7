"""history capability."""
