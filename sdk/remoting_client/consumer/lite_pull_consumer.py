"""DefaultLitePullConsumer: the application polls; the client pulls ahead per queue
(DefaultLitePullConsumer, DefaultLitePullConsumerImpl, AssignedMessageQueue, RebalanceLitePullImpl).

Queues come from ``subscribe`` (rebalanced in the group like a push consumer's) or ``assign``
(fixed, no rebalance). One pull task per queue fills a shared cache that ``poll`` drains;
``seek`` moves a queue's next pull, and the consumed offset is committed every
autoCommitIntervalMillis (5 s) by ``poll`` when auto commit is on, or by ``commit_sync``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.results import PullStatus
from orbitmq.clientcore import loop as bg
from orbitmq.common import sysflag
from orbitmq.common.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from orbitmq.common.filter.subscription import ExpressionType, SubscriptionData, build_subscription_data
from orbitmq.common.message import MessageExt
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer.inner import ConsumerInnerMixin
from orbitmq.remoting_client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from orbitmq.remoting_client.consumer.process_queue import ProcessQueue
from orbitmq.remoting_client.consumer.pull_api import PullAPIWrapper
from orbitmq.remoting_client.consumer.push_consumer import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM,
    default_consume_timestamp,
)
from orbitmq.remoting_client.consumer.rebalance import (
    ConsumerRebalanceImpl,
    broker_addr_of,
    parse_consume_timestamp,
)

log = logging.getLogger("orbitmq.remoting_client.lite_pull")

PULL_TIME_DELAY_WHEN_EXCEPTION = 1.0  # DefaultLitePullConsumerImpl's pullTimeDelayMillsWhenException
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05
PULL_TIME_DELAY_WHEN_PAUSE = 1.0
MIN_AUTOCOMMIT_INTERVAL = 1.0


@dataclasses.dataclass
class MessageQueueState:
    """AssignedMessageQueue.MessageQueueState: -1 means "not set" for each offset."""

    pq: ProcessQueue
    paused: bool = False
    pull_offset: int = -1
    consume_offset: int = -1
    seek_offset: int = -1


class RebalanceLitePullImpl(ConsumerRebalanceImpl):
    consumer: AsyncDefaultLitePullConsumer

    def consume_type(self) -> str:
        return "CONSUME_ACTIVELY"

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueueRef],
                                    mq_divided: set[MessageQueueRef]) -> None:
        c = self.consumer
        c._update_assign_queue_and_start_pull_task(topic, mq_all if self.message_model == BROADCASTING else mq_divided)
        if c.message_queue_listener is not None:
            c.message_queue_listener(topic, mq_all, mq_divided)

    async def remove_unnecessary_message_queue(self, mq: MessageQueueRef, pq: ProcessQueue) -> bool:
        await self.consumer.offset_store.persist(mq)
        self.consumer.offset_store.remove_offset(mq)
        return True


class AsyncDefaultLitePullConsumer(ConsumerInnerMixin):
    """The asyncio lite pull consumer; DefaultLitePullConsumer wraps it for threads."""

    CONSUME_TYPE = "CONSUME_ACTIVELY"

    def __init__(self, consumer_group: str, config: RemotingClientConfig | None = None, *,
                 namesrv_addr: str | None = None, message_model: str = CLUSTERING,
                 consume_from_where: str = "CONSUME_FROM_LAST_OFFSET", consume_timestamp: str | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None,
                 auto_commit: bool = True, auto_commit_interval_millis: int = 5000,
                 pull_batch_size: int = 10, pull_threshold_for_all: int = 10000, consume_max_span: int = 2000,
                 pull_threshold_for_queue: int = 1000, pull_threshold_size_for_queue: int = 100,
                 poll_timeout_millis: int = 5000, broker_suspend_max_time_millis: int = 20_000,
                 consumer_timeout_millis_when_suspend: int = 30_000,
                 pull_time_delay_when_exception: float = PULL_TIME_DELAY_WHEN_EXCEPTION,
                 offset_store: OffsetStore | None = None, local_offset_store_dir: str | Path | None = None) -> None:
        from orbitmq.remoting_client.instance import get_or_create_instance

        if not consumer_group or consumer_group == "DEFAULT_CONSUMER":
            raise MQClientError("consumerGroup can not equal DEFAULT_CONSUMER, please specify another one.")
        if message_model not in (CLUSTERING, BROADCASTING):
            raise MQClientError(f"messageModel must be CLUSTERING or BROADCASTING, not {message_model!r}")
        if consume_from_where not in CONSUME_FROM:
            raise MQClientError(f"consumeFromWhere must be one of {CONSUME_FROM}, not {consume_from_where!r}")
        if auto_commit_interval_millis < MIN_AUTOCOMMIT_INTERVAL * 1000:
            raise MQClientError("autoCommitIntervalMillis must be at least 1000 ms")
        if broker_suspend_max_time_millis >= consumer_timeout_millis_when_suspend:
            raise MQClientError("Long polling mode, the consumer consumerTimeoutMillisWhenSuspend must greater "
                                "than brokerSuspendMaxTimeMillis")
        if not 1 <= pull_batch_size <= 1024:
            raise MQClientError("pullBatchSize Out of range [1, 1024]")
        base = config or RemotingClientConfig()
        self.config = dataclasses.replace(base, namesrv_addr=namesrv_addr or base.namesrv_addr)
        if message_model == CLUSTERING:
            self.config.change_instance_name_to_pid()
        self.consumer_group = self.config.with_namespace(consumer_group)
        self.group_name = self.consumer_group
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp or default_consume_timestamp()
        parse_consume_timestamp(self.consume_timestamp)
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval_millis / 1000
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_all = pull_threshold_for_all
        self.consume_max_span = consume_max_span
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.poll_timeout = poll_timeout_millis / 1000
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_timeout_millis_when_suspend = consumer_timeout_millis_when_suspend
        self.pull_time_delay_when_exception = pull_time_delay_when_exception
        self.instance = get_or_create_instance(self.config)
        self._user_offset_store = offset_store
        self._local_offset_store_dir = local_offset_store_dir
        self.offset_store: OffsetStore = offset_store or RemoteBrokerOffsetStore(self.instance, self.consumer_group)
        self.rebalance = RebalanceLitePullImpl(self)
        self.pull_api = PullAPIWrapper(self.instance, self.consumer_group)
        self.message_queue_listener: Callable[[str, set[MessageQueueRef], set[MessageQueueRef]], None] | None = None
        self.subscription_type = "NONE"
        self.assigned: dict[MessageQueueRef, MessageQueueState] = {}
        self._cache: asyncio.Queue[tuple[list[MessageExt], MessageQueueRef, ProcessQueue]] = asyncio.Queue()
        self._tasks: dict[MessageQueueRef, asyncio.Task[None]] = {}
        self._assign_subscriptions: dict[str, SubscriptionData] = {}
        self._next_auto_commit = 0.0
        self.service_state = "CREATE_JUST"

    # ---- subscription -------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = ExpressionType.TAG) -> None:
        if self.subscription_type == "ASSIGN":
            raise MQClientError("Subscribe and assign are mutually exclusive.")
        if expression_type not in (ExpressionType.TAG, ExpressionType.SQL92):
            raise MQClientError(f"expression type must be TAG or SQL92, not {expression_type!r}")
        if not topic:
            raise MQClientError("Topic can not be null or empty.")
        topic = self.config.with_namespace(topic)
        try:
            sub = build_subscription_data(topic, expression, expression_type)
        except ValueError as exc:
            raise MQClientError(f"subscription exception: {exc}") from exc
        self.subscription_type = "SUBSCRIBE"
        self.rebalance.subscription_inner[topic] = sub
        if self.service_state == "RUNNING":
            self._spawn_bg(self._after_subscribe(topic))

    def unsubscribe(self, topic: str) -> None:
        topic = self.config.with_namespace(topic)
        self.rebalance.subscription_inner.pop(topic, None)
        self._remove_pull_tasks(lambda mq: mq.topic == topic)
        for mq in [mq for mq in self.assigned if mq.topic == topic]:
            self.assigned.pop(mq).pq.dropped = True

    def assign(self, queues: Iterable[MessageQueueRef]) -> None:
        """Consume exactly these queues (no rebalance); replaces an earlier assignment."""
        if self.subscription_type == "SUBSCRIBE":
            raise MQClientError("Subscribe and assign are mutually exclusive.")
        mqs = set(queues)
        if not mqs:
            raise MQClientError("Message queues can not be null or empty.")
        self.subscription_type = "ASSIGN"
        self._update_assigned(mqs, None)
        if self.service_state == "RUNNING":
            self._update_pull_tasks(mqs, None)

    def set_sub_expression_for_assign(self, topic: str, expression: str,
                                      expression_type: str = ExpressionType.TAG) -> None:
        """setSubExpression4Assign: the filter of an assigned topic ("*" when unset)."""
        topic = self.config.with_namespace(topic)
        self._assign_subscriptions[topic] = build_subscription_data(topic, expression, expression_type)

    def assignment(self) -> set[MessageQueueRef]:
        return set(self.assigned)

    async def fetch_message_queues(self, topic: str) -> set[MessageQueueRef]:
        """The topic's readable queues from the route (fetchMessageQueues)."""
        return set(await self.instance.subscribe_queues(self.config.with_namespace(topic)))

    # ---- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self.service_state != "CREATE_JUST":
            raise MQClientError(f"The LitePullConsumer service state not OK, maybe started once, {self.service_state}")
        self.service_state = "START_FAILED"
        if self._user_offset_store is None and self.message_model == BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.instance.client_id, self.consumer_group,
                                                     self._local_offset_store_dir)
        await self.offset_store.load()
        if not self.instance.register_consumer(self.consumer_group, self):
            self.service_state = "CREATE_JUST"
            raise MQClientError(f"The consumer group[{self.consumer_group}] has been created before, specify "
                                "another name please.")
        try:
            await self.instance.start()
            self.service_state = "RUNNING"
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval
            for topic in list(self.rebalance.subscription_inner):
                await self._update_subscribe_info(topic)
            for mq in self.assigned:
                await self.instance.topic_route(mq.topic)
            await self.instance.send_heartbeat_to_all_brokers()
        except BaseException:
            self.instance.unregister_consumer(self.consumer_group)
            self.service_state = "CREATE_JUST"
            raise
        if self.subscription_type == "ASSIGN":
            self._update_pull_tasks(set(self.assigned), None)
        self.instance.rebalance_immediately()

    async def _update_subscribe_info(self, topic: str) -> None:
        """As the push consumer: a topic without a route yet is looked up again at each rebalance."""
        try:
            self.rebalance.topic_subscribe_info_table[topic] = set(await self.instance.subscribe_queues(topic))
        except MQClientError as exc:
            log.warning("the consumer group %s subscribes to %s, which has no route yet: %s",
                        self.consumer_group, topic, exc)

    async def _after_subscribe(self, topic: str) -> None:
        await self._update_subscribe_info(topic)
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.rebalance_immediately()

    async def shutdown(self) -> None:
        if self.service_state != "RUNNING":
            return
        self.service_state = "SHUTDOWN_ALREADY"
        self._remove_pull_tasks(lambda mq: True)
        for task in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.auto_commit:
            await self.commit_all(persist=False)
        await self.persist_consumer_offset()
        await self.instance.unregister_consumer_now(self.consumer_group)
        await self.instance.shutdown()

    async def __aenter__(self) -> AsyncDefaultLitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _check_running(self) -> None:
        if self.service_state != "RUNNING":
            raise MQClientError(f"The consumer service state not OK, {self.service_state}")

    # ---- assigned queues and pull tasks -------------------------------------------------------

    def _update_assign_queue_and_start_pull_task(self, topic: str, mqs: set[MessageQueueRef]) -> None:
        self._update_assigned(mqs, topic)
        self._update_pull_tasks(mqs, topic)

    def _update_assigned(self, mqs: set[MessageQueueRef], topic: str | None) -> None:
        """AssignedMessageQueue#updateAssignedMessageQueue (of one topic, or all for assign)."""
        for mq in list(self.assigned):
            if (topic is None or mq.topic == topic) and mq not in mqs:
                self.assigned.pop(mq).pq.dropped = True
        for mq in mqs:
            if mq not in self.assigned:
                pq = self.rebalance.process_queue_table.get(mq) or ProcessQueue()
                self.assigned[mq] = MessageQueueState(pq)

    def _remove_pull_tasks(self, which: Callable[[MessageQueueRef], bool]) -> None:
        for mq in [mq for mq in self._tasks if which(mq)]:
            self._tasks.pop(mq).cancel()

    def _update_pull_tasks(self, mqs: set[MessageQueueRef], topic: str | None) -> None:
        self._remove_pull_tasks(lambda mq: (topic is None or mq.topic == topic) and mq not in mqs)
        for mq in mqs:
            if mq not in self._tasks:
                self._start_pull_task(mq)

    def _start_pull_task(self, mq: MessageQueueRef) -> None:
        task = asyncio.get_running_loop().create_task(self._pull_task(mq), name=f"lite-pull-{mq}")
        self._tasks[mq] = task

    def _spawn_bg(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or log.warning(
            "lite pull background job failed: %s", t.exception()))

    def _subscription_of(self, topic: str) -> SubscriptionData:
        if self.subscription_type == "SUBSCRIBE":
            sub = self.rebalance.subscription_inner.get(topic)
            if sub is None:
                raise MQClientError(f"no subscription of {topic}")
            return sub
        return self._assign_subscriptions.get(topic) or build_subscription_data(topic, "*")

    async def _next_pull_offset(self, mq: MessageQueueRef, state: MessageQueueState) -> int:
        if state.seek_offset != -1:
            offset = state.seek_offset
            state.consume_offset = offset
            state.seek_offset = -1
            return offset
        if state.pull_offset != -1:
            return state.pull_offset
        return await self.rebalance.compute_pull_from_where(mq)

    async def _pull_task(self, mq: MessageQueueRef) -> None:
        """PullTaskImpl#run, looped."""
        while self.service_state == "RUNNING":
            state = self.assigned.get(mq)
            if state is None or state.pq.dropped:
                return
            pq = state.pq
            pq.last_pull_timestamp = time.monotonic()
            delay = 0.0
            if state.paused:
                delay = PULL_TIME_DELAY_WHEN_PAUSE
            elif self._cache.qsize() * self.pull_batch_size > self.pull_threshold_for_all \
                    or pq.msg_count > self.pull_threshold_for_queue \
                    or pq.msg_size // (1024 * 1024) > self.pull_threshold_size_for_queue \
                    or pq.get_max_span() > self.consume_max_span:
                delay = PULL_TIME_DELAY_WHEN_FLOW_CONTROL
            else:
                delay = await self._pull_once(mq, state)
            if delay:
                await asyncio.sleep(delay)

    async def _pull_once(self, mq: MessageQueueRef, state: MessageQueueState) -> float:
        pq = state.pq
        try:
            offset = await self._next_pull_offset(mq, state)
        except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
            log.warning("failed to fetch consume offset of %s: %s", mq, exc)
            return self.pull_time_delay_when_exception
        try:
            sub = self._subscription_of(mq.topic)
            flag = sysflag.build_pull_sys_flag(False, True, True, False, True)
            result = await self.pull_api.pull_kernel(
                mq, sub.sub_string, sub.expression_type, sub.sub_version, offset, self.pull_batch_size,
                256 * 1024, flag, 0, self.broker_suspend_max_time_millis,
                self.consumer_timeout_millis_when_suspend / 1000)
        except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
            log.warning("lite pull of %s failed: %s", mq, exc)
            return self.pull_time_delay_when_exception
        if pq.dropped or self.assigned.get(mq) is not state:
            return 0.0
        self.pull_api.process_pull_result(mq, result, sub)
        if result.status == PullStatus.FOUND:
            if result.messages and state.seek_offset == -1:
                for msg in result.messages:
                    if self.config.namespace:
                        msg.topic = self.config.without_namespace(msg.topic)
                pq.put_message(result.messages)
                self._cache.put_nowait((result.messages, mq, pq))
        elif result.status == PullStatus.OFFSET_ILLEGAL:
            log.warning("the pull request offset illegal, message queue %s, offset %d, result %s", mq, offset, result)
        if state.seek_offset == -1:
            state.pull_offset = result.next_begin_offset
        return 0.0

    # ---- poll and commit ----------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:  # noqa: ASYNC109
        """The next pulled batch of one queue, or [] after ``timeout`` s (pollTimeoutMillis)."""
        self._check_running()
        timeout = self.poll_timeout if timeout is None else timeout
        if timeout < 0:
            raise MQClientError("Timeout must not be negative")
        if self.auto_commit:
            await self._maybe_auto_commit()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    msgs, mq, pq = self._cache.get_nowait()
                else:
                    msgs, mq, pq = await asyncio.wait_for(self._cache.get(), remaining)
            except (TimeoutError, asyncio.QueueEmpty):
                return []
            if pq.dropped:
                continue
            state = self.assigned.get(mq)
            offset = pq.remove_message(msgs)
            if state is not None and state.pq is pq:
                state.consume_offset = offset
            return msgs

    async def _maybe_auto_commit(self) -> None:
        now = time.monotonic()
        if now >= self._next_auto_commit:
            self._next_auto_commit = now + self.auto_commit_interval
            await self.commit_all()

    async def commit_all(self, persist: bool | None = None) -> None:
        """commitAll: every queue's consumed offset into the offset store (BROADCASTING persists
        the file at once; the broker's copy follows with the instance's 5 s persistence)."""
        for mq, state in list(self.assigned.items()):
            if state.consume_offset != -1 and not state.pq.dropped:
                self.offset_store.update_offset(mq, state.consume_offset, False)
        if persist or (persist is None and self.message_model == BROADCASTING):
            await self.offset_store.persist_all(set(self.assigned))

    async def commit_sync(self, offsets: dict[MessageQueueRef, int] | None = None, persist: bool = True) -> None:
        """commitSync: the consumed offsets (or the given ones), persisted now when ``persist``."""
        self._check_running()
        if offsets is None:
            await self.commit_all(persist=persist)
            return
        for mq, offset in offsets.items():
            if mq not in self.assigned:
                raise MQClientError(f"The message queue is not in assigned list, message queue: {mq}")
            self.offset_store.update_offset(mq, offset, False)
        if persist:
            await self.offset_store.persist_all(set(offsets))

    async def committed(self, mq: MessageQueueRef) -> int:
        """The offset stored for ``mq`` (-1: none)."""
        self._check_running()
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    # ---- seek ---------------------------------------------------------------------------------

    async def seek(self, mq: MessageQueueRef, offset: int) -> None:
        """Pull ``mq`` from ``offset`` next (within [minOffset, maxOffset]); cached messages of it go."""
        self._check_running()
        state = self.assigned.get(mq)
        if state is None:
            extra = ", may be rebalancing" if self.subscription_type == "SUBSCRIBE" else ""
            raise MQClientError(f"The message queue is not in assigned list{extra}, message queue: {mq}")
        addr = await broker_addr_of(self.instance, mq)
        low = await self.instance.api.get_min_offset(addr, mq.topic, mq.queue_id)
        high = await self.instance.api.get_max_offset(addr, mq.topic, mq.queue_id)
        if offset < low or offset > high:
            raise MQClientError(f"Seek offset illegal, seek offset = {offset}, min offset = {low}, "
                                f"max offset = {high}")
        state.pq.clear()
        self._drop_cached(mq)
        old = self._tasks.pop(mq, None)
        if old is not None:
            old.cancel()
        state.seek_offset = offset
        state.pull_offset = -1
        self._start_pull_task(mq)

    def _drop_cached(self, mq: MessageQueueRef) -> None:
        kept = []
        while not self._cache.empty():
            item = self._cache.get_nowait()
            if item[1] != mq:
                kept.append(item)
        for item in kept:
            self._cache.put_nowait(item)

    async def seek_to_begin(self, mq: MessageQueueRef) -> None:
        addr = await broker_addr_of(self.instance, mq)
        await self.seek(mq, await self.instance.api.get_min_offset(addr, mq.topic, mq.queue_id))

    async def seek_to_end(self, mq: MessageQueueRef) -> None:
        addr = await broker_addr_of(self.instance, mq)
        await self.seek(mq, await self.instance.api.get_max_offset(addr, mq.topic, mq.queue_id))

    async def offset_for_timestamp(self, mq: MessageQueueRef, timestamp_ms: int) -> int:
        addr = await broker_addr_of(self.instance, mq)
        return await self.instance.api.search_offset(addr, mq.topic, mq.queue_id, timestamp_ms)

    def pause(self, mqs: Iterable[MessageQueueRef]) -> None:
        for mq in mqs:
            if mq in self.assigned:
                self.assigned[mq].paused = True

    def resume(self, mqs: Iterable[MessageQueueRef]) -> None:
        for mq in mqs:
            if mq in self.assigned:
                self.assigned[mq].paused = False

    # ---- ConsumerInner ------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        if self.service_state == "RUNNING" and self.subscription_type == "SUBSCRIBE":
            await self.rebalance.do_rebalance(False)

    async def persist_consumer_offset(self) -> None:
        mqs = set(self.rebalance.process_queue_table) if self.subscription_type == "SUBSCRIBE" else set(self.assigned)
        await self.offset_store.persist_all(mqs)

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        return {"order": False, "autoCommit": self.auto_commit, "consumeResult": "CR_THROW_EXCEPTION",
                "remark": "a lite pull consumer has no listener to consume a message directly",
                "spentTimeMills": 0}

    def consumer_running_info(self) -> dict[str, Any]:
        return {"properties": {"consumeType": "CONSUME_ACTIVELY", "messageModel": self.message_model,
                               "consumeFromWhere": self.consume_from_where, "PROP_CLIENT_VERSION": "V5_5_0"},
                "subscriptionSet": [s.to_json_dict() for s in self.rebalance.subscription_inner.values()],
                "mqTable": {}, "statusTable": {}}

    async def reset_offset(self, topic: str, offsets: dict[MessageQueueRef, int]) -> None:
        for mq, offset in offsets.items():
            if mq.topic == topic and mq in self.assigned:
                await self.seek(mq, offset)


