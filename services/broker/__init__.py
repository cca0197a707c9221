"""broker service."""
