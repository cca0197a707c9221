"""Broker metrics with RocketMQ 5's names (upstream's BrokerMetricsConstant): see manager.BrokerMetricsManager."""

from orbitmq.broker.metrics.manager import BrokerMetricsManager

__all__ = ["BrokerMetricsManager"]
