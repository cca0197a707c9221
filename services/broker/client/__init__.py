"""Broker-side registry of connected clients: producers, consumers and orderly-consume locks."""
