"""Client-side message trace (AsyncTraceDispatcher, SendMessageTraceHookImpl, TraceDataEncoder).

With enableMsgTrace a producer records every stored send as a Pub record (and every ended
transaction as an EndTransaction record), a push consumer every message it hands to its listener
as a SubBefore record and the listener's outcome as a SubAfter record (ConsumeMessageTraceHookImpl),
and a background task writes them, a few at a time, as trace messages to RMQ_SYS_TRACE_TOPIC (or
the customized trace topic) through an inner producer of group
``_INNER_TRACE_PRODUCER-<group>-PRODUCE`` (``-CONSUME`` for a consumer's). Each trace message's KEYS are the
traced message ids and keys, so `orbitmq admin queryMsgTraceById` finds it by QUERY_MESSAGE. A
failed trace write never fails a send: it is logged and dropped, as upstream's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.results import SendResult, SendStatus
from orbitmq.common import trace_codec as tc
from orbitmq.common.constants import RMQ_SYS_TRACE_TOPIC
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.message_id import create_uniq_id
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer.hooks import CONSUME_CONTEXT_TYPE, ConsumeMessageContext

log = logging.getLogger("orbitmq.remoting_client.trace")

TRACE_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"  # TraceConstants.GROUP_NAME_PREFIX
TRACE_MSG_BATCH_NUM = 10  # ClientConfig#traceMsgBatchNum
POLLING_TIME_S = 0.1  # AsyncTraceDispatcher#pollingTimeMil
QUEUE_SIZE = 2048  # AsyncTraceDispatcher#queueSize: records beyond it are dropped


def _msg_type(msg: Message) -> tc.MessageType:
    props = msg.properties
    if (props.get(MessageConst.TRANSACTION_PREPARED) or "").lower() == "true":
        return tc.MessageType.TRANS_HALF
    if props.get(MessageConst.START_DELIVER_TIME) or props.get(MessageConst.DELAY_TIME_LEVEL):
        return tc.MessageType.DELAY
    return tc.MessageType.NORMAL


class _SendTraceHook:
    """SendMessageTraceHookImpl: a Pub record for each stored send of the producer."""

    def __init__(self, dispatcher: AsyncTraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def before(self, msg: Message, mq: MessageQueueRef, addr: str) -> None:
        return None

    def after(self, msg: Message, mq: MessageQueueRef, addr: str, result: SendResult | None,
              error: BaseException | None, cost_ms: int) -> None:
        d = self.dispatcher
        if result is None or msg.topic == d.trace_topic:  # failed, oneway or itself a trace: nothing to record
            return
        cfg = d.config
        ids = result.msg_id.split(",")
        offset_ids = result.offset_msg_id.split(",")
        keys = msg.properties.get(MessageConst.KEYS)
        now = int(time.time() * 1000)
        per_msg = max(cost_ms // max(len(ids), 1), 0)
        for i, msg_id in enumerate(ids):
            d.append(tc.encode_pub(
                timestamp=now - cost_ms, region_id=tc.DEFAULT_REGION, group=d.group,
                topic=cfg.without_namespace(msg.topic), msg_id=msg_id, tags=msg.properties.get(MessageConst.TAGS),
                keys=keys, store_host=addr, body_length=len(msg.body or b"") // max(len(ids), 1), cost_time=per_msg,
                msg_type=int(_msg_type(msg)), offset_msg_id=offset_ids[i] if i < len(offset_ids) else "",
                success=result.status == SendStatus.SEND_OK, client_host=cfg.client_ip), [msg_id, *msg.keys])


@dataclasses.dataclass
class _SubBefore:
    """What consume_message_before leaves for consume_message_after (TraceContext)."""

    request_id: str
    timestamp: int
    group: str
    msgs: list[MessageExt]


def _keys(msg: Message) -> list[str]:
    return [msg.uniq_id_or_msg_id, *msg.keys] if isinstance(msg, MessageExt) else list(msg.keys)


class _ConsumeTraceHook:
    """ConsumeMessageTraceHookImpl: a SubBefore record for each message a listener is given (not
    those sent with TRACE_ON=false), a SubAfter record of each with the batch's outcome after."""

    def __init__(self, dispatcher: AsyncTraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def hook_name(self) -> str:
        return "ConsumeMessageTraceHook"

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        msgs = [m for m in context.msg_list if m.properties.get(MessageConst.TRACE_SWITCH) != "false"]
        if not msgs:
            return
        d = self.dispatcher
        before = _SubBefore(create_uniq_id(), int(time.time() * 1000),
                            d.config.without_namespace(context.consumer_group), msgs)
        context.trace_context = before
        for m in msgs:
            d.append(tc.encode_sub_before(
                timestamp=before.timestamp, region_id=m.properties.get(MessageConst.MSG_REGION) or tc.DEFAULT_REGION,
                group=before.group, request_id=before.request_id, msg_id=m.uniq_id_or_msg_id,
                retry_times=m.reconsume_times, keys=m.properties.get(MessageConst.KEYS),
                client_host=d.config.client_ip), _keys(m))

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        before = context.trace_context
        if not isinstance(before, _SubBefore):
            return
        d = self.dispatcher
        now = int(time.time() * 1000)
        cost = (now - before.timestamp) // len(before.msgs)
        code = tc.ContextCode.__members__.get(context.props.get(CONSUME_CONTEXT_TYPE, ""), tc.ContextCode.SUCCESS)
        for m in before.msgs:
            d.append(tc.encode_sub_after(
                request_id=before.request_id, msg_id=m.uniq_id_or_msg_id, cost_time=cost, success=context.success,
                keys=m.properties.get(MessageConst.KEYS), context_code=int(code), timestamp=now,
                group=before.group, client_host=d.config.client_ip), _keys(m))


class AsyncTraceDispatcher:
    def __init__(self, config: RemotingClientConfig, group: str, trace_topic: str | None = None,
                 role: str = "PRODUCE") -> None:
        self.config = config
        self.group = group
        self.role = role  # TraceDispatcher.Type: PRODUCE or CONSUME, in the inner producer's group
        self.trace_topic = trace_topic or RMQ_SYS_TRACE_TOPIC
        self._queue: asyncio.Queue[tuple[str, list[str]]] = asyncio.Queue(QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None
        self._producer: Any = None
        self.dropped = 0
        self.written = 0

    def send_hook(self) -> _SendTraceHook:
        return _SendTraceHook(self)

    def consume_hook(self) -> _ConsumeTraceHook:
        return _ConsumeTraceHook(self)

    async def start(self) -> None:
        from orbitmq.remoting_client.producer.producer import AsyncDefaultMQProducer

        self._producer = AsyncDefaultMQProducer(f"{TRACE_GROUP_PREFIX}-{self.group}-{self.role}", self.config,
                                                retry_times_when_send_failed=1)
        await self._producer.start()
        self._task = asyncio.create_task(self._run(), name=f"trace-{self.group}")

    def append(self, record: str, keys: list[str]) -> None:
        """Queue one encoded record (and the keys its trace message carries); dropped when full."""
        try:
            self._queue.put_nowait((record, keys))
        except asyncio.QueueFull:
            self.dropped += 1
            log.info("trace queue full, record dropped")

    def end_transaction(self, msg: Message, result: SendResult, state: str, from_check: bool, addr: str) -> None:
        """EndTransactionTraceHookImpl: the record of a transaction this producer ended."""
        self.append(tc.encode_end_transaction(
            timestamp=int(time.time() * 1000), region_id=tc.DEFAULT_REGION, group=self.group,
            topic=self.config.without_namespace(msg.topic), msg_id=result.msg_id,
            tags=msg.properties.get(MessageConst.TAGS), keys=msg.properties.get(MessageConst.KEYS),
            store_host=addr, transaction_id=result.transaction_id or "", transaction_state=state,
            from_transaction_check=from_check), [result.msg_id, *msg.keys])

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first]
            deadline = asyncio.get_running_loop().time() + POLLING_TIME_S
            while len(batch) < TRACE_MSG_BATCH_NUM:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                # asyncio.timeout, not wait_for: 3.11's wait_for swallows a cancel of this task that
                # lands as the get completes, and shutdown would then wait on the task for ever.
                # A get cut short by the timeout leaves its record in the queue.
                try:
                    async with asyncio.timeout(remaining):
                        batch.append(await self._queue.get())
                except TimeoutError:
                    break
            try:
                await self._write(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _write(self, batch: list[tuple[str, list[str]]]) -> None:
        """AsyncTraceDispatcher#sendTraceDataByMQ: packed bodies, KEYS the traced ids and keys."""
        keys: list[str] = []
        for _, ks in batch:
            keys += [k for k in ks if k and k not in keys]
        for body in tc.pack([record for record, _ in batch]):
            trace = Message(self.trace_topic, body.encode("utf-8"))
            trace.put_property(MessageConst.KEYS, " ".join(keys))
            try:
                await self._producer.send(trace)
                self.written += 1
            except Exception as exc:  # never the user's send's problem
                log.info("write trace to %s failed: %s", self.trace_topic, exc)

    async def flush(self) -> None:
        """Write whatever is queued now."""
        batch: list[tuple[str, list[str]]] = []
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        if batch:
            try:
                await self._write(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def shutdown(self) -> None:
        """Let the queued records be written (up to 3 s), then stop the task and the inner producer."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(3.0):
                    await self._queue.join()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._producer is not None:
            await self.flush()
            await self._producer.shutdown()
            self._producer = None
