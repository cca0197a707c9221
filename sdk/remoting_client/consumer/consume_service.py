"""Consume services: how pulled messages reach the listener (ConsumeMessageConcurrentlyService,
ConsumeMessageOrderlyService).

Concurrently: batches of consumeMessageBatchMaxSize messages run on up to consumeThreadMax workers
(consumeThreadMin kept busy, more started while requests wait); a failed message goes back to the
broker (CONSUMER_SEND_MSG_BACK, falling back to a plain send to %RETRY%group), and one whose
send-back failed too is consumed again locally 5 s later. The queue's offset advances past a
message only once it is consumed or safely in the retry topic.

Orderly: one consume request per queue at a time, holding the broker's lock on the queue; a
failed batch is retried in place after suspendCurrentQueueTimeMillis, and after
maxReconsumeTimes it goes to the DLQ so the queue can move on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.remoting_client.consumer.hooks import (
    CONSUME_CONTEXT_TYPE,
    ConsumeMessageContext,
    run_hooks_after,
    run_hooks_before,
)
from orbitmq.remoting_client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeReturnType,
    call_listener,
)
from orbitmq.remoting_client.consumer.process_queue import ProcessQueue

if TYPE_CHECKING:
    from orbitmq.remoting_client.consumer.push_consumer import DefaultMQPushConsumer

log = logging.getLogger("orbitmq.remoting_client.consume")

CONSUME_LATER_DELAY = 5.0  # submitConsumeRequestLater: 5 s
MAX_TIME_CONSUME_CONTINUOUSLY = 60.0  # rocketmq.client.maxTimeConsumeContinuously


def hooks_before(consumer: Any, msgs: list[MessageExt], mq: MessageQueueRef) -> ConsumeMessageContext | None:
    """executeHookBefore with a new ConsumeMessageContext, or None when the consumer has no hook."""
    if not consumer.consume_message_hooks:
        return None
    context = ConsumeMessageContext(consumer.consumer_group, msgs, mq, namespace=consumer.config.namespace)
    run_hooks_before(consumer.consume_message_hooks, context)
    return context


def _orderly_return_type(status: Any, has_exception: bool, timed_out: bool) -> ConsumeReturnType:
    """ConsumeMessageOrderlyService.ConsumeRequest#run's returnType."""
    if status is None:
        return ConsumeReturnType.EXCEPTION if has_exception else ConsumeReturnType.RETURNNULL
    if timed_out:
        return ConsumeReturnType.TIME_OUT
    if status in (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, ConsumeOrderlyStatus.ROLLBACK):
        return ConsumeReturnType.FAILED
    return ConsumeReturnType.SUCCESS


def reset_retry_topic(msgs: list[MessageExt], group: str) -> None:
    """ConsumeMessageConcurrentlyService#resetRetryAndNamespace: show the original topic."""
    retry_topic = RETRY_GROUP_TOPIC_PREFIX + group
    for msg in msgs:
        original = msg.properties.get(MessageConst.RETRY_TOPIC)
        if original and msg.topic == retry_topic:
            msg.topic = original


class _Workers:
    """consumeThreadMin..consumeThreadMax workers over one unbounded request queue."""

    def __init__(self, name: str, minimum: int, maximum: int) -> None:
        if minimum < 1 or maximum < minimum:
            raise ValueError(f"consumeThreadMin ({minimum}) must be >= 1 and <= consumeThreadMax ({maximum})")
        self.name, self.minimum, self.maximum = name, minimum, maximum
        self.queue: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()
        self.idle = 0
        self.executor = concurrent.futures.ThreadPoolExecutor(maximum, thread_name_prefix=name)
        self.timers: set[asyncio.TimerHandle] = set()
        self.closed = False

    def start(self) -> None:
        for _ in range(self.minimum):
            self._spawn()

    def _spawn(self) -> None:
        task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.name}-{len(self.tasks)}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self) -> None:
        while True:
            self.idle += 1
            try:
                job = await self.queue.get()
            finally:
                self.idle -= 1
            try:
                await job()
            except Exception:
                log.exception("%s: consume request failed", self.name)
            finally:
                self.queue.task_done()

    def submit(self, job: Callable[[], Awaitable[None]]) -> None:
        if self.closed:
            return
        self.queue.put_nowait(job)
        if self.idle == 0 and len(self.tasks) < self.maximum:
            self._spawn()

    def submit_later(self, delay: float, job: Callable[[], Awaitable[None]]) -> None:
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self.timers.discard(handle)  # type: ignore[arg-type]
            self.submit(job)
        handle = loop.call_later(delay, fire)
        self.timers.add(handle)

    async def shutdown(self, await_termination: float) -> None:
        self.closed = True
        for handle in list(self.timers):
            handle.cancel()
        self.timers.clear()
        if await_termination > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.queue.join(), await_termination)
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.executor.shutdown(wait=False, cancel_futures=True)


