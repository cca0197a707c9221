"""Queues of subscribed PullConsumers, shared by the live PULL_CONSUMER clients of their group,
across every proxy process serving the cluster.

Upstream's broker answers a server-side rebalance (QUERY_ASSIGNMENT, QueryAssignmentProcessor
#doLoadBalance) for MessageModel CLUSTERING with AllocateMessageQueueAveragely over the topic's
queues and the group's client ids, both sorted. The proxy answers a PULL_CONSUMER's
QueryAssignment the same way, over the group's members reading the topic: the clients that asked
this proxy for a share and are alive here (ClientManager.live_pull_consumers: an open Telemetry
stream and a heartbeat within grpcClientIdleTimeMills), plus the members other proxy processes
announce (services/proxy/heartbeat_syncer.py, upstream's HeartbeatSyncer; ``orbitmq proxy
--workers N`` runs N such processes). Upstream counts every client of the group, which leaves the
share of a client not reading the topic unread; here only members count.

Membership travels with a delay, so two proxies can briefly disagree on it. What keeps a queue to
one reader is not the allocation but a lock on the broker that stores the queue: a client is
given a queue only while the broker's RebalanceLockManager holds it for the client's id
(LOCK_BATCH_MQ, as an orderly Remoting consumer locks its queues, ConsumeMessageOrderlyService).
The broker set owning a queue is the one arbiter every proxy asks, so a stale view can leave a
queue unread for a moment, never read twice. The locks are renewed by each answer and every
heartbeatIntervalMillis; a proxy that dies (kill -9) stops renewing them and the broker lets them
lapse after its rebalanceLockMaxLiveTime (60 s), while the other proxies drop its members after
three silent sync periods.

Why not membership from the brokers (HEART_BEAT under each client's id, GET_CONSUMER_LIST_BY_GROUP):
a broker keys its consumer table by connection (ConsumerGroupInfo), and one proxy connection
carries every client of the proxy, so a broker would list one id per proxy; and a consumer list
cannot say who still holds a queue, which the hand-off below needs.

On top of the allocation, a hand-off: a queue moves to its new owner only once its previous owner
has let go of it, so the new owner starts from the offset the previous one committed. The SDK
(sdk/consumer/pull.py) commits the queues it lost and asks again before it asks for anything
else; that next QueryAssignment is the proof that the queues it lost are released, and only then
are they unlocked on the broker. A client that leaves (closes its stream, stops heartbeating,
terminates) releases everything at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from orbitmq.client import MessageQueueRef
from orbitmq.common.allocate import allocate_averagely
from orbitmq.common.namespace import wrap_namespace

log = logging.getLogger("orbitmq.proxy.pull_assignment")

QueueKey = tuple[str, int]  # (broker name, queue id): MessageQueue's order within one topic
GroupKey = tuple[str, str, str]  # (namespace, group, topic)
Member = tuple[str, str, str, str]  # (namespace, group, topic, client id)


class QueueLocks(Protocol):
    """The brokers' rebalance locks of one group's queues, held under a client id."""

    async def lock(self, key: GroupKey, client_id: str, queues: Iterable[QueueKey]) -> set[QueueKey]:
        """Lock (or renew) ``queues`` for ``client_id``: the ones it holds now."""

    async def unlock(self, key: GroupKey, client_id: str, queues: Iterable[QueueKey]) -> None:
        """Let ``client_id``'s locks on ``queues`` go."""


class NoLocks:
    """Every queue is free: for a proxy that is alone (unit tests of the allocation)."""

    async def lock(self, key: GroupKey, client_id: str, queues: Iterable[QueueKey]) -> set[QueueKey]:
        return set(queues)

    async def unlock(self, key: GroupKey, client_id: str, queues: Iterable[QueueKey]) -> None:
        return None


