"""Remoting request processors of the broker, one module per concern."""
