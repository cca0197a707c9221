"""Broker metrics with RocketMQ 5's names (reference §2.3): see manager.BrokerMetricsManager."""

from orbitmq.broker.metrics.manager import BrokerMetricsManager

__all__ = ["BrokerMetricsManager"]
