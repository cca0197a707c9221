"""Cluster mode access to brokers: routes, broker addresses, queue selection and metadata.

Everything here is derived from the NameServers and brokers and only cached briefly, so proxy
replicas stay interchangeable (nothing a client depends on lives only in one proxy).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import asdict, dataclass

from orbitmq.client import MQBrokerError, MQClientAPI, MQClientError, TopicRouteCache
from orbitmq.common.constants import AUTO_CREATE_TOPIC_KEY_TOPIC, MASTER_ID, is_readable, is_writeable
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.route import BrokerData, TopicRouteData
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig, TopicMessageType
from orbitmq.common.validators import is_system_topic
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

log = logging.getLogger("orbitmq.proxy.failover")
Code = pb.Code
_WRITE_QUEUE_CACHE_SIZE = 4096
# Re-resolving a broker set whose master failed: first retry soon, then back off to 1 s.
FAILOVER_BACKOFF_INITIAL_S = 0.05
FAILOVER_BACKOFF_MAX_S = 1.0
# Kept free of the caller's gRPC deadline so the answer (even a failure) still reaches it.
_DEADLINE_RESERVE_S = 0.2


@dataclass(frozen=True)
class AddressableQueue:
    """A queue plus the master address that serves it."""

    topic: str
    broker_name: str
    queue_id: int
    broker_addr: str


@dataclass
class FailoverStats:
    """What the proxy did about failed masters, for tests, benchmarks and operators."""

    # Connection failures to a master that dropped the cached routes of its broker set.
    broker_failures: int = 0
    # Sends re-sent after a failure (to the set's new master or to another set).
    send_retries: int = 0
    # Messages re-sent after an unknown outcome (reset/timeout): they may be stored twice.
    possible_duplicates: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


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

    def stale(self, key: str) -> object:
        """The last value put, expired or not (None when never)."""
        hit = self._data.get(key)
        return None if hit is None else hit[1]

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
        self._write_queues: dict[str, tuple[TopicRouteData, list[AddressableQueue], list[AddressableQueue]]] = {}
        self.failover = FailoverStats()
        self._topic_configs = _TtlCache(config.metadata_cache_expired_millis)
        self._group_configs = _TtlCache(config.metadata_cache_expired_millis)
        # proxyMode=local (services/proxy/local.py): the broker set of this process, whose queues
        # sends and receives take when the topic has any (LocalTopicRouteService routes only its own)
        self.local_broker_name: str | None = None

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
        """Create the topic on every master whose broker has autoCreateTopicEnable (those route
        TBW102, as Remoting producers see it), then wait for the NameServers to route it. With no
        such broker the answer is TOPIC_NOT_FOUND, as RocketMQ 5's proxy gives."""
        try:
            template = await self.routes.fetch(AUTO_CREATE_TOPIC_KEY_TOPIC)
            allowed = {q.broker_name for q in template.queue_datas}
        except MQClientError:
            allowed = set()
        masters = [bd for bd in await self.all_masters() if bd.broker_name in allowed]
        if not masters:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found (no broker runs with "
                                                   "autoCreateTopicEnable=true to create it on)")
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

    async def master_of(self, broker_name: str, topic: str, no_master: ProxyError) -> str:
        """The master of the broker set a client-held id names (a transaction id, a recall handle):
        via the topic's route, else the cluster. TOPIC_NOT_FOUND stays itself; any other failure
        becomes ``no_master``, the caller's code for an id naming a set with no master now."""
        try:
            addr = self.master_addr(await self.route(topic), broker_name)
            if addr:
                return addr
            return await self.broker_addr(broker_name)
        except ProxyError as exc:
            if exc.code == Code.TOPIC_NOT_FOUND:
                raise
            raise no_master from None

    def _queue_table(self, topic: str, route: TopicRouteData) -> tuple[list[AddressableQueue], list[AddressableQueue]]:
        """(every writable queue, those whose broker set has a master) of a route, cached per route object.

        A queue of a broker set without a master keeps its place (broker_addr ""), so a message
        group hashes to the same queue while its set fails over instead of moving elsewhere.
        """
        cached = self._write_queues.get(topic)
        if cached is not None and cached[0] is route:
            return cached[1], cached[2]
        every: list[AddressableQueue] = []
        live: list[AddressableQueue] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not is_writeable(qd.perm):
                continue
            addr = self.master_addr(route, qd.broker_name) or ""
            queues = [AddressableQueue(topic, qd.broker_name, i, addr) for i in range(qd.write_queue_nums)]
            every.extend(queues)
            if addr:
                live.extend(queues)
        if not every:
            raise ProxyError(Code.FORBIDDEN, f"no writable queue of topic {topic}")
        local = self.local_broker_name
        if local is not None:
            own = [q for q in every if q.broker_name == local]
            if own:
                every, live = own, [q for q in live if q.broker_name == local]
        if len(self._write_queues) >= _WRITE_QUEUE_CACHE_SIZE:
            self._write_queues.clear()
        self._write_queues[topic] = (route, every, live)
        return every, live

    async def write_queues(self, topic: str) -> list[AddressableQueue]:
        """The writable queues of broker sets that have a master (FORBIDDEN when none is writable)."""
        every, live = self._queue_table(topic, await self.route(topic))
        if not live:
            raise ProxyError(Code.FORBIDDEN, f"no writable queue of topic {topic} has a master")
        return live

    def _pick(self, every: list[AddressableQueue], live: list[AddressableQueue],
              message_group: str | None) -> AddressableQueue:
        if message_group:
            return every[consistent_hash(java_string_hash(message_group), len(every))]
        pool = live or every  # no master anywhere: the send waits for one (broker_addr "")
        return pool[next(self._round_robin) % len(pool)]

    async def select_write_queue(self, topic: str, message_group: str | None) -> AddressableQueue:
        """A message group's queue by consistent hash over every writable queue, else round robin over
        queues with a master. broker_addr is "" while the chosen queue's set has no master."""
        every, live = self._queue_table(topic, await self.route(topic))
        return self._pick(every, live, message_group)

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
        return self._pick(cached[1], cached[2], message_group)

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
        if self.local_broker_name is not None:
            own = [b for b in result if b[0] == self.local_broker_name]
            if own:
                return own
        return result

    async def select_read_broker(self, topic: str, broker_name: str | None) -> tuple[str, str]:
        brokers = await self.read_brokers(topic)
        if broker_name:
            for name, addr in brokers:
                if name == broker_name:
                    return name, addr
        return brokers[next(self._round_robin) % len(brokers)]

    # ---- failover ----------------------------------------------------------------------------

    def failover_deadline(self, time_remaining: float | None) -> float:
        """Monotonic time until which a request may wait for a broker set's new master:
        brokerFailoverWaitMillis, cut short by the caller's own gRPC deadline."""
        budget = self.config.broker_failover_wait_millis / 1000.0
        if time_remaining is not None:
            budget = min(budget, time_remaining - _DEADLINE_RESERVE_S)
        return time.monotonic() + max(budget, 0.0)

    def broker_unreachable(self, broker_name: str, addr: str, cause: BaseException) -> None:
        """A master did not answer (refused, reset, timed out): forget every route naming its set, so
        the next lookup asks a NameServer instead of waiting for the periodic refresh."""
        topics = self.routes.invalidate_broker(broker_name)
        for topic in topics:
            self._write_queues.pop(topic, None)
        if not addr:  # the route had no master: nothing failed, it is still failing over
            log.debug("broker %s has no master yet; dropped %d cached route(s)", broker_name, len(topics))
            return
        self.failover.broker_failures += 1
        log.warning("broker %s (%s) failed: %s; dropped %d cached route(s), re-resolving", broker_name, addr,
                    cause, len(topics))

    async def _refetch(self, topic: str) -> TopicRouteData:
        try:
            return await self.routes.fetch(topic)
        except MQClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not found") from None
            raise

    async def failover_write_queue(self, topic: str, message_group: str | None, failed: AddressableQueue,
                                   deadline: float, exclude_failed: bool = True) -> AddressableQueue:
        """Where to send again after ``failed`` (its master gone): a message group waits for its own
        queue's new master; other messages take a queue of another set with a master at once, or
        wait for any master. Re-resolves from the NameServers with a short backoff until ``deadline``.
        ``exclude_failed=False`` accepts the failed address again (it refused, so it is alive).
        """
        delay = FAILOVER_BACKOFF_INITIAL_S
        last: BaseException | None = None
        while True:
            route: TopicRouteData | None
            try:
                route = await self._refetch(topic)
            except (ProxyError, MQClientError, MQBrokerError, RemotingError, OSError) as exc:
                # TOPIC_NOT_FOUND too: a set whose last member died leaves no route until it is back.
                route, last = None, exc
            if route is not None:
                every, live = self._queue_table(topic, route)
                if message_group:
                    queue = self._pick(every, live, message_group)
                    if queue.broker_addr and (not exclude_failed or queue.broker_addr != failed.broker_addr):
                        return queue
                else:
                    others = [q for q in live if q.broker_name != failed.broker_name]
                    if others:
                        return others[next(self._round_robin) % len(others)]
                    same = [q for q in live if not exclude_failed or q.broker_addr != failed.broker_addr]
                    if same:
                        return same[next(self._round_robin) % len(same)]
                last = None
            if time.monotonic() + delay > deadline:
                # The route may still name the failed address (the NameServer has not noticed): one
                # more try there costs a refused connect; beyond the window the client retries.
                if route is not None:
                    every, live = self._queue_table(topic, route)
                    queue = self._pick(every, live, message_group)
                    if queue.broker_addr:
                        return queue
                detail = f": {last}" if last is not None else ""
                raise ProxyError(Code.INTERNAL_SERVER_ERROR,
                                 f"broker {failed.broker_name} of topic {topic} has no master{detail}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, FAILOVER_BACKOFF_MAX_S)

    async def failover_master(self, broker_name: str, topic: str | None, failed_addr: str,
                              deadline: float) -> str:
        """The master address of ``broker_name`` after ``failed_addr`` failed, re-resolved with a short
        backoff until ``deadline`` (receipt handles name the set, so acks follow its new master)."""
        delay = FAILOVER_BACKOFF_INITIAL_S
        addr = ""
        while True:
            if topic:
                try:
                    addr = self.master_addr(await self._refetch(topic), broker_name) or ""
                except (ProxyError, MQClientError, MQBrokerError, RemotingError, OSError):
                    addr = ""
            if not addr:
                try:
                    info = await self.routes.cluster_info()
                    bd = info.broker_addr_table.get(broker_name)
                    addr = (bd.master_addr if bd is not None else None) or ""
                except (MQClientError, MQBrokerError, RemotingError, OSError):
                    addr = ""
            if addr and addr != failed_addr:
                return addr
            if time.monotonic() + delay > deadline:
                if addr:
                    return addr  # still the old address: the caller's try tells whether it is back
                raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"broker {broker_name} has no master")
            await asyncio.sleep(delay)
            delay = min(delay * 2, FAILOVER_BACKOFF_MAX_S)

    async def all_masters(self) -> list[BrokerData]:
        info = await self.routes.cluster_info()
        names = info.cluster_addr_table.get(self.config.rocket_mq_cluster_name) or set(info.broker_addr_table)
        return [info.broker_addr_table[n] for n in sorted(names)
                if n in info.broker_addr_table and info.broker_addr_table[n].master_addr]

    async def wait_master_addr(self, broker_name: str, topic: str | None, time_remaining: float | None,
                               refused: ProxyError) -> str:
        """After broker_addr refused (``refused``): a known broker set with no master right now (failing
        over) is waited for (failover_master); an unknown set gets ``refused`` at once."""
        info = await self.routes.cluster_info()
        if broker_name not in info.broker_addr_table:
            raise refused
        return await self.failover_master(broker_name, topic, "", self.failover_deadline(time_remaining))

    async def wait_read_broker(self, topic: str, broker_name: str | None, deadline: float) -> tuple[str, str]:
        """select_read_broker for a topic whose readable sets have no master right now: re-resolve with
        a short backoff until one has (FORBIDDEN at once when no queue is readable at all)."""
        delay = FAILOVER_BACKOFF_INITIAL_S
        while True:
            route = await self._refetch(topic)
            readable = [qd for qd in route.queue_datas if is_readable(qd.perm) and qd.read_queue_nums > 0]
            if not readable:
                raise ProxyError(Code.FORBIDDEN, f"no readable queue of topic {topic}")
            if any(self.master_addr(route, qd.broker_name) for qd in readable):
                return await self.select_read_broker(topic, broker_name)
            if time.monotonic() + delay > deadline:
                raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"no broker of topic {topic} has a master")
            await asyncio.sleep(delay)
            delay = min(delay * 2, FAILOVER_BACKOFF_MAX_S)

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
        unanswered = False
        for bd in await self.all_masters():
            try:
                config = await self.api.get_subscription_group_config(bd.master_addr, group)
            except Exception:  # one unreachable broker must not hide the group on another
                unanswered = True
                continue
            if config is not None:
                break
        if config is None and unanswered:
            # A master failing over proves nothing: keep the last known config, as upstream's
            # refreshing metadata cache does. The defaults would pop a FIFO group concurrently,
            # and its un-acked messages would come back after later ones.
            stale = self._group_configs.stale(group)
            if stale is not None:
                return stale  # type: ignore[return-value]
        self._group_configs.put(group, config)
        return config
