"""namesrv service."""
