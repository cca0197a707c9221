"""RebalanceImpl: which queues this client consumes, recomputed every rebalance interval and when
the broker says the group changed (RebalanceImpl, RebalancePushImpl, RebalanceLitePullImpl).

CLUSTERING splits each subscribed topic's queues among the group's consumer ids (both sorted, so
every member computes the same disjoint split) with the allocate strategy; BROADCASTING takes
every queue. A queue no longer ours is dropped (its offset persisted first); a new one gets a
ProcessQueue and its start offset from the offset store (computePullFromWhereWithException).
Orderly consumers only take a queue once the broker locked it for them (LOCK_BATCH_MQ).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.common.allocate import AllocateMessageQueueStrategy
from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting_client.consumer.offset_store import OffsetStore, ReadOffsetType
from orbitmq.remoting_client.consumer.process_queue import ProcessQueue

log = logging.getLogger("orbitmq.remoting_client.rebalance")

MASTER_ID = 0
UNLOCK_DELAY = 20.0  # rocketmq.client.unlockDelayTimeMills


def _mq_key(mq: MessageQueueRef) -> tuple[str, str, int]:
    """MessageQueue#compareTo: topic, then brokerName, then queueId."""
    return (mq.topic, mq.broker_name, mq.queue_id)


def parse_consume_timestamp(value: str) -> int:
    """UtilAll.parseDate(consumeTimestamp, yyyyMMddHHmmss) in epoch milliseconds (local time)."""
    try:
        return int(datetime.strptime(value, "%Y%m%d%H%M%S").timestamp() * 1000)
    except ValueError:
        raise MQClientError(f"consumeTimestamp {value!r} is not yyyyMMddHHmmss") from None


async def compute_pull_from_where(instance: Any, offset_store: OffsetStore, mq: MessageQueueRef,
                                  consume_from_where: str, consume_timestamp_ms: int) -> int:
    """RebalancePushImpl#computePullFromWhereWithException: the stored offset, else where the
    ConsumeFromWhere policy says (retry topics start at 0, or at the end for TIMESTAMP)."""
    last = await offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    if last >= 0:
        return last
    if last != -1:
        raise MQClientError("Failed to query consume offset from offset store", ResponseCode.QUERY_NOT_FOUND)
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if consume_from_where == "CONSUME_FROM_FIRST_OFFSET":
        return 0
    addr = await broker_addr_of(instance, mq)
    if consume_from_where == "CONSUME_FROM_TIMESTAMP":
        if retry:
            return await instance.api.get_max_offset(addr, mq.topic, mq.queue_id)
        return await instance.api.search_offset(addr, mq.topic, mq.queue_id, consume_timestamp_ms)
    # CONSUME_FROM_LAST_OFFSET (and the deprecated MIN/MAX/…_WHEN_BOOT_FIRST names)
    if retry:
        return 0
    return await instance.api.get_max_offset(addr, mq.topic, mq.queue_id)


async def broker_addr_of(instance: Any, mq: MessageQueueRef) -> str:
    """MQAdminImpl's lookup: the master of the queue's broker group, refreshing the route once."""
    addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        await instance.update_topic_route(mq.topic)
        addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        raise MQClientError(f"The broker[{mq.broker_name}] not exist")
    return addr


