"""call."""
