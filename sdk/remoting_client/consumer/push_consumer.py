"""DefaultMQPushConsumer: a consumer that pulls with long polling and calls a listener
(DefaultMQPushConsumer, DefaultMQPushConsumerImpl, PullMessageService, RebalancePushImpl).

Each assigned queue has one pull chain: pull (held by the broker up to 15 s when nothing is
there), cache the messages in the queue's ProcessQueue, hand them to the consume service and
pull again, unless the cache is over its flow-control limits (then 50 ms later). The committed
offset travels in the pull (FLAG_COMMIT_OFFSET) and is persisted every 5 s and at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.results import PullStatus
from orbitmq.clientcore import loop as bg
from orbitmq.common import sysflag
from orbitmq.common.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX
from orbitmq.common.filter.subscription import ExpressionType, SubscriptionData, build_subscription_data
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer.consume_service import (
    ConsumeMessageConcurrentlyService,
    ConsumeMessageOrderlyService,
)
from orbitmq.remoting_client.consumer.hooks import ConsumeMessageHook
from orbitmq.remoting_client.consumer.inner import ConsumerInnerMixin
from orbitmq.remoting_client.consumer.listener import ConsumeReturnType, Listener
from orbitmq.remoting_client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from orbitmq.remoting_client.consumer.process_queue import ProcessQueue
from orbitmq.remoting_client.consumer.pull_api import PullAPIWrapper
from orbitmq.remoting_client.consumer.rebalance import ConsumerRebalanceImpl, parse_consume_timestamp

log = logging.getLogger("orbitmq.remoting_client.push")

CLUSTERING, BROADCASTING = "CLUSTERING", "BROADCASTING"
CONSUME_FROM = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP")
PULL_TIME_DELAY_WHEN_EXCEPTION = 3.0  # PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05  # PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
PULL_TIME_DELAY_WHEN_SUSPEND = 1.0  # PULL_TIME_DELAY_MILLS_WHEN_SUSPEND
OFFSET_ILLEGAL_DELAY = 10.0  # DefaultMQPushConsumerImpl's OFFSET_ILLEGAL task: 10 s
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
_MIB = 1024 * 1024


def default_consume_timestamp() -> str:
    """DefaultMQPushConsumer#consumeTimestamp's default: half an hour ago, yyyyMMddHHmmss."""
    return datetime.fromtimestamp(time.time() - 1800).strftime("%Y%m%d%H%M%S")


class PullRequest:
    __slots__ = ("group", "mq", "pq", "next_offset", "locked_first")

    def __init__(self, group: str, mq: MessageQueueRef, pq: ProcessQueue, next_offset: int) -> None:
        self.group, self.mq, self.pq, self.next_offset = group, mq, pq, next_offset
        self.locked_first = False

    def __repr__(self) -> str:
        return f"PullRequest[group={self.group}, mq={self.mq}, nextOffset={self.next_offset}]"


class ConsumerStats:
    """ConsumerStatsManager's counters, enough for GET_CONSUMER_RUNNING_INFO."""

    def __init__(self) -> None:
        self.ok: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.rt: dict[str, float] = {}
        self.pulled: dict[str, int] = {}

    def record(self, topic: str, count: int, elapsed: float, kind: ConsumeReturnType) -> None:
        table = self.ok if kind == ConsumeReturnType.SUCCESS else self.failed
        table[topic] = table.get(topic, 0) + count
        self.rt[topic] = elapsed * 1000

    def status(self, topic: str) -> dict[str, Any]:
        return {"consumeOKTPS": 0.0, "consumeFailedTPS": 0.0, "pullTPS": 0.0, "pullRT": 0.0,
                "consumeRT": self.rt.get(topic, 0.0), "consumeFailedMsgs": self.failed.get(topic, 0)}


