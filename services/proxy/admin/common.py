"""What every Admin family shares: the proxy's parts it reads, names and look-ups that never
auto-create, and timestamps.

Admin calls must not change the cluster as a side effect, so topics are resolved with the route
cache directly (ClusterService#route would create a missing topic under autoCreateTopicEnable)
and a group is known when a master holds its subscription group config.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.client import MQClientError
from orbitmq.common.constants import MASTER_ID, is_readable, is_retry_topic
from orbitmq.common.namespace import NAMESPACE_SEPARATOR
from orbitmq.common.route import TopicRouteData
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.pool import Timestamp
from orbitmq.proxy import validation
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import ResponseCode

Code = pb.Code


@dataclass
class AdminParts:
    """The running proxy's pieces the Admin service answers from (set by ProxyServer.start)."""

    config: ProxyConfig
    cluster: ClusterService
    messaging: Any  # orbitmq.proxy.service.MessagingService: its activities, relay and counters
    metrics: Any = None  # ProxyMetrics or None (metricsExporterType=DISABLE)
    remoting: Callable[[], Any] = field(default=lambda: None)  # the Remoting port, once started
    started_at: float = field(default_factory=time.monotonic)

    @property
    def clients(self) -> Any:
        return self.messaging.clients

    @property
    def api(self) -> Any:
        return self.cluster.api


def topic_name(resource: pb.Resource, what: str = "topic") -> str:
    """The topic as the brokers know it; ILLEGAL_TOPIC when missing or malformed."""
    if not resource.name:
        raise ProxyError(Code.ILLEGAL_TOPIC, f"{what} is required")
    return validation.topic_of(resource)


def group_name(resource: pb.Resource) -> str:
    """The consumer group as the brokers know it; ILLEGAL_CONSUMER_GROUP when missing or malformed."""
    if not resource.name:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "group is required")
    return validation.group_of(resource)


async def route_of(parts: AdminParts, topic: str) -> TopicRouteData:
    """The topic's route without creating it: TOPIC_NOT_FOUND when no NameServer knows it."""
    try:
        return await parts.cluster.routes.get(topic)
    except MQClientError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found") from None
        raise


def route_masters(route: TopicRouteData, readable_only: bool = False) -> list[tuple[str, str]]:
    """(brokerName, master address) of the route's broker sets that have a master."""
    perms = {qd.broker_name: qd.perm for qd in route.queue_datas}
    out = []
    for bd in sorted(route.broker_datas, key=lambda d: d.broker_name):
        addr = bd.broker_addrs.get(MASTER_ID)
        if addr and (not readable_only or is_readable(perms.get(bd.broker_name, 0))):
            out.append((bd.broker_name, addr))
    return out


async def masters(parts: AdminParts) -> list[tuple[str, str]]:
    """(brokerName, master address) of every broker set of the proxy's cluster."""
    return [(bd.broker_name, bd.master_addr) for bd in await parts.cluster.all_masters()]


async def require_group(parts: AdminParts, group: str) -> None:
    """CONSUMER_GROUP_NOT_FOUND unless a master holds the group's subscription config."""
    for _name, addr in await masters(parts):
        if await parts.api.get_subscription_group_config(addr, group) is not None:
            return
    raise ProxyError(Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group {group} not found")


def resource_of(name: str) -> pb.Resource:
    """A broker-side name, ``{namespace}%{name}``, as the Resource a gRPC client names it by."""
    namespace, sep, bare = name.partition(NAMESPACE_SEPARATOR)
    if sep and not is_retry_topic(name):
        return pb.Resource(resource_namespace=namespace, name=bare)
    return pb.Resource(name=name)


def to_timestamp(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMilliseconds(int(ms))
    return ts


def timestamp_ms(ts: Any, default: int) -> int:
    """A request's Timestamp in milliseconds; ``default`` when it is unset (all zero)."""
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return default
    return ts.seconds * 1000 + ts.nanos // 1_000_000
