"""OrbitMQ: a RocketMQ 5-compatible messaging cluster in Python."""
__version__ = "0.1.0"
