"""proxy service."""