class BrokerQueueLocks:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ on the master of each queue's broker set (the group and
    topic as the brokers know them, ``{namespace}%{name}``). A broker that cannot be reached
    locks nothing: its queues are not given out until it answers."""

    def __init__(self, cluster: object) -> None:
        self.cluster = cluster  # ClusterService (broker_addr, api)

    async def _by_broker(self, key: GroupKey, queues: Iterable[QueueKey]
                         ) -> list[tuple[str, str, str, list[MessageQueueRef]]]:
        ns, group, topic = key
        wrapped_topic, wrapped_group = wrap_namespace(ns, topic), wrap_namespace(ns, group)
        brokers: dict[str, list[MessageQueueRef]] = defaultdict(list)
        for broker, qid in queues:
            brokers[broker].append(MessageQueueRef(wrapped_topic, broker, qid))
        out = []
        for broker, refs in brokers.items():
            try:
                addr = await self.cluster.broker_addr(broker, wrapped_topic)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 -- no master now: nothing locked there
                log.warning("no master of %s to lock %s queues of %s: %s", broker, wrapped_topic, wrapped_group, exc)
                continue
            out.append((broker, addr, wrapped_group, refs))
        return out

    async def lock(self, key: GroupKey, client_id: str, queues: Iterable[QueueKey]) -> set[QueueKey]:
        held: set[QueueKey] = set()
        for broker, addr, group, refs in await self._by_broker(key, queues):
            try:
                locked = await self.cluster.api.lock_batch_mq(addr, group, client_id, refs)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 -- unlocked queues are not given out
                log.warning("LOCK_BATCH_MQ of %s on %s for %s failed: %s", group, broker, client_id, exc)
                continue
            held.update((ref.broker_name, ref.queue_id) for ref in locked)
        return held

    async def unlock(self, key: GroupKey, client_id: str, queues: Iterable[QueueKey]) -> None:
        for broker, addr, group, refs in await self._by_broker(key, queues):
            try:
                await self.cluster.api.unlock_batch_mq(addr, group, client_id, refs)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 -- the lock lapses on the broker by itself
                log.warning("UNLOCK_BATCH_MQ of %s on %s for %s failed: %s", group, broker, client_id, exc)


@dataclass
class _Holding:
    """What one client was last given (``current``) and what it was told to release (``releasing``,
    until its next QueryAssignment shows it did). Both stay locked on the brokers."""

    current: frozenset[QueueKey] = frozenset()
    releasing: frozenset[QueueKey] = frozenset()

    @property
    def held(self) -> frozenset[QueueKey]:
        return self.current | self.releasing


def _no_remote(key: GroupKey) -> set[str]:
    return set()


class PullAssignments:
    """The members of this proxy and their holdings; the members of other proxies come from
    ``remote_members`` and their holdings are known only to the brokers' locks."""

    def __init__(self, live_clients: Callable[[str, str, str], list[str]], locks: QueueLocks | None = None,
                 remote_members: Callable[[GroupKey], set[str]] = _no_remote,
                 on_members_changed: Callable[[], None] | None = None) -> None:
        # (namespace, group, topic) -> ids of the live PULL_CONSUMER clients of the group reading it
        self._live_clients = live_clients
        self.locks: QueueLocks = locks if locks is not None else NoLocks()
        self.remote_members = remote_members
        self.on_members_changed = on_members_changed
        self._holdings: dict[GroupKey, dict[str, _Holding]] = {}
        self._guards: dict[GroupKey, asyncio.Lock] = defaultdict(asyncio.Lock)

    def _changed(self) -> None:
        if self.on_members_changed is not None:
            self.on_members_changed()

    def members(self) -> list[Member]:
        """This proxy's members, for the other proxies (HeartbeatSyncer's snapshot)."""
        return sorted((*key, cid) for key, table in self._holdings.items() for cid in table)

    async def assign(self, key: GroupKey, client_id: str, queues: list[QueueKey]) -> list[QueueKey]:
        """``client_id``'s share of ``queues`` now: its AllocateMessageQueueAveragely share over every
        proxy's members, less the queues another client still holds or has not confirmed released
        (locked on their brokers under another id)."""
        async with self._guards[key]:
            live = set(self._live_clients(*key))
            table = self._holdings.setdefault(key, {})
            await self._drop_gone(key, table, live)
            if client_id not in live:
                # upstream's allocate gives a client missing from cidAll nothing
                if not table:
                    self._holdings.pop(key, None)
                return []
            mine = table.get(client_id)
            if mine is None:
                mine = table[client_id] = _Holding()
                self._changed()
            # Members: the clients that ask for a share (a client that assign()s queues itself reads
            # what it chose and is no member), here and on the other proxies.
            members = sorted(set(table) | self.remote_members(key))
            target = allocate_averagely(sorted(set(queues)), members, client_id)
            # This request proves the previous answer was applied: what that answer took away is released.
            released = mine.releasing.difference(target)
            if released:
                await self.locks.unlock(key, client_id, released)
            busy: set[QueueKey] = set()
            for cid, holding in table.items():
                if cid != client_id:
                    busy |= holding.held
            wanted = [q for q in target if q not in busy]
            locked = await self.locks.lock(key, client_id, wanted) if wanted else set()
            granted = [q for q in wanted if q in locked]
            mine.releasing = mine.current.difference(granted)
            mine.current = frozenset(granted)
            return granted

    async def _drop_gone(self, key: GroupKey, table: dict[str, _Holding], live: set[str]) -> None:
        for gone in [cid for cid in table if cid not in live]:
            holding = table.pop(gone)
            self._changed()
            if holding.held:
                await self.locks.unlock(key, gone, holding.held)

    async def forget(self, client_id: str) -> None:
        """The client left: whatever it held is free."""
        for key in list(self._holdings):
            async with self._guards[key]:
                table = self._holdings.get(key, {})
                holding = table.pop(client_id, None)
                if holding is None:
                    continue
                self._changed()
                if not table:
                    self._holdings.pop(key, None)
                if holding.held:
                    await self.locks.unlock(key, client_id, holding.held)

    def holds(self, client_id: str) -> bool:
        """Whether ``client_id`` is a member here."""
        return any(client_id in table for table in self._holdings.values())

    async def sweep(self, renew: bool = True) -> None:
        """Drop members no longer alive (their queues are unlocked) and, with ``renew``, renew the
        locks of the rest, so a member that asks seldom keeps its queues while its proxy lives."""
        for key in list(self._holdings):
            async with self._guards[key]:
                table = self._holdings.get(key)
                if table is None:
                    continue
                await self._drop_gone(key, table, set(self._live_clients(*key)))
                if not table:
                    self._holdings.pop(key, None)
                    continue
                if not renew:
                    continue
                for cid, holding in list(table.items()):
                    if not holding.held:
                        continue
                    kept = await self.locks.lock(key, cid, holding.held)
                    if kept != holding.held:  # lapsed and taken: not this client's any more
                        log.warning("%s lost its lock on %s of %s", cid, sorted(holding.held - kept), key)
                        holding.current, holding.releasing = holding.current & kept, holding.releasing & kept
