"""Message trace for gRPC clients (proxy key ``traceEnable``), beyond upstream.

RocketMQ 5's gRPC clients and proxy write no trace records; Remoting clients write them to
RMQ_SYS_TRACE_TOPIC themselves. With ``traceEnable`` this proxy writes the same records, in
RocketMQ's text format (orbitmq.common.trace_codec), on behalf of its gRPC clients: Pub per
sent message, SubBefore per delivered message, SubAfter per ack or dead-lettering, and
EndTransaction per commit/rollback. ``orbitmq admin queryMsgTraceById`` reads them back.

Tracing never slows or fails a client call: the hooks only format a string and append it to a
bounded queue (``traceQueueCapacity``, upstream's 2048); a full queue drops the record, counted
and logged. A background task sends batches of ``traceMsgBatchNum`` records (or whatever is
queued after TRACE_FLUSH_INTERVAL_S, and everything at shutdown) as one trace message whose
KEYS hold every traced message id and key, so the broker's index finds them by message id.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orbitmq.common import trace_codec as tc
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.receipt_handle import InvalidReceiptHandle, ReceiptHandle

if TYPE_CHECKING:
    from orbitmq.client.results import SendResult
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.proxy.config import ProxyConfig
    from orbitmq.proxy.context import ProxyContext

log = logging.getLogger("orbitmq.proxy.trace")

TRACE_FLUSH_INTERVAL_S = 5.0  # AsyncTraceDispatcher's wait before a partial batch goes out
TRACE_SEND_TIMEOUT_S = 5.0  # the trace producer's send timeout
MAX_TRACE_BATCH_NUM = 20  # traceMsgBatchNum's upper bound upstream
_DROP_LOG_EVERY = 1000
# gRPC message type -> the trace record's MessageType (a transactional send is a half message).
_PUB_TYPES = {
    pb.MessageType.NORMAL: tc.MessageType.NORMAL,
    pb.MessageType.FIFO: tc.MessageType.ORDER,
    pb.MessageType.DELAY: tc.MessageType.DELAY,
    pb.MessageType.TRANSACTION: tc.MessageType.TRANS_HALF,
}


def request_id_of(handle: ReceiptHandle) -> str:
    """The requestId pairing a SubBefore with its SubAfter: the same receipt handle (any proxy
    replica derives it alike, so an ack through another proxy still pairs)."""
    return f"{handle.broker_name}-{handle.queue_id}-{handle.offset}-{handle.retrieve_time}"


def _handle_of(msg: MessageExt) -> ReceiptHandle | None:
    raw = msg.properties.get(MessageConst.POP_CK)
    if not raw:
        return None
    try:
        return ReceiptHandle.decode(raw)
    except InvalidReceiptHandle:
        return None


FAILED = int(tc.ContextCode.FAILED)


def client_of(ctx: ProxyContext) -> str:
    """A trace record's client: the gRPC peer's address and its client id."""
    return f"{ctx.remote_address}/{ctx.client_id}" if ctx.client_id else ctx.remote_address


def _now_ms() -> int:
    return int(time.time() * 1000)


class ProxyTracer:
    """Formats trace records at the hooks and ships them to the trace topic in the background."""

    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster
        self.topic = config.msg_trace_topic_name
        self.region = tc.DEFAULT_REGION
        self.capacity = max(config.trace_queue_capacity, 1)
        self.batch_num = min(max(config.trace_msg_batch_num, 1), MAX_TRACE_BATCH_NUM)
        self.producer_group = f"_INNER_TRACE_PRODUCER-{config.proxy_name}"
        # (record text, the message id and user keys that index it)
        self._queue: collections.deque[tuple[str, str, str]] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.dropped = 0
        self.sent_records = 0
        self.failed_records = 0

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="proxy-trace-dispatcher")
        log.info("message trace on: records for gRPC clients go to %s", self.topic)

    async def shutdown(self) -> None:
        """Sends what is queued (bounded by the send timeout), then stops."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, TRACE_SEND_TIMEOUT_S * 2)
            self._task = None
        if self.dropped or self.failed_records:
            log.warning("message trace: %d record(s) dropped (queue full), %d lost to failed sends",
                        self.dropped, self.failed_records)

    # ---- hooks (never raise, never await) ---------------------------------------------------

    def _offer(self, record: str, msg_id: str, keys: str | None) -> None:
        if len(self._queue) >= self.capacity:
            self.dropped += 1
            if self.dropped % _DROP_LOG_EVERY == 1:
                log.warning("message trace queue full (%d): %d record(s) dropped so far", self.capacity, self.dropped)
            return
        self._queue.append((record, msg_id, keys or ""))
        if len(self._queue) >= self.batch_num:
            self._wake.set()

    def on_send(self, group: str, topic: str, ids: list[str], tags: list[str | None], keys: list[str | None],
                body_lengths: list[int], msg_type: int, result: SendResult | None, store_host: str,
                cost_ms: int, client_host: str) -> None:
        """Pub, one per message of a SendMessage that reached the broker."""
        try:
            now = _now_ms()
            success = result is not None and result.status.value == "SEND_OK"
            offset_ids = (result.offset_msg_id or "").split(",") if result is not None else []
            per_message = cost_ms // max(len(ids), 1)
            for index, msg_id in enumerate(ids):
                offset_id = offset_ids[index] if index < len(offset_ids) else ""
                record = tc.encode_pub(
                    timestamp=now, region_id=self.region, group=group, topic=topic, msg_id=msg_id,
                    tags=tags[index], keys=keys[index], store_host=store_host, body_length=body_lengths[index],
                    cost_time=per_message, msg_type=msg_type, offset_msg_id=offset_id, success=success,
                    client_host=client_host)
                self._offer(record, msg_id, keys[index])
        except Exception as exc:  # noqa: BLE001 -- tracing must not fail a send
            log.debug("trace on_send failed: %s", exc)

    def on_send_request(self, topic: str, protos: Sequence[pb.Message], ids: list[str], result: SendResult,
                        store_host: str, started: float, client_host: str) -> None:
        """on_send for a SendMessage request: tags, keys, sizes and type read from its messages."""
        try:
            first = protos[0].system_properties
            msg_type = _PUB_TYPES.get(first.message_type, tc.MessageType.NORMAL)
            tags = [p.system_properties.tag if p.system_properties.HasField("tag") else None for p in protos]
            keys = [" ".join(p.system_properties.keys) or None for p in protos]
            self.on_send(topic, topic, ids, tags, keys, [len(p.body) for p in protos], int(msg_type), result,
                         store_host, int((time.monotonic() - started) * 1000), client_host)
        except Exception as exc:  # noqa: BLE001
            log.debug("trace on_send_request failed: %s", exc)

    def on_deliver(self, group: str, messages: list[MessageExt], client_host: str) -> None:
        """SubBefore, one per message handed to a consumer."""
        try:
            now = _now_ms()
            for msg in messages:
                handle = _handle_of(msg)
                msg_id = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, msg.msg_id)
                keys = msg.properties.get(MessageConst.KEYS)
                request_id = request_id_of(handle) if handle is not None else create_uniq_id()
                record = tc.encode_sub_before(timestamp=now, region_id=self.region, group=group,
                                              request_id=request_id, msg_id=msg_id,
                                              retry_times=msg.reconsume_times, keys=keys, client_host=client_host)
                self._offer(record, msg_id, keys)
        except Exception as exc:  # noqa: BLE001
            log.debug("trace on_deliver failed: %s", exc)

    def on_consumed(self, group: str, msg_id: str, handle: ReceiptHandle, success: bool, client_host: str,
                    context_code: int = tc.ContextCode.SUCCESS) -> None:
        """SubAfter: acked (success) or given up on (dead-lettered, success false)."""
        try:
            now = _now_ms()
            record = tc.encode_sub_after(request_id=request_id_of(handle), msg_id=msg_id,
                                         cost_time=max(now - handle.retrieve_time, 0), success=success, keys=None,
                                         context_code=context_code, timestamp=now, group=group,
                                         client_host=client_host)
            self._offer(record, msg_id, None)
        except Exception as exc:  # noqa: BLE001
            log.debug("trace on_consumed failed: %s", exc)

    def on_end_transaction(self, group: str, topic: str, msg_id: str, transaction_id: str, state: str,
                           from_check: bool, store_host: str) -> None:
        """EndTransaction: the producer's commit or rollback as the broker received it."""
        try:
            record = tc.encode_end_transaction(
                timestamp=_now_ms(), region_id=self.region, group=group, topic=topic, msg_id=msg_id, tags=None,
                keys=None, store_host=store_host, transaction_id=transaction_id, transaction_state=state,
                from_transaction_check=from_check)
            self._offer(record, msg_id, None)
        except Exception as exc:  # noqa: BLE001
            log.debug("trace on_end_transaction failed: %s", exc)

    # ---- dispatch ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), TRACE_FLUSH_INTERVAL_S)
                continue
            if len(self._queue) < self.batch_num and not self._closing:
                # A partial batch waits for more records, at most the flush interval.
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), TRACE_FLUSH_INTERVAL_S)
            batch = [self._queue.popleft() for _ in range(min(self.batch_num, len(self._queue)))]
            if batch:
                await self._send_batch(batch)

    async def _send_batch(self, batch: list[tuple[str, str, str]]) -> None:
        key_set: dict[str, None] = {}
        for _record, msg_id, keys in batch:
            key_set[msg_id] = None
            for key in keys.split(" "):
                if key:
                    key_set[key] = None
        keys_text = " ".join(key_set)
        for body in tc.pack([record for record, _m, _k in batch]):
            msg = Message(self.topic, body.encode("utf-8"), 0, {
                MessageConst.KEYS: keys_text,
                MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id(),
                MessageConst.PRODUCER_GROUP: self.producer_group,
            })
            count = body.count(tc.FIELD_SPLITOR)
            try:
                queue = await self.cluster.select_write_queue(self.topic, None)
                if not queue.broker_addr:
                    raise RuntimeError(f"no master serves {self.topic} now")
                await self.cluster.api.send_message(queue.broker_addr, queue.broker_name, msg, self.producer_group,
                                                    queue.queue_id, timeout=TRACE_SEND_TIMEOUT_S)
                self.sent_records += count
            except Exception as exc:  # noqa: BLE001 -- counted and logged; the client never waits on it
                before = self.failed_records
                self.failed_records += count
                if before // _DROP_LOG_EVERY != self.failed_records // _DROP_LOG_EVERY or before == 0:
                    log.warning("message trace: sending %d record(s) to %s failed (%s); %d lost so far "
                                "(does the broker run with traceTopicEnable=true?)", count, self.topic, exc,
                                self.failed_records)
