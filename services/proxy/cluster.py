"""Cluster mode access to brokers: routes, broker addresses, queue selection and metadata.

Everything here is derived from the NameServers and brokers and only cached briefly, so proxy
replicas stay interchangeable (nothing a client depends on lives only in one proxy).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass

from orbitmq.client import MQClientAPI, MQClientError, TopicRouteCache
from orbitmq.common.constants import MASTER_ID, is_readable, is_writeable
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.route import BrokerData, TopicRouteData
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig, TopicMessageType
from orbitmq.common.validators import is_system_topic
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import ResponseCode

Code = pb.Code
_WRITE_QUEUE_CACHE_SIZE = 4096


@dataclass(frozen=True)
class AddressableQueue:
    """A queue plus the master address that serves it."""

    topic: str
    broker_name: str
    queue_id: int
    broker_addr: str


class _TtlCache:
    def __init__(self, ttl_ms: int) -> None:
        self.ttl = ttl_ms / 1000.0
        self._data: dict[str, tuple[float, object]] = {}

    def get(self, key: str) -> tuple[bool, object]:
        hit = self._data.get(key)
        if hit is None or time.monotonic() - hit[0] > self.ttl:
            return False, None
        return True, hit[1]

    def put(self, key: str, value: object) -> None:
        self._data[key] = (time.monotonic(), value)

    def drop(self, key: str) -> None:
        self._data.pop(key, None)


def consistent_hash(input_hash: int, buckets: int) -> int:
    """Guava Hashing.consistentHash(long, int): stable bucket for a message group."""
    state = input_hash & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        nxt = int((candidate + 1) / (((state >> 33) + 1) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


class ClusterService:
    def __init__(self, config: ProxyConfig, api: MQClientAPI, routes: TopicRouteCache) -> None:
        self.config = config
        self.api = api
        self.routes = routes
        self._round_robin = itertools.count()
        self._write_queues: dict[str, tuple[TopicRouteData, list[AddressableQueue]]] = {}
        self._topic_configs = _TtlCache(config.metadata_cache_expired_millis)
        self._group_configs = _TtlCache(config.metadata_cache_expired_millis)

    # ---- routes ------------------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route; ProxyError(TOPIC_NOT_FOUND) when no NameServer knows it."""
        try:
            return await self.routes.get(topic)
        except MQClientError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            if self.config.auto_create_topic_enable and not is_system_topic(topic):
                return await self._auto_create(topic)
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found") from None

    async def _auto_create(self, topic: str) -> TopicRouteData:
        """Create the topic on every master, then wait for the NameServers to route it."""
        masters = await self.all_masters()
        if not masters:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found and no broker to create it on")
        nums = self.config.default_topic_queue_nums
        for bd in masters:
            await self.api.create_topic(bd.master_addr, TopicConfig(topic, nums, nums))
        deadline = time.monotonic() + 5.0
        while True:
            try:
                return await self.routes.fetch(topic)
            except MQClientError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST or time.monotonic() > deadline:
                    raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found") from None
                await asyncio.sleep(0.1)

    @staticmethod
    def master_addr(route: TopicRouteData, broker_name: str) -> str | None:
        bd = route.broker_data(broker_name)
        return bd.broker_addrs.get(MASTER_ID) if bd else None

    async def broker_addr(self, broker_name: str, topic: str | None = None) -> str:
        """The master address of a broker group, looked up via the topic's route or the cluster."""
        if topic:
            try:
                addr = self.master_addr(await self.route(topic), broker_name)
                if addr:
                    return addr
            except ProxyError:
                pass
        info = await self.routes.cluster_info()
        bd = info.broker_addr_table.get(broker_name)
        if bd is not None and bd.master_addr:
            return bd.master_addr
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE if topic else Code.NOT_FOUND,
                         f"broker {broker_name} is not found or has no master")

    async def write_queues(self, topic: str) -> list[AddressableQueue]:
        route = await self.route(topic)
        # Every send asks; the answer only changes when the route cache holds a new route object.
        cached = self._write_queues.get(topic)
        if cached is not None and cached[0] is route:
            return cached[1]
        queues: list[AddressableQueue] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            addr = self.master_addr(route, qd.broker_name)
            if not addr or not is_writeable(qd.perm):
                continue
            queues.extend(AddressableQueue(topic, qd.broker_name, i, addr) for i in range(qd.write_queue_nums))
        if not queues:
            raise ProxyError(Code.FORBIDDEN, f"no writable queue of topic {topic}")
        if len(self._write_queues) >= _WRITE_QUEUE_CACHE_SIZE:
            self._write_queues.clear()
        self._write_queues[topic] = (route, queues)
        return queues

    async def select_write_queue(self, topic: str, message_group: str | None) -> AddressableQueue:
        queues = await self.write_queues(topic)
        if message_group:
            return queues[consistent_hash(java_string_hash(message_group), len(queues))]
        return queues[next(self._round_robin) % len(queues)]

    def cached_write_queue(self, topic: str, message_group: str | None) -> AddressableQueue | None:
        """select_write_queue without awaiting when route and queue list are cached, else None.

        Sends ask once per request; a cache hit then costs no coroutine frames.
        """
        route = self.routes.get_cached(topic)
        if route is None:
            return None
        cached = self._write_queues.get(topic)
        if cached is None or cached[0] is not route:
            return None
        queues = cached[1]
        if message_group:
            return queues[consistent_hash(java_string_hash(message_group), len(queues))]
        return queues[next(self._round_robin) % len(queues)]

    async def read_brokers(self, topic: str) -> list[tuple[str, str]]:
        """(brokerName, master address) of every broker with readable queues of the topic."""
        route = await self.route(topic)
        result = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            addr = self.master_addr(route, qd.broker_name)
            if addr and is_readable(qd.perm) and qd.read_queue_nums > 0:
                result.append((qd.broker_name, addr))
        if not result:
            raise ProxyError(Code.FORBIDDEN, f"no readable queue of topic {topic}")
        return result

    async def select_read_broker(self, topic: str, broker_name: str | None) -> tuple[str, str]:
        brokers = await self.read_brokers(topic)
        if broker_name:
            for name, addr in brokers:
                if name == broker_name:
                    return name, addr
        return brokers[next(self._round_robin) % len(brokers)]

    async def all_masters(self) -> list[BrokerData]:
        info = await self.routes.cluster_info()
        names = info.cluster_addr_table.get(self.config.rocket_mq_cluster_name) or set(info.broker_addr_table)
        return [info.broker_addr_table[n] for n in sorted(names)
                if n in info.broker_addr_table and info.broker_addr_table[n].master_addr]

    # ---- metadata ----------------------------------------------------------------------------

    async def topic_config(self, topic: str) -> TopicConfig | None:
        hit, value = self._topic_configs.get(topic)
        if hit:
            return value  # type: ignore[return-value]
        route = await self.route(topic)
        config = None
        for qd in route.queue_datas:
            addr = self.master_addr(route, qd.broker_name)
            if addr:
                config = await self.api.get_topic_config(addr, topic)
                if config is not None:
                    break
        self._topic_configs.put(topic, config)
        return config

    async def topic_message_type(self, topic: str) -> TopicMessageType:
        config = await self.topic_config(topic)
        return config.message_type if config is not None else TopicMessageType.NORMAL

    def cached_topic_message_type(self, topic: str) -> TopicMessageType | None:
        """topic_message_type while the topic's config is cached (None: await topic_message_type)."""
        hit, config = self._topic_configs.get(topic)
        if not hit:
            return None
        return config.message_type if config is not None else TopicMessageType.NORMAL  # type: ignore[attr-defined]

    async def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        hit, value = self._group_configs.get(group)
        if hit:
            return value  # type: ignore[return-value]
        config = None
        for bd in await self.all_masters():
            try:
                config = await self.api.get_subscription_group_config(bd.master_addr, group)
            except Exception:  # one unreachable broker must not hide the group on another
                continue
            if config is not None:
                break
        self._group_configs.put(group, config)
        return config