class RebalanceImpl:
    """The shared algorithm; subclasses say what a new or removed queue means for them."""

    def __init__(self, group: str, message_model: str, strategy: AllocateMessageQueueStrategy,
                 instance: Any) -> None:
        self.group = group
        self.message_model = message_model
        self.strategy = strategy
        self.instance = instance
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueueRef]] = {}
        self.process_queue_table: dict[MessageQueueRef, ProcessQueue] = {}
        self.lock_max_live_time = 30.0
        self.pull_max_idle_time = 120.0
        self._rebalance_lock = asyncio.Lock()

    # ---- hooks --------------------------------------------------------------------------------

    def consume_type(self) -> str:
        return "CONSUME_PASSIVELY"

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueueRef],
                                    mq_divided: set[MessageQueueRef]) -> None:
        return None

    async def remove_unnecessary_message_queue(self, mq: MessageQueueRef, pq: ProcessQueue) -> bool:
        raise NotImplementedError

    def remove_dirty_offset(self, mq: MessageQueueRef) -> None:
        raise NotImplementedError

    async def compute_pull_from_where(self, mq: MessageQueueRef) -> int:
        raise NotImplementedError

    def dispatch_pull_request(self, requests: list[tuple[MessageQueueRef, ProcessQueue, int]]) -> None:
        return None

    # ---- algorithm ----------------------------------------------------------------------------

    async def do_rebalance(self, is_order: bool) -> bool:
        """RebalanceImpl#doRebalance; True when every topic's assignment was computed."""
        async with self._rebalance_lock:
            balanced = True
            for topic in list(self.subscription_inner):
                try:
                    if not await self.rebalance_by_topic(topic, is_order):
                        balanced = False
                except (MQClientError, MQBrokerError, RemotingError, OSError, ValueError) as exc:
                    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                        log.warning("rebalance of topic %s for group %s failed: %s", topic, self.group, exc)
                    balanced = False
            self.truncate_message_queue_not_my_topic()
            return balanced

    async def rebalance_by_topic(self, topic: str, is_order: bool) -> bool:
        mq_set = self.topic_subscribe_info_table.get(topic)
        if self.message_model == "BROADCASTING":
            if mq_set is None:
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.group, topic)
                return False
            changed = await self.update_process_queue_table_in_rebalance(topic, mq_set, is_order)
            if changed:
                await self.message_queue_changed(topic, mq_set, mq_set)
            return True
        cid_all = await self.instance.find_consumer_id_list(topic, self.group)
        if mq_set is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.group, topic)
            return False
        if not cid_all:
            log.warning("doRebalance, %s %s, get consumer id list failed", self.group, topic)
            return False
        mq_all = sorted(mq_set, key=_mq_key)
        cids = sorted(cid_all)
        try:
            allocated = self.strategy.allocate(self.group, self.instance.client_id, mq_all, cids)
        except ValueError as exc:
            log.error("allocate message queue exception. strategy name: %s, %s", self.strategy.name, exc)
            return False
        allocated_set = set(allocated)
        changed = await self.update_process_queue_table_in_rebalance(topic, allocated_set, is_order)
        if changed:
            log.info("client %s of %s now consumes %d queues of %s", self.instance.client_id, self.group,
                     len(allocated_set), topic)
            await self.message_queue_changed(topic, mq_set, allocated_set)
        return True

    def truncate_message_queue_not_my_topic(self) -> None:
        for mq in list(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                log.info("doRebalance, %s, truncateMessageQueueNotMyTopic remove unnecessary mq %s", self.group, mq)

    async def update_process_queue_table_in_rebalance(self, topic: str, mq_set: set[MessageQueueRef],
                                                      is_order: bool) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.info("doRebalance, %s, remove unnecessary mq %s", self.group, mq)
            elif pq.is_pull_expired() and self.consume_type() == "CONSUME_PASSIVELY":
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.warning("[BUG]doRebalance, %s, remove unnecessary mq %s, because pull is pause, so try "
                                "to fixed it", self.group, mq)
        requests: list[tuple[MessageQueueRef, ProcessQueue, int]] = []
        all_locked = True
        for mq in sorted(mq_set, key=_mq_key):
            if mq in self.process_queue_table:
                continue
            if is_order and not await self.lock(mq):
                log.warning("doRebalance, %s, add a new mq failed, %s, because lock failed", self.group, mq)
                all_locked = False
                continue
            self.remove_dirty_offset(mq)
            pq = ProcessQueue(self.lock_max_live_time, self.pull_max_idle_time)
            if is_order:
                pq.locked = True
            try:
                next_offset = await self.compute_pull_from_where(mq)
            except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
                log.warning("doRebalance, %s, compute offset failed, %s: %s", self.group, mq, exc)
                continue
            if mq in self.process_queue_table:
                log.info("doRebalance, %s, mq already exists, %s", self.group, mq)
                continue
            self.process_queue_table[mq] = pq
            requests.append((mq, pq, next_offset))
            changed = True
            log.info("doRebalance, %s, add a new mq, %s at offset %d", self.group, mq, next_offset)
        if not all_locked:
            # RebalanceImpl: a queue whose lock failed is tried again soon, not in 20 s
            asyncio.get_running_loop().call_later(0.5, self.instance.rebalance_immediately)
        self.dispatch_pull_request(requests)
        return changed

    # ---- orderly locks ------------------------------------------------------------------------

    def _by_broker(self, mqs: Iterable[MessageQueueRef]) -> dict[str, set[MessageQueueRef]]:
        result: dict[str, set[MessageQueueRef]] = {}
        for mq in mqs:
            result.setdefault(mq.broker_name, set()).add(mq)
        return result

    async def lock(self, mq: MessageQueueRef) -> bool:
        """RebalanceImpl#lock: LOCK_BATCH_MQ of one queue on its master."""
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            return False
        try:
            locked = await self.instance.api.lock_batch_mq(found[0], self.group, self.instance.client_id, [mq])
        except (MQBrokerError, RemotingError, OSError) as exc:
            log.error("lockBatchMQ of %s failed: %s", mq, exc)
            return False
        for q in locked:
            pq = self.process_queue_table.get(q)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = time.monotonic()
        return mq in locked

    async def lock_all(self) -> None:
        """RebalanceImpl#lockAll: renew (or take) the broker locks of every queue we hold."""
        for broker_name, mqs in self._by_broker(self.process_queue_table).items():
            found = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
            if found is None:
                continue
            try:
                locked = await self.instance.api.lock_batch_mq(found[0], self.group, self.instance.client_id, mqs)
            except (MQBrokerError, RemotingError, OSError) as exc:
                log.error("lockBatchMQ on %s failed: %s", broker_name, exc)
                continue
            now = time.monotonic()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False
                    log.warning("the message queue locking was lost, group %s, mq %s", self.group, mq)

    async def unlock(self, mq: MessageQueueRef) -> None:
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            return
        try:
            await self.instance.api.unlock_batch_mq(found[0], self.group, self.instance.client_id, [mq])
        except (MQBrokerError, RemotingError, OSError) as exc:
            log.error("unlockBatchMQ of %s failed: %s", mq, exc)

    async def unlock_all(self) -> None:
        for broker_name, mqs in self._by_broker(self.process_queue_table).items():
            found = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
            if found is None:
                continue
            try:
                await self.instance.api.unlock_batch_mq(found[0], self.group, self.instance.client_id, mqs)
            except (MQBrokerError, RemotingError, OSError) as exc:
                log.error("unlockBatchMQ on %s failed: %s", broker_name, exc)
                continue
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False

    def remove_process_queue(self, mq: MessageQueueRef) -> None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True


class ConsumerRebalanceImpl(RebalanceImpl):
    """What RebalancePushImpl and RebalanceLitePullImpl do alike: offsets and start positions
    come from their consumer's offset store and consumeFromWhere."""

    def __init__(self, consumer: Any) -> None:
        super().__init__(consumer.consumer_group, consumer.message_model, consumer.allocate_strategy,
                         consumer.instance)
        self.consumer = consumer

    def remove_dirty_offset(self, mq: MessageQueueRef) -> None:
        self.consumer.offset_store.remove_offset(mq)

    async def compute_pull_from_where(self, mq: MessageQueueRef) -> int:
        c = self.consumer
        return await compute_pull_from_where(self.instance, c.offset_store, mq, c.consume_from_where,
                                             parse_consume_timestamp(c.consume_timestamp))