class DefaultLitePullConsumer:
    """The lite pull consumer for threads, over the shared background loop."""

    def __init__(self, consumer_group: str, config: RemotingClientConfig | None = None, **options: Any) -> None:
        self._async = AsyncDefaultLitePullConsumer(consumer_group, config, **options)

    @property
    def inner(self) -> AsyncDefaultLitePullConsumer:
        return self._async

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = ExpressionType.TAG) -> None:
        bg.run(_call(self._async.subscribe, topic, expression, expression_type))

    def unsubscribe(self, topic: str) -> None:
        bg.run(_call(self._async.unsubscribe, topic))

    def assign(self, queues: Iterable[MessageQueueRef]) -> None:
        bg.run(_call(self._async.assign, list(queues)))

    def assignment(self) -> set[MessageQueueRef]:
        return self._async.assignment()

    def fetch_message_queues(self, topic: str) -> set[MessageQueueRef]:
        return bg.run(self._async.fetch_message_queues(topic))

    def start(self) -> None:
        bg.run(self._async.start())

    def shutdown(self) -> None:
        bg.run(self._async.shutdown())

    def poll(self, timeout: float | None = None) -> list[MessageExt]:  # noqa: ASYNC109
        return bg.run(self._async.poll(timeout))

    def commit_sync(self, offsets: dict[MessageQueueRef, int] | None = None, persist: bool = True) -> None:
        bg.run(self._async.commit_sync(offsets, persist))

    def committed(self, mq: MessageQueueRef) -> int:
        return bg.run(self._async.committed(mq))

    def seek(self, mq: MessageQueueRef, offset: int) -> None:
        bg.run(self._async.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueueRef) -> None:
        bg.run(self._async.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueueRef) -> None:
        bg.run(self._async.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueueRef, timestamp_ms: int) -> int:
        return bg.run(self._async.offset_for_timestamp(mq, timestamp_ms))

    def pause(self, mqs: Iterable[MessageQueueRef]) -> None:
        bg.run(_call(self._async.pause, list(mqs)))

    def resume(self, mqs: Iterable[MessageQueueRef]) -> None:
        bg.run(_call(self._async.resume, list(mqs)))

    def __enter__(self) -> DefaultLitePullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a synchronous method on the loop thread (it may start tasks there)."""
    return fn(*args)
