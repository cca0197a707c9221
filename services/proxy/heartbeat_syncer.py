"""HeartbeatSyncer: the proxies of a cluster tell each other their subscribed PullConsumers.

Upstream's proxy (cluster mode) exchanges client heartbeats through a system topic that every
proxy consumes in BROADCASTING mode (HeartbeatSyncer / AbstractSystemMessageSyncer, topic
``heartbeatSyncerTopicName``, default DefaultHeartBeatSyncerTopic, one queue on every master of
``heartbeatSyncerTopicClusterName``, read from the last offset). OrbitMQ exchanges the same way
what its QueryAssignment needs from the other proxies (services/proxy/pull_assignment.py): which
PULL_CONSUMER clients are members of which (namespace, group, topic) there. Which queues they
hold is not sent: the brokers' rebalance locks keep that, so a late or lost sync message can
delay a hand-off but never let two clients read one queue.

A proxy sends its whole member list (a snapshot, numbered so a late one never overrides a newer
one) when the list changes and every ``heartbeatIntervalMillis``; a proxy that has not been heard
from for three periods (killed) has no members any more, and one that stops says so. A proxy that
starts asks the others for theirs (``hello``). Each process is its own proxy here, so the
workers of ``orbitmq proxy --workers N`` sync like separate proxies: the id carries the pid
(upstream's localServeAddr%remotingPort%grpcPort is the same for every worker of one port).

The syncer starts with the proxy's first subscribed PullConsumer (upstream's runs from the
start): a proxy without pull groups creates no topic and holds no long poll for them. Other
proxies' messages in a format other than this one (an upstream proxy's) are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from orbitmq.client import PullStatus
from orbitmq.common import sysflag, validators
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.message import Message, MessageConst
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.common.validators import ValidationError
from orbitmq.remoting import headers as h

if TYPE_CHECKING:
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.proxy.config import ProxyConfig
    from orbitmq.proxy.pull_assignment import GroupKey, Member

log = logging.getLogger("orbitmq.proxy.heartbeat_syncer")

FORMAT = "orbitmq.pullMembers.v1"  # the "format" field of this syncer's messages
EXPIRY_PERIODS = 3  # periods without a snapshot after which a proxy's members are gone
LONG_POLL_MILLIS = 15_000  # a pull of the sync topic waits this long for a message
_RETRY_PAUSE_S = 1.0
_SEND_TIMEOUT_S = 3.0


def local_proxy_id(proxy_name: str) -> str:
    """Unique per process: proxyName, host, pid and a random part."""
    return f"{proxy_name}@{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"


def encode(proxy_id: str, seq: int, members: Iterable[Member], hello: bool = False, bye: bool = False) -> bytes:
    return json.dumps({"format": FORMAT, "localProxyId": proxy_id, "seq": seq, "hello": hello, "bye": bye,
                       "timestamp": int(time.time() * 1000), "members": [list(m) for m in members]}).encode()


def decode(body: bytes) -> dict | None:
    """A snapshot of this format, or None (another syncer's message, or garbage)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("localProxyId"), str):
        return None
    members = data.get("members")
    if not isinstance(members, list) or not isinstance(data.get("seq"), int):
        return None
    if not all(isinstance(m, list) and len(m) == 4 and all(isinstance(x, str) for x in m) for m in members):
        return None
    return data


class RemoteMembers:
    """What the other proxies announced: their latest snapshot each, forgotten when stale."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        # proxy id -> (seq, received at, members by group key)
        self._proxies: dict[str, tuple[int, float, dict[GroupKey, set[str]]]] = {}

    def apply(self, data: dict) -> bool:
        """Take a decoded snapshot; False when older than one already taken."""
        proxy_id, seq = data["localProxyId"], data["seq"]
        known = self._proxies.get(proxy_id)
        if known is not None and seq <= known[0]:
            return False
        by_key: dict[GroupKey, set[str]] = {}
        if not data.get("bye"):
            for ns, group, topic, client_id in data["members"]:
                by_key.setdefault((ns, group, topic), set()).add(client_id)
        self._proxies[proxy_id] = (seq, self.clock(), by_key)
        return True

    def members(self, key: GroupKey) -> set[str]:
        oldest = self.clock() - self.ttl_s
        out: set[str] = set()
        for _seq, at, by_key in self._proxies.values():
            if at < oldest:
                continue  # killed, or cut off: its clients' locks lapse on the brokers too
            out |= by_key.get(key, set())
        return out

    def proxies(self) -> list[str]:
        oldest = self.clock() - self.ttl_s
        return sorted(p for p, (_s, at, by_key) in self._proxies.items() if at >= oldest and by_key)


class HeartbeatSyncer:
    def __init__(self, config: ProxyConfig, cluster: ClusterService, local_members: Callable[[], list[Member]],
                 on_tick: Callable[[], object] | None = None) -> None:
        self.config = config
        self.cluster = cluster
        self.local_members = local_members
        self.on_tick = on_tick  # every period: PullAssignments.sweep (renews the locks)
        self.topic = config.heartbeat_syncer_topic_name
        try:
            validators.check_topic(self.topic)
        except ValidationError as exc:
            raise ValueError(f"heartbeatSyncerTopicName: {exc}") from None
        self.cluster_name = config.heartbeat_syncer_topic_cluster_name or config.rocket_mq_cluster_name
        self.consumer_group = f"CID_{self.topic}"  # AbstractSystemMessageSyncer#getSystemMessageConsumerId
        self.producer_group = f"PID_{self.topic}"
        self.proxy_id = local_proxy_id(config.proxy_name)
        self.interval_s = config.heartbeat_interval_millis / 1000.0
        self.remote = RemoteMembers(EXPIRY_PERIODS * self.interval_s)
        self._seq = itertools.count(int(time.time() * 1000))
        self._dirty = asyncio.Event()
        self._hello = True
        self._task: asyncio.Task[None] | None = None
        self._pullers: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._ready = asyncio.Event()
        self.received = 0  # snapshots taken from other proxies

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="HeartbeatSyncer")

    async def wait_ready(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Until the topic is read and the first snapshot (hello) sent, at most ``timeout`` s."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)
        return self._ready.is_set()

    def changed(self) -> None:
        """The local member list changed: send it now."""
        self._dirty.set()

    def remote_members(self, key: GroupKey) -> set[str]:
        return self.remote.members(key)

    async def shutdown(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for task in list(self._pullers.values()):
            await cancel_and_wait(task)
        self._pullers.clear()
        if self._ready.is_set():  # the others drop this proxy's members now, not after three periods
            with contextlib.suppress(Exception):
                await self._send(bye=True)

    # ---- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        next_tick = time.monotonic() + self.interval_s
        while True:
            self._dirty.clear()  # a change from here on wakes the next round
            try:
                await self._prepare()
                if self._pullers:
                    await self._send(hello=self._hello)
                    self._hello = False
                    self._ready.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 -- the next period tries again
                log.warning("heartbeat sync via %s failed: %s", self.topic, exc)
            if self.on_tick is not None and time.monotonic() >= next_tick:
                next_tick = time.monotonic() + self.interval_s
                try:
                    result = self.on_tick()
                    if asyncio.iscoroutine(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 -- the next period tries again
                    log.exception("heartbeat sync tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dirty.wait(), max(0.0, next_tick - time.monotonic()))

    async def _masters(self) -> dict[str, str]:
        info = await self.cluster.routes.cluster_info()
        names = info.cluster_addr_table.get(self.cluster_name)
        if names is None:  # as ClusterService.all_masters: a NameServer without that cluster, every broker
            names = set(info.broker_addr_table)
        return {n: info.broker_addr_table[n].master_addr for n in sorted(names)
                if n in info.broker_addr_table and info.broker_addr_table[n].master_addr}

    async def _prepare(self) -> None:
        """createSysTopic on every master (one queue), the consumer group where brokers do not create
        groups themselves, and a puller per queue from its last offset (CONSUME_FROM_LAST_OFFSET)."""
        api = self.cluster.api
        for broker, addr in (await self._masters()).items():
            if any(b == broker for b, _q in self._pullers):
                continue
            try:
                config = await api.get_topic_config(addr, self.topic)
                if config is None:
                    config = TopicConfig(self.topic, 1, 1)
                    await api.create_topic(addr, config)
                if await api.get_subscription_group_config(addr, self.consumer_group) is None:
                    await api.create_subscription_group(addr, SubscriptionGroupConfig(self.consumer_group))
                starts = [await api.get_max_offset(addr, self.topic, qid)
                          for qid in range(max(1, config.read_queue_nums))]
            except Exception as exc:  # noqa: BLE001 -- this master is tried again next period
                log.warning("cannot read %s on %s (%s): %s", self.topic, broker, addr, exc)
                continue
            for qid, start in enumerate(starts):
                self._pullers[(broker, qid)] = asyncio.create_task(
                    self._pull(broker, qid, start), name=f"HeartbeatSyncer-{broker}-{qid}")

    async def _send(self, hello: bool = False, bye: bool = False) -> None:
        body = encode(self.proxy_id, next(self._seq), [] if bye else self.local_members(), hello, bye)
        msg = Message(self.topic, body, 0, {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id(),
                                            MessageConst.PRODUCER_GROUP: self.producer_group})
        last: Exception | None = None
        for broker, addr in (await self._masters()).items():  # the first master that takes it
            try:
                await self.cluster.api.send_message(addr, broker, msg, self.producer_group, 0,
                                                    timeout=_SEND_TIMEOUT_S)
                return
            except Exception as exc:  # noqa: BLE001 -- try the next master
                last = exc
        raise RuntimeError(f"no master of cluster {self.cluster_name} took the sync message: {last}")

    async def _pull(self, broker: str, qid: int, offset: int) -> None:
        api = self.cluster.api
        while True:
            try:
                addr = (await self._masters()).get(broker)
                if addr is None:
                    await asyncio.sleep(self.interval_s)
                    continue
                header = h.PullMessageRequestHeader(
                    consumer_group=self.consumer_group, topic=self.topic, queue_id=qid, queue_offset=offset,
                    max_msg_nums=32, sys_flag=sysflag.build_pull_sys_flag(False, True, True, False),
                    commit_offset=0, suspend_timeout_millis=LONG_POLL_MILLIS, subscription="*", sub_version=0,
                    expression_type="TAG", broker_name=broker)
                while True:
                    result = await api.pull_message(
                        addr, header, (LONG_POLL_MILLIS + self.config.remoting_timeout_millis) / 1000.0)
                    if result.status == PullStatus.FOUND:
                        for msg in result.messages:
                            self._on_message(msg.body)
                    # OFFSET_ILLEGAL too: the broker's corrected offset (old snapshots lose on seq)
                    offset = header.queue_offset = result.next_begin_offset
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 -- re-resolve the master and go on
                log.debug("pull of %s from %s failed: %s", self.topic, broker, exc)
                await asyncio.sleep(_RETRY_PAUSE_S)

    def _on_message(self, body: bytes) -> None:
        data = decode(body)
        if data is None or data["localProxyId"] == self.proxy_id:
            return
        if self.remote.apply(data):
            self.received += 1
            if data.get("hello"):
                self._dirty.set()  # a proxy just started: it needs this one's members now