class RebalancePushImpl(ConsumerRebalanceImpl):
    consumer: AsyncDefaultMQPushConsumer

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueueRef],
                                    mq_divided: set[MessageQueueRef]) -> None:
        """RebalancePushImpl#messageQueueChanged: new subVersion, per-queue share of the topic
        limits, and a heartbeat so the broker sees the subscription at once."""
        sub = self.subscription_inner.get(topic)
        if sub is not None:
            sub.sub_version = int(time.time() * 1000)
        c = self.consumer
        count = len(self.process_queue_table)
        if count:
            if c.pull_threshold_for_topic != -1:
                c.pull_threshold_for_queue = max(1, c.pull_threshold_for_topic // count)
            if c.pull_threshold_size_for_topic != -1:
                c.pull_threshold_size_for_queue = max(1, c.pull_threshold_size_for_topic // count)
        await self.instance.send_heartbeat_to_all_brokers(is_rebalance=True)
        if c.message_queue_listener is not None:
            c.message_queue_listener(topic, mq_all, mq_divided)

    async def remove_unnecessary_message_queue(self, mq: MessageQueueRef, pq: ProcessQueue) -> bool:
        store = self.consumer.offset_store
        await store.persist(mq)
        if self.consumer.consume_orderly and self.message_model == CLUSTERING:
            return await self._try_remove_order_message_queue(mq, pq)
        store.remove_offset(mq)
        return True

    async def _try_remove_order_message_queue(self, mq: MessageQueueRef, pq: ProcessQueue) -> bool:
        """Release the broker lock only once no orderly batch of the queue runs (waiting 500 ms),
        or unconditionally 20 s after the last lock renewal."""
        force = pq.dropped and time.monotonic() > pq.last_lock_timestamp + self.consumer.unlock_delay
        acquired = False
        if not force:
            try:
                await asyncio.wait_for(pq.consume_lock.acquire(), 0.5)
                acquired = True
            except TimeoutError:
                pq.try_unlock_times += 1
                return False
        try:
            store = self.consumer.offset_store
            await store.persist(mq)
            store.remove_offset(mq)
            pq.locked = False
            await self.unlock(mq)
            return True
        finally:
            if acquired:
                pq.consume_lock.release()

    def dispatch_pull_request(self, requests: list[tuple[MessageQueueRef, ProcessQueue, int]]) -> None:
        # RebalanceImpl#updateProcessQueueTableInRebalance dispatches new queues' first pulls 500 ms
        # later, after messageQueueChanged's heartbeat carried the new subVersion to the brokers.
        for mq, pq, offset in requests:
            self.consumer.execute_pull_request_later(PullRequest(self.group, mq, pq, offset), 0.5)


class AsyncDefaultMQPushConsumer(ConsumerInnerMixin):
    """The asyncio push consumer; DefaultMQPushConsumer wraps it for threads."""

    CONSUME_TYPE = "CONSUME_PASSIVELY"

    def __init__(self, consumer_group: str, config: RemotingClientConfig | None = None, *,
                 namesrv_addr: str | None = None,
                 message_model: str = CLUSTERING,
                 consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
                 consume_timestamp: str | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None,
                 consume_thread_min: int = 20, consume_thread_max: int = 20,
                 consume_concurrently_max_span: int = 2000,
                 pull_threshold_for_queue: int = 1000, pull_threshold_size_for_queue: int = 100,
                 pull_threshold_for_topic: int = -1, pull_threshold_size_for_topic: int = -1,
                 pull_interval: float = 0.0, pull_batch_size: int = 32, pull_batch_size_in_bytes: int = 256 * 1024,
                 consume_message_batch_max_size: int = 1, post_subscription_when_pull: bool = False,
                 max_reconsume_times: int = -1, suspend_current_queue_time_millis: int = 1000,
                 consume_timeout: float = 15.0, await_termination_millis_when_shutdown: int = 0,
                 broker_suspend_max_time_millis: int = 15_000, consumer_timeout_millis_when_suspend: int = 30_000,
                 lock_interval: float = 20.0, lock_max_live_time: float = 30.0, unlock_delay: float = 20.0,
                 pull_time_delay_when_exception: float = PULL_TIME_DELAY_WHEN_EXCEPTION,
                 offset_store: OffsetStore | None = None, local_offset_store_dir: str | Path | None = None,
                 enable_msg_trace: bool = False, customized_trace_topic: str | None = None) -> None:
        from orbitmq.remoting_client.instance import get_or_create_instance

        if not consumer_group or consumer_group == "DEFAULT_CONSUMER":
            raise MQClientError("consumerGroup can not equal DEFAULT_CONSUMER, please specify another one.")
        if message_model not in (CLUSTERING, BROADCASTING):
            raise MQClientError(f"messageModel must be CLUSTERING or BROADCASTING, not {message_model!r}")
        if consume_from_where not in CONSUME_FROM:
            raise MQClientError(f"consumeFromWhere must be one of {CONSUME_FROM}, not {consume_from_where!r}")
        checks = [(1 <= consume_concurrently_max_span <= 65535, "consumeConcurrentlyMaxSpan Out of range [1, 65535]"),
                  (1 <= pull_threshold_for_queue <= 65535, "pullThresholdForQueue Out of range [1, 65535]"),
                  (1 <= pull_threshold_size_for_queue <= 1024, "pullThresholdSizeForQueue Out of range [1, 1024]"),
                  (pull_threshold_for_topic == -1 or 1 <= pull_threshold_for_topic <= 6553500,
                   "pullThresholdForTopic Out of range [1, 6553500]"),
                  (pull_threshold_size_for_topic == -1 or 1 <= pull_threshold_size_for_topic <= 102400,
                   "pullThresholdSizeForTopic Out of range [1, 102400]"),
                  (0 <= pull_interval <= 65.535, "pullInterval Out of range [0, 65535] ms"),
                  (1 <= consume_message_batch_max_size <= 1024, "consumeMessageBatchMaxSize Out of range [1, 1024]"),
                  (1 <= pull_batch_size <= 1024, "pullBatchSize Out of range [1, 1024]"),
                  (1 <= consume_thread_min <= 1000, "consumeThreadMin Out of range [1, 1000]"),
                  (1 <= consume_thread_max <= 1000, "consumeThreadMax Out of range [1, 1000]"),
                  (consume_thread_min <= consume_thread_max, "consumeThreadMin can't be larger than consumeThreadMax"),
                  (consume_timeout > 0, "consumeTimeout must be positive (minutes)"),
                  (broker_suspend_max_time_millis < consumer_timeout_millis_when_suspend,
                   "brokerSuspendMaxTimeMillis must be shorter than consumerTimeoutMillisWhenSuspend")]
        for ok, why in checks:
            if not ok:
                raise MQClientError(why)
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
        self.consume_thread_min, self.consume_thread_max = consume_thread_min, consume_thread_max
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic = pull_threshold_size_for_topic
        self.pull_interval = pull_interval
        self.pull_batch_size = pull_batch_size
        self.pull_batch_size_in_bytes = pull_batch_size_in_bytes
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.post_subscription_when_pull = post_subscription_when_pull
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time_millis = suspend_current_queue_time_millis
        self.consume_timeout = consume_timeout
        self.await_termination_millis_when_shutdown = await_termination_millis_when_shutdown
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_timeout_millis_when_suspend = consumer_timeout_millis_when_suspend
        self.lock_interval, self.lock_max_live_time, self.unlock_delay = lock_interval, lock_max_live_time, unlock_delay
        self.pull_time_delay_when_exception = pull_time_delay_when_exception
        self.instance = get_or_create_instance(self.config)
        self._user_offset_store = offset_store
        self._local_offset_store_dir = local_offset_store_dir
        self.offset_store: OffsetStore = offset_store or RemoteBrokerOffsetStore(self.instance, self.consumer_group)
        self.rebalance = RebalancePushImpl(self)
        self.rebalance.lock_max_live_time = lock_max_live_time
        self.pull_api = PullAPIWrapper(self.instance, self.consumer_group)
        self.stats = ConsumerStats()
        self.listener: Listener | None = None
        self.consume_orderly = False
        self.consume_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self.message_queue_listener: Callable[[str, set[MessageQueueRef], set[MessageQueueRef]], None] | None = None
        self.service_state = "CREATE_JUST"
        self.paused = False
        self._pull_tasks: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._subscriptions: dict[str, SubscriptionData] = {}
        self.flow_control_times = 0
        self.consume_message_hooks: list[ConsumeMessageHook] = []
        self.enable_msg_trace = enable_msg_trace
        self.customized_trace_topic = customized_trace_topic
        self.trace_dispatcher: Any = None

    # ---- user API -----------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = ExpressionType.TAG) -> None:
        """A TAG ("TagA || TagB", "*") or SQL92 subscription of ``topic``; later calls replace it."""
        if expression_type not in (ExpressionType.TAG, ExpressionType.SQL92):
            raise MQClientError(f"expression type must be TAG or SQL92, not {expression_type!r}")
        topic = self.config.with_namespace(topic)
        try:
            sub = build_subscription_data(topic, expression, expression_type)
        except ValueError as exc:
            raise MQClientError(f"subscription exception: {exc}") from exc
        self._subscriptions[topic] = sub
        self.rebalance.subscription_inner[topic] = sub
        if self.service_state == "RUNNING":
            self._spawn(self._after_subscription_change(topic))

    def unsubscribe(self, topic: str) -> None:
        topic = self.config.with_namespace(topic)
        self._subscriptions.pop(topic, None)
        self.rebalance.subscription_inner.pop(topic, None)

    def register_message_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        """MessageListenerConcurrently (orderly=False) or MessageListenerOrderly (orderly=True)."""
        self.listener = listener
        self.consume_orderly = orderly

    def register_message_listener_concurrently(self, listener: Listener) -> None:
        self.register_message_listener(listener, orderly=False)

    def register_message_listener_orderly(self, listener: Listener) -> None:
        self.register_message_listener(listener, orderly=True)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """DefaultMQPushConsumerImpl#registerConsumeMessageHook: run ``hook`` around every listener call."""
        self.consume_message_hooks.append(hook)

    def suspend(self) -> None:
        """Stop pulling (queues stay assigned); resume() continues."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    async def start(self) -> None:
        """DefaultMQPushConsumerImpl#start."""
        if self.service_state != "CREATE_JUST":
            raise MQClientError(f"The PushConsumer service state not OK, maybe started once, {self.service_state}")
        if self.listener is None:
            raise MQClientError("messageListener is null")
        if not self._subscriptions:
            raise MQClientError("no subscription: call subscribe() before start()")
        self.service_state = "START_FAILED"
        if self.message_model == CLUSTERING:
            retry = RETRY_GROUP_TOPIC_PREFIX + self.consumer_group
            self.rebalance.subscription_inner[retry] = build_subscription_data(retry, "*")
        if self._user_offset_store is None and self.message_model == BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.instance.client_id, self.consumer_group,
                                                     self._local_offset_store_dir)
        await self.offset_store.load()
        if self.enable_msg_trace and self.trace_dispatcher is None:
            from orbitmq.remoting_client.trace import AsyncTraceDispatcher

            self.trace_dispatcher = AsyncTraceDispatcher(self.config, self.consumer_group,
                                                         self.customized_trace_topic, role="CONSUME")
            await self.trace_dispatcher.start()
            self.consume_message_hooks.append(self.trace_dispatcher.consume_hook())
        service_cls = ConsumeMessageOrderlyService if self.consume_orderly else ConsumeMessageConcurrentlyService
        self.consume_service = service_cls(self, self.listener)
        self.consume_service.start()
        if not self.instance.register_consumer(self.consumer_group, self):
            self.service_state = "CREATE_JUST"
            await self.consume_service.shutdown()
            await self._stop_trace()
            raise MQClientError(f"The consumer group[{self.consumer_group}] has been created before, specify "
                                "another name please.")
        try:
            await self.instance.start()
            self.service_state = "RUNNING"
            for topic in list(self.rebalance.subscription_inner):
                await self._update_subscribe_info(topic)
            await self.instance.send_heartbeat_to_all_brokers()
        except BaseException:
            self.instance.unregister_consumer(self.consumer_group)
            await self.consume_service.shutdown()
            await self._stop_trace()
            self.service_state = "CREATE_JUST"
            raise
        self.instance.rebalance_immediately()

    async def _update_subscribe_info(self, topic: str) -> None:
        """updateTopicSubscribeInfoWhenSubscriptionChanged. A topic without a route yet is no error
        (upstream starts anyway): each rebalance looks the route up again, so consumption begins
        once the topic is created (the broker creates the retry topic with the first heartbeat)."""
        try:
            queues = await self.instance.subscribe_queues(topic)
        except MQClientError as exc:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("the consumer group %s subscribes to %s, which has no route yet: %s",
                            self.consumer_group, topic, exc)
            return
        self.rebalance.topic_subscribe_info_table[topic] = set(queues)

    async def _after_subscription_change(self, topic: str) -> None:
        await self._update_subscribe_info(topic)
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.rebalance_immediately()

    async def shutdown(self) -> None:
        """DefaultMQPushConsumerImpl#shutdown: stop consuming, persist offsets, unregister."""
        if self.service_state != "RUNNING":
            return
        self.service_state = "SHUTDOWN_ALREADY"
        for handle in list(self._timers):
            handle.cancel()
        self._timers.clear()
        for task in list(self._pull_tasks):
            task.cancel()
        for task in list(self._pull_tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert self.consume_service is not None
        await self.consume_service.shutdown(self.await_termination_millis_when_shutdown / 1000)
        await self.persist_consumer_offset()
        for pq in self.rebalance.process_queue_table.values():
            pq.dropped = True
        await self.instance.unregister_consumer_now(self.consumer_group)
        await self._stop_trace()  # the last records written before the instance goes
        await self.instance.shutdown()

    async def _stop_trace(self) -> None:
        if self.trace_dispatcher is not None:
            dispatcher, self.trace_dispatcher = self.trace_dispatcher, None
            hook = next((h for h in self.consume_message_hooks if getattr(h, "dispatcher", None) is dispatcher), None)
            if hook is not None:
                self.consume_message_hooks.remove(hook)
            await dispatcher.shutdown()

    async def __aenter__(self) -> AsyncDefaultMQPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ---- pull service -------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._pull_tasks.add(task)
        task.add_done_callback(self._pull_tasks.discard)

    def execute_pull_request_immediately(self, pr: PullRequest) -> None:
        if self.service_state == "SHUTDOWN_ALREADY":
            return
        self._spawn(self.pull_message(pr))

    def execute_pull_request_later(self, pr: PullRequest, delay: float) -> None:
        if self.service_state == "SHUTDOWN_ALREADY":
            return
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._timers.discard(handle)  # type: ignore[arg-type]
            self.execute_pull_request_immediately(pr)
        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(handle)

    def _flow_control(self, pr: PullRequest, why: str) -> None:
        self.flow_control_times += 1
        if self.flow_control_times % 1000 == 1:
            log.warning("the consumer message buffer is full (%s), so do flow control, %s, flowControlTimes=%d",
                        why, pr, self.flow_control_times)
        self.execute_pull_request_later(pr, PULL_TIME_DELAY_WHEN_FLOW_CONTROL)

    async def pull_message(self, pr: PullRequest) -> None:
        """DefaultMQPushConsumerImpl#pullMessage with its PullCallback."""
        pq = pr.pq
        if pq.dropped:
            return
        pq.last_pull_timestamp = time.monotonic()
        if self.service_state != "RUNNING":
            self.execute_pull_request_later(pr, self.pull_time_delay_when_exception)
            return
        if self.paused:
            self.execute_pull_request_later(pr, PULL_TIME_DELAY_WHEN_SUSPEND)
            return
        if pq.msg_count > self.pull_threshold_for_queue:
            self._flow_control(pr, f"count {pq.msg_count} > pullThresholdForQueue {self.pull_threshold_for_queue}")
            return
        if pq.msg_size // _MIB > self.pull_threshold_size_for_queue:
            self._flow_control(pr, f"size {pq.msg_size // _MIB} MiB > pullThresholdSizeForQueue "
                                   f"{self.pull_threshold_size_for_queue}")
            return
        if not self.consume_orderly:
            if pq.get_max_span() > self.consume_concurrently_max_span:
                self._flow_control(pr, f"span {pq.get_max_span()} > consumeConcurrentlyMaxSpan "
                                       f"{self.consume_concurrently_max_span}")
                return
        elif pq.locked:
            if not pr.locked_first:
                try:
                    offset = await self.rebalance.compute_pull_from_where(pr.mq)
                except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
                    log.warning("compute pull offset of %s failed: %s", pr.mq, exc)
                    self.execute_pull_request_later(pr, self.pull_time_delay_when_exception)
                    return
                if offset < pr.next_offset:
                    log.info("[NOTIFYME]the first time to pull message, but pull request offset larger than "
                             "broker consume offset, %s, offset %d", pr, offset)
                pr.locked_first = True
                pr.next_offset = offset
        else:
            self.execute_pull_request_later(pr, self.pull_time_delay_when_exception)
            return
        sub = self.rebalance.subscription_inner.get(pr.mq.topic)
        if sub is None:
            self.execute_pull_request_later(pr, self.pull_time_delay_when_exception)
            return
        commit_offset = 0
        if self.message_model == CLUSTERING:
            commit_offset = await self.offset_store.read_offset(pr.mq, ReadOffsetType.READ_FROM_MEMORY)
        commit_enable = commit_offset > 0
        sub_expression = sub.sub_string if self.post_subscription_when_pull and not sub.class_filter_mode else None
        flag = sysflag.build_pull_sys_flag(commit_enable, True, sub_expression is not None, sub.class_filter_mode)
        try:
            result = await self.pull_api.pull_kernel(
                pr.mq, sub_expression, sub.expression_type, sub.sub_version, pr.next_offset, self.pull_batch_size,
                self.pull_batch_size_in_bytes, flag, commit_offset if commit_enable else 0,
                self.broker_suspend_max_time_millis, self.consumer_timeout_millis_when_suspend / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # PullCallback#onException
            if not pr.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("execute the pull request exception, %s: %s", pr, exc)
            delay = self.pull_time_delay_when_exception
            if isinstance(exc, MQBrokerError) and exc.code == ResponseCode.FLOW_CONTROL:
                delay = PULL_TIME_DELAY_WHEN_FLOW_CONTROL * 400  # PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
            self.execute_pull_request_later(pr, delay)
            return
        # Filtered by the subscription in force now, not the one the pull went out with (upstream's
        # PullCallback keeps the latter): a pull parked across a subscribe() returns what the broker
        # matched with the new subscription, which the old one would drop and skip for good.
        self.pull_api.process_pull_result(pr.mq, result, self.rebalance.subscription_inner.get(pr.mq.topic, sub))
        if result.status == PullStatus.FOUND:
            prev = pr.next_offset
            pr.next_offset = result.next_begin_offset
            msgs = result.messages
            if not msgs:
                self.execute_pull_request_immediately(pr)
            else:
                for msg in msgs:
                    _strip_namespace(self, msg)
                dispatch = pq.put_message(msgs)
                assert self.consume_service is not None
                self.consume_service.submit_consume_request(msgs, pq, pr.mq, dispatch)
                if self.pull_interval > 0:
                    self.execute_pull_request_later(pr, self.pull_interval)
                else:
                    self.execute_pull_request_immediately(pr)
                if result.next_begin_offset < prev or msgs[0].queue_offset < prev:
                    log.warning("[BUG] pull message result maybe data wrong, nextBeginOffset %d firstMsgOffset %d "
                                "prevRequestOffset %d", result.next_begin_offset, msgs[0].queue_offset, prev)
        elif result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            pr.next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # correctTagsOffset
                self.offset_store.update_offset(pr.mq, pr.next_offset, True)
            self.execute_pull_request_immediately(pr)
        else:  # OFFSET_ILLEGAL
            log.warning("the pull request offset illegal, %s, result %s", pr, result)
            pr.next_offset = result.next_begin_offset
            pq.dropped = True
            await asyncio.sleep(OFFSET_ILLEGAL_DELAY)
            if self.service_state != "RUNNING":
                return
            self.offset_store.update_offset(pr.mq, pr.next_offset, False)
            await self.offset_store.persist(pr.mq)
            if self.rebalance.process_queue_table.get(pr.mq) is pq:
                self.rebalance.remove_process_queue(pr.mq)
            log.warning("fix the pull request offset, %s", pr)
            self.instance.rebalance_immediately()

    # ---- send back ----------------------------------------------------------------------------

    def max_reconsume_times_concurrently(self) -> int:
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times

    def max_reconsume_times_orderly(self) -> int:
        return 2**31 - 1 if self.max_reconsume_times == -1 else self.max_reconsume_times

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None,
                                mq: MessageQueueRef | None = None) -> None:
        """DefaultMQPushConsumerImpl#sendMessageBack: CONSUMER_SEND_MSG_BACK to the message's
        broker, else a plain send to %RETRY%group; raises only when both failed."""
        try:
            addr = self.instance.find_broker_address_in_publish(broker_name) if broker_name else msg.store_host
            if not addr:
                raise MQClientError(f"The broker[{broker_name}] not exist")
            await self.instance.api.consumer_send_msg_back(
                addr, self.consumer_group, msg.commit_log_offset, delay_level, msg.msg_id,
                self.config.with_namespace(msg.topic), self.max_reconsume_times_concurrently())
        except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
            log.warning("consumer send message back to the broker failed (%s), sending it to the retry topic", exc)
            await self.send_message_back_as_normal(msg)

    async def send_message_back_as_normal(self, msg: MessageExt, orderly: bool = False) -> None:
        """sendMessageBackAsNormalMessage (and the orderly service's sendMessageBack): a copy to
        %RETRY%group carrying the original topic, reconsume count and delay level 3 + count."""
        retry = RETRY_GROUP_TOPIC_PREFIX + self.consumer_group
        props = dict(msg.properties)
        props[MessageConst.ORIGIN_MESSAGE_ID] = props.get(MessageConst.ORIGIN_MESSAGE_ID) or msg.msg_id
        props[MessageConst.RETRY_TOPIC] = self.config.with_namespace(msg.topic)
        props[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times if orderly else msg.reconsume_times + 1)
        max_times = self.max_reconsume_times_orderly() if orderly else self.max_reconsume_times_concurrently()
        props[MessageConst.MAX_RECONSUME_TIMES] = str(max_times)
        props.pop(MessageConst.TRANSACTION_PREPARED, None)
        props[MessageConst.DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        new = Message(topic=retry, body=msg.body, flag=msg.flag, properties=props)
        await self.send_to_topic(new)

    async def send_to_topic(self, msg: Message) -> None:
        """One send through the instance's routes (the client's inner producer's role)."""
        from orbitmq.remoting_client.publish_info import route_to_publish_info

        route = await self.instance.topic_route(msg.topic)
        info = route_to_publish_info(msg.topic, route)
        last: Exception | None = None
        for _ in range(max(1, min(3, len(info.message_queue_list)))):
            mq = info.select_one_message_queue()
            if mq is None:
                break
            addr = self.instance.find_broker_address_in_publish(mq.broker_name)
            if addr is None:
                continue
            try:
                await self.instance.api.send_message(addr, mq.broker_name, msg, CLIENT_INNER_PRODUCER_GROUP,
                                                     mq.queue_id)
                return
            except (MQBrokerError, RemotingError, OSError) as exc:
                last = exc
        raise MQClientError(f"send to {msg.topic} failed: {last}")

    # ---- ConsumerInner ------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        if self.service_state == "RUNNING" and not self.paused:
            await self.rebalance.do_rebalance(self.consume_orderly)

    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(set(self.rebalance.process_queue_table))

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        if self.consume_service is None:
            return {"order": self.consume_orderly, "autoCommit": True, "consumeResult": "CR_THROW_EXCEPTION",
                    "remark": "the consumer is not started", "spentTimeMills": 0}
        _strip_namespace(self, msg)
        return await self.consume_service.consume_message_directly(msg, broker_name)

    def consumer_running_info(self) -> dict[str, Any]:
        """ConsumerRunningInfo: properties, subscriptions, per-queue ProcessQueueInfo, status."""
        from orbitmq.common import fastjson

        mq_table = {}
        for mq, pq in self.rebalance.process_queue_table.items():
            first = pq.first_offset()
            mq_table[fastjson.message_queue_key(mq.topic, mq.broker_name, mq.queue_id)] = {
                "commitOffset": self.offset_store.offset_table.get(mq, -1),
                "cachedMsgMinOffset": first if first is not None else 0,
                "cachedMsgMaxOffset": pq.queue_offset_max, "cachedMsgCount": pq.msg_count,
                "cachedMsgSizeInMiB": pq.msg_size // _MIB, "transactionMsgMinOffset": 0,
                "transactionMsgMaxOffset": 0, "transactionMsgCount": 0, "locked": pq.locked,
                "tryUnlockTimes": pq.try_unlock_times, "lastLockTimestamp": 0, "droped": pq.dropped,
                "lastPullTimestamp": 0, "lastConsumeTimestamp": 0}
        return {
            "properties": {"consumeOrderly": str(self.consume_orderly).lower(),
                           "consumeType": "CONSUME_PASSIVELY", "messageModel": self.message_model,
                           "consumeFromWhere": self.consume_from_where,
                           "consumeThreadCorePoolSize": str(self.consume_thread_min),
                           "PROP_CLIENT_VERSION": "V5_5_0", "PROP_CONSUMER_START_TIMESTAMP": "0"},
            "subscriptionSet": [s.to_json_dict() for s in self.rebalance.subscription_inner.values()],
            "mqTable": mq_table,
            "statusTable": {t: self.stats.status(t) for t in self.rebalance.subscription_inner},
        }

    async def reset_offset(self, topic: str, offsets: dict[MessageQueueRef, int]) -> None:
        """MQClientInstance#resetOffset: pause, drop the topic's queues, store the new offsets,
        resume; the next rebalance pulls from there."""
        self.suspend()
        try:
            for mq, pq in list(self.rebalance.process_queue_table.items()):
                if mq.topic == topic and mq in offsets:
                    pq.dropped = True
                    pq.clear()
            for mq, offset in offsets.items():
                if mq.topic == topic:
                    self.offset_store.update_and_freeze_offset(mq, offset)
                    await self.offset_store.persist(mq)
                    self.rebalance.remove_process_queue(mq)
                    self.offset_store.remove_offset(mq)
        finally:
            self.resume()
        self.instance.rebalance_immediately()


def _strip_namespace(consumer: AsyncDefaultMQPushConsumer, msg: MessageExt) -> None:
    if consumer.config.namespace:
        msg.topic = consumer.config.without_namespace(msg.topic)


class DefaultMQPushConsumer:
    """The push consumer for threads: the asyncio one running on the shared background loop.

    A plain (non-async) listener runs on the consumer's worker threads and may block.
    """

    def __init__(self, consumer_group: str, config: RemotingClientConfig | None = None, **options: Any) -> None:
        self._async = AsyncDefaultMQPushConsumer(consumer_group, config, **options)

    @property
    def inner(self) -> AsyncDefaultMQPushConsumer:
        return self._async

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = ExpressionType.TAG) -> None:
        self._async.subscribe(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self._async.unsubscribe(topic)

    def register_message_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        self._async.register_message_listener(listener, orderly=orderly)

    def register_message_listener_concurrently(self, listener: Listener) -> None:
        self._async.register_message_listener(listener, orderly=False)

    def register_message_listener_orderly(self, listener: Listener) -> None:
        self._async.register_message_listener(listener, orderly=True)

    def start(self) -> None:
        bg.run(self._async.start())

    def shutdown(self) -> None:
        bg.run(self._async.shutdown())

    def suspend(self) -> None:
        self._async.suspend()

    def resume(self) -> None:
        self._async.resume()

    def __enter__(self) -> DefaultMQPushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
