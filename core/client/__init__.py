"""High-level Remoting client: the calls the proxy, the admin CLI and SDK tools make on brokers
and NameServers (MQClientAPIImpl's role in RocketMQ), plus route caching."""

from orbitmq.client.api import ConsumerData, MessageQueueRef, MQClientAPI, ProducerData
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.namesrv_addr import parse_namesrv_addr, resolve_namesrv_addr
from orbitmq.client.results import (
    AckResult,
    AckStatus,
    PopResult,
    PopStatus,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from orbitmq.client.route_cache import TopicRouteCache

__all__ = [
    "AckResult", "AckStatus", "ConsumerData", "MQBrokerError", "MQClientAPI", "MQClientError", "MessageQueueRef",
    "PopResult", "PopStatus", "ProducerData", "PullResult", "PullStatus", "SendResult", "SendStatus",
    "TopicRouteCache", "parse_namesrv_addr", "resolve_namesrv_addr",
]