class ConsumeMessageConcurrentlyService:
    def __init__(self, consumer: DefaultMQPushConsumer, listener: Any) -> None:
        self.consumer = consumer
        self.listener = listener
        self.group = consumer.consumer_group
        self.workers = _Workers(f"ConsumeMessageThread_{self.group}", consumer.consume_thread_min,
                                consumer.consume_thread_max)
        self._clean_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.workers.start()
        self._clean_task = asyncio.get_running_loop().create_task(self._clean_loop(), name=f"clean-{self.group}")

    async def shutdown(self, await_termination: float = 0.0) -> None:
        if self._clean_task is not None:
            self._clean_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._clean_task
        await self.workers.shutdown(await_termination)

    async def _clean_loop(self) -> None:
        """ConsumeMessageConcurrentlyService#cleanExpireMsg, every consumeTimeout minutes."""
        interval = self.consumer.consume_timeout * 60
        while True:
            await asyncio.sleep(interval)
            try:
                await self.clean_expired_messages()
            except Exception:
                log.exception("clean expired messages of %s failed", self.group)

    async def clean_expired_messages(self) -> int:
        """ProcessQueue#cleanExpiredMsg: messages consumed for over consumeTimeout go back to the
        broker with delay level 3 and leave the queue, so a hung listener cannot stall the offset."""
        cleaned = 0
        for mq, pq in list(self.consumer.rebalance.process_queue_table.items()):
            if pq.dropped:
                continue
            for msg in pq.expired_messages(self.consumer.consume_timeout):
                try:
                    await self.consumer.send_message_back(msg, 3, mq.broker_name, mq)
                except Exception as exc:
                    log.error("send expired message back failed: %s", exc)
                    continue
                offset = pq.remove_message([msg])
                cleaned += 1
                if offset >= 0 and not pq.dropped:
                    self.consumer.offset_store.update_offset(mq, offset, True)
        return cleaned

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueueRef,
                               dispatch_to_consume: bool) -> None:
        size = self.consumer.consume_message_batch_max_size
        for i in range(0, len(msgs), size):
            batch = msgs[i:i + size]
            self.workers.submit(lambda b=batch: self._consume(b, pq, mq))

    def _submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueueRef) -> None:
        self.workers.submit_later(CONSUME_LATER_DELAY, lambda: self._consume(msgs, pq, mq))

    async def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueueRef) -> None:
        """ConsumeRequest#run."""
        if pq.dropped:
            log.info("the message queue %s is dropped, not consuming", mq)
            return
        context = ConsumeConcurrentlyContext(mq)
        reset_retry_topic(msgs, self.group)
        hook_context = hooks_before(self.consumer, msgs, mq)
        now_ms = str(int(time.time() * 1000))
        for msg in msgs:
            msg.properties[MessageConst.CONSUME_START_TIMESTAMP] = now_ms
        begin = time.monotonic()
        status: Any = None
        has_exception = False
        try:
            status = await call_listener(self.listener, msgs, context, self.workers.executor)
        except Exception:
            has_exception = True
            log.warning("consume message exception, group %s, mq %s", self.group, mq, exc_info=True)
        elapsed = time.monotonic() - begin
        if status is None:
            return_type = ConsumeReturnType.EXCEPTION if has_exception else ConsumeReturnType.RETURNNULL
        elif elapsed >= self.consumer.consume_timeout * 60:
            return_type = ConsumeReturnType.TIME_OUT
        elif status == ConsumeConcurrentlyStatus.RECONSUME_LATER:
            return_type = ConsumeReturnType.FAILED
        else:
            return_type = ConsumeReturnType.SUCCESS
        self.consumer.stats.record(mq.topic, len(msgs), elapsed, return_type)
        if status is None or status not in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
                                            ConsumeConcurrentlyStatus.RECONSUME_LATER):
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if hook_context is not None:
            hook_context.props[CONSUME_CONTEXT_TYPE] = return_type.value
            hook_context.status = ConsumeConcurrentlyStatus(status).name
            hook_context.success = status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            run_hooks_after(self.consumer.consume_message_hooks, hook_context)
        if pq.dropped:
            log.warning("processQueue is dropped without process consume result, mq %s", mq)
            return
        await self.process_consume_result(ConsumeConcurrentlyStatus(status), context, msgs, pq, mq)

    async def process_consume_result(self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext,
                                     msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueueRef) -> None:
        if not msgs:
            return
        ack_index = context.ack_index
        if status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack_index = min(ack_index, len(msgs) - 1)
        else:
            ack_index = -1
        failed = msgs[ack_index + 1:]
        remaining = list(msgs)
        if self.consumer.message_model == "BROADCASTING":
            for msg in failed:
                log.warning("BROADCASTING, the message %s consume failed, drop it", msg.uniq_id_or_msg_id)
        else:
            back_failed = []
            for msg in failed:
                try:
                    await self.consumer.send_message_back(msg, context.delay_level_when_next_consume,
                                                          mq.broker_name, mq)
                except Exception as exc:
                    log.warning("send message %s back failed, consuming it again later: %s",
                                msg.uniq_id_or_msg_id, exc)
                    msg.reconsume_times += 1
                    back_failed.append(msg)
            if back_failed:
                ids = {id(m) for m in back_failed}
                remaining = [m for m in msgs if id(m) not in ids]
                self._submit_later(back_failed, pq, mq)
        offset = pq.remove_message(remaining)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, offset, True)

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: run the listener on one message (ConsumeMessageDirectlyResult)."""
        mq = MessageQueueRef(msg.topic, broker_name, msg.queue_id)
        context = ConsumeConcurrentlyContext(mq)
        reset_retry_topic([msg], self.group)
        begin = time.monotonic()
        try:
            status = await call_listener(self.listener, [msg], context, self.workers.executor)
            result = "CR_SUCCESS" if status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS else (
                "CR_LATER" if status == ConsumeConcurrentlyStatus.RECONSUME_LATER else "CR_RETURN_NULL")
            remark = None
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", repr(exc)
        return {"order": False, "autoCommit": True, "consumeResult": result, "remark": remark,
                "spentTimeMills": int((time.monotonic() - begin) * 1000)}


class ConsumeMessageOrderlyService:
    def __init__(self, consumer: DefaultMQPushConsumer, listener: Any) -> None:
        self.consumer = consumer
        self.listener = listener
        self.group = consumer.consumer_group
        self.workers = _Workers(f"ConsumeMessageThread_{self.group}", consumer.consume_thread_min,
                                consumer.consume_thread_max)
        self._queue_locks: dict[MessageQueueRef, asyncio.Lock] = {}  # MessageQueueLock
        self._lock_task: asyncio.Task[None] | None = None
        self.stopped = False

    def start(self) -> None:
        self.workers.start()
        if self.consumer.message_model == "CLUSTERING":
            self._lock_task = asyncio.get_running_loop().create_task(self._lock_loop(), name=f"lock-{self.group}")

    async def _lock_loop(self) -> None:
        """ConsumeMessageOrderlyService#start: lockMQPeriodically every 20 s (first after 1 s)."""
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.consumer.rebalance.lock_all()
            except Exception:
                log.exception("lock all queues of %s failed", self.group)
            await asyncio.sleep(self.consumer.lock_interval)

    async def shutdown(self, await_termination: float = 0.0) -> None:
        self.stopped = True
        if self._lock_task is not None:
            self._lock_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lock_task
        await self.workers.shutdown(await_termination)
        if self.consumer.message_model == "CLUSTERING":
            await self.consumer.rebalance.unlock_all()

    async def clean_expired_messages(self) -> int:
        return 0  # ProcessQueue#cleanExpiredMsg skips orderly consumers

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueueRef,
                               dispatch_to_consume: bool) -> None:
        if dispatch_to_consume:
            self.workers.submit(lambda: self._consume(pq, mq))

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueueRef, delay_ms: int) -> None:
        delay = min(max(delay_ms, 10), 30_000) / 1000
        self.workers.submit_later(delay, lambda: self._consume(pq, mq))

    def _try_lock_later_and_reconsume(self, pq: ProcessQueue, mq: MessageQueueRef, delay_ms: int) -> None:
        async def relock() -> None:
            ok = await self.consumer.rebalance.lock(mq)
            self._submit_later(pq, mq, 10 if ok else 3000)
        self.workers.submit_later(delay_ms / 1000, relock)

    async def _consume(self, pq: ProcessQueue, mq: MessageQueueRef) -> None:
        """ConsumeMessageOrderlyService.ConsumeRequest#run."""
        if pq.dropped:
            return
        lock = self._queue_locks.setdefault(mq, asyncio.Lock())
        async with lock:
            clustering = self.consumer.message_model == "CLUSTERING"
            if clustering and not (pq.locked and not pq.is_lock_expired()):
                if not pq.dropped:
                    self._try_lock_later_and_reconsume(pq, mq, 100)
                return
            begin = time.monotonic()
            while True:
                if pq.dropped or self.stopped:
                    break
                if clustering and (not pq.locked or pq.is_lock_expired()):
                    self._try_lock_later_and_reconsume(pq, mq, 10)
                    break
                if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self._submit_later(pq, mq, 10)
                    break
                msgs = pq.take_messages(self.consumer.consume_message_batch_max_size)
                if not msgs:
                    break
                reset_retry_topic(msgs, self.group)
                context = ConsumeOrderlyContext(mq)
                hook_context = hooks_before(self.consumer, msgs, mq)
                status: Any = None
                has_exception = False
                t0 = time.monotonic()
                async with pq.consume_lock:
                    if pq.dropped:
                        break
                    try:
                        status = await call_listener(self.listener, msgs, context, self.workers.executor)
                    except Exception:
                        has_exception = True
                        log.warning("consume message exception, group %s, mq %s", self.group, mq, exc_info=True)
                elapsed = time.monotonic() - t0
                ok = status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT)
                self.consumer.stats.record(mq.topic, len(msgs), elapsed,
                                           ConsumeReturnType.SUCCESS if ok else ConsumeReturnType.FAILED)
                if hook_context is not None:
                    hook_context.props[CONSUME_CONTEXT_TYPE] = _orderly_return_type(
                        status, has_exception, elapsed >= self.consumer.consume_timeout * 60).value
                if status is None or status == ConsumeOrderlyStatus.ROLLBACK:
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                if hook_context is not None:
                    hook_context.status = ConsumeOrderlyStatus(status).name
                    hook_context.success = ok
                    run_hooks_after(self.consumer.consume_message_hooks, hook_context)
                if not await self.process_consume_result(msgs, ConsumeOrderlyStatus(status), context, pq, mq):
                    break

    async def process_consume_result(self, msgs: list[MessageExt], status: ConsumeOrderlyStatus,
                                     context: ConsumeOrderlyContext, pq: ProcessQueue,
                                     mq: MessageQueueRef) -> bool:
        """ConsumeMessageOrderlyService#processConsumeResult (autoCommit): True to keep consuming."""
        continue_consume = True
        commit_offset = -1
        if status == ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            if await self._check_reconsume_times(msgs):
                pq.make_message_to_consume_again(msgs)
                suspend = context.suspend_current_queue_time_millis
                if suspend < 0:
                    suspend = self.consumer.suspend_current_queue_time_millis
                self._submit_later(pq, mq, suspend)
                continue_consume = False
            else:
                commit_offset = pq.commit()
        else:
            commit_offset = pq.commit()
        if commit_offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return continue_consume

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True to suspend (retry in place); a message past maxReconsumeTimes goes to the DLQ."""
        suspend = False
        max_times = self.consumer.max_reconsume_times_orderly()
        for msg in msgs:
            if msg.reconsume_times >= max_times:
                msg.properties[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times)
                try:
                    await self.consumer.send_message_back_as_normal(msg, orderly=True)
                except Exception as exc:
                    log.warning("send message %s to the DLQ failed: %s", msg.uniq_id_or_msg_id, exc)
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        mq = MessageQueueRef(msg.topic, broker_name, msg.queue_id)
        context = ConsumeOrderlyContext(mq)
        begin = time.monotonic()
        try:
            status = await call_listener(self.listener, [msg], context, self.workers.executor)
            result = {ConsumeOrderlyStatus.SUCCESS: "CR_SUCCESS", ConsumeOrderlyStatus.COMMIT: "CR_COMMIT",
                      ConsumeOrderlyStatus.ROLLBACK: "CR_ROLLBACK"}.get(status, "CR_LATER")
            remark = None
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", repr(exc)
        return {"order": True, "autoCommit": True, "consumeResult": result, "remark": remark,
                "spentTimeMills": int((time.monotonic() - begin) * 1000)}
