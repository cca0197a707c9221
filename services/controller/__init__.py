"""controller service."""
