"""Replication and controller mode of the broker (see docs/controller-ha.md)."""
