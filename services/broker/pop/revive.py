"""PopReviveService: turns checkpoints whose invisible time passed into redeliveries.

Each revive queue is read in order from its committed revive offset (kept as the consumer
offset of CID_RMQ_SYS_REVIVE_GROUP on the revive topic, so it survives restarts). Checkpoints
are held until their revive time, acks clear bits of their checkpoint, and a checkpoint due
(plus a short wait for acks still in flight) gets its un-acked messages re-put: into the
group's pop retry topic with reconsumeTimes + 1, keeping the message id and properties, or
into %DLQ%<group> once the message's reconsumeTimes reached the group's retryMaxTimes. The
revive offset then advances to the oldest checkpoint still waiting, so a crash re-reads — and
at worst redelivers again — but never forgets a checkpoint or an ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orbitmq.broker.store.model import GetMessageStatus
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.message import MessageConst, string_to_properties
from orbitmq.common.message_codec import (
    INT,
    MESSAGE_MAGIC_CODE,
    SIZE_MAGIC,
    SYS_FLAG_POSITION,
    RecordError,
    decode_record,
    header_struct,
)
from orbitmq.common.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

from . import dead_letter
from .checkpoint import AckMsg, BatchAckMsg, PopCheckPoint, RevivePayloadError
from .constants import ACK_TAG, BATCH_ACK_TAG, CK_TAG, LOCAL_HOST, REVIVE_GROUP

if TYPE_CHECKING:
    from .interfaces import RevivePop

log = logging.getLogger(__name__)

READ_SIZE = 4 * 1024 * 1024
_HEADER_V4 = header_struct(False, False)
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def record_tag_and_body(record: bytes) -> tuple[str | None, bytes]:
    """(TAGS property, body) of a revive-log record, as decode_record would give them.

    The revive service reads every checkpoint and ack once; decoding the whole record would
    also build host strings and a message id it never looks at. A record that does not add
    up is handed to decode_record, so a bad one raises exactly as before.
    """
    size = len(record)
    if size >= _HEADER_V4.size + 3:
        total, magic = SIZE_MAGIC.unpack_from(record, 0)
        (sys_flag,) = INT.unpack_from(record, SYS_FLAG_POSITION)
        (body_len,) = INT.unpack_from(record, _HEADER_V4.size - 4)
        body_end = _HEADER_V4.size + body_len
        if (magic == MESSAGE_MAGIC_CODE and total == size and not sys_flag & _HOST_FLAGS and body_len >= 0
                and body_end + 3 <= size):
            topic_len = record[body_end]
            props_at = body_end + 3 + topic_len
            if props_at + int.from_bytes(record[props_at - 2:props_at], "big") == size:
                record[body_end + 1:props_at - 2].decode("utf-8")
                props = string_to_properties(record[props_at:].decode("utf-8")) if props_at < size else {}
                return props.get(MessageConst.TAGS), record[_HEADER_V4.size:body_end]
    msg = decode_record(record, 0, check_crc=False)
    return msg.tags, msg.body


def ck_key(topic: str, group: str, queue_id: int, start_offset: int, pop_time: int, broker_name: str) -> tuple:
    return topic, group, queue_id, start_offset, pop_time, broker_name


@dataclass(slots=True)
class PendingCheckPoint:
    ck: PopCheckPoint
    revive_offset: int  # the checkpoint record's own offset in the revive queue
    acked: int = 0  # bit i set: message i of the batch was acked

    def all_acked(self) -> bool:
        return self.acked == (1 << self.ck.num) - 1


class ReviveQueue:
    """The in-memory view of one revive queue between its committed offset and its end."""

    def __init__(self, queue_id: int, read_offset: int) -> None:
        self.queue_id = queue_id
        self.read_offset = read_offset
        self.pending: dict[tuple, PendingCheckPoint] = {}

    def apply_checkpoint(self, ck: PopCheckPoint, revive_offset: int) -> None:
        key = ck_key(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name)
        if key not in self.pending:
            ck.revive_offset = revive_offset
            self.pending[key] = PendingCheckPoint(ck, revive_offset)

    def apply_ack(self, ack: AckMsg) -> None:
        key = ck_key(ack.topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time, ack.broker_name)
        entry = self.pending.get(key)
        if entry is None:
            return  # its checkpoint was revived already (a late ack) or never written
        for offset in ack.offsets():
            index = entry.ck.index_of_ack(offset)
            if index >= 0:
                entry.acked |= 1 << index
        if entry.all_acked():
            del self.pending[key]

    def commit_offset(self) -> int:
        if not self.pending:
            return self.read_offset
        return min(e.revive_offset for e in self.pending.values())


class PopReviveService:
    def __init__(self, pop: RevivePop) -> None:
        self.pop = pop
        self.broker = pop.broker
        self.queues: dict[int, ReviveQueue] = {}
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()

    async def start(self) -> None:
        self._kick = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="PopReviveService")

    async def shutdown(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for queue in self.queues.values():
            self._commit(queue)

    def wakeup(self) -> None:
        self._kick.set()

    async def _run(self) -> None:
        interval = max(self.pop.config.revive_interval, 10) / 1000.0
        while True:
            try:
                await self.revive_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("revive pass failed")
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), interval)

    async def revive_once(self) -> int:
        """Reads every revive queue and revives what is due; returns how many messages were re-put."""
        revived = 0
        for queue_id in range(self.pop.revive_queue_num()):
            queue = self.queues.get(queue_id)
            if queue is None:
                queue = self.queues[queue_id] = ReviveQueue(queue_id, self._initial_offset(queue_id))
            await self._consume(queue)
            revived += await self._revive_due(queue)
            self._commit(queue)
        return revived

    def _initial_offset(self, queue_id: int) -> int:
        offset = self.broker.consumer_offset_manager.query_offset(REVIVE_GROUP, self.pop.revive_topic, queue_id)
        if offset < 0:
            offset = max(self.broker.message_store.get_min_offset_in_queue(self.pop.revive_topic, queue_id), 0)
        return offset

    def _commit(self, queue: ReviveQueue) -> None:
        offset = queue.commit_offset()
        com = self.broker.consumer_offset_manager
        if com.query_offset(REVIVE_GROUP, self.pop.revive_topic, queue.queue_id) != offset:
            com.commit_offset(REVIVE_GROUP, self.pop.revive_topic, queue.queue_id, offset, LOCAL_HOST)

    async def _consume(self, queue: ReviveQueue) -> None:
        topic = self.pop.revive_topic
        batch = max(1, self.pop.config.revive_batch_size)
        while True:
            result = await self.broker.get_message(REVIVE_GROUP, topic, queue.queue_id, queue.read_offset, batch,
                                                   READ_SIZE, None)
            if result is None:
                return
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                                 GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.MESSAGE_WAS_REMOVING):
                if result.next_begin_offset != queue.read_offset:
                    log.warning("revive queue %d offset %d corrected to %d (%s)", queue.queue_id, queue.read_offset,
                                result.next_begin_offset, result.status)
                    queue.read_offset = result.next_begin_offset
                    continue
                return
            if result.message_count == 0:
                return
            for record, offset in zip(result.message_buffer_list, result.message_queue_offset, strict=True):
                self._apply(queue, bytes(record), offset)
            queue.read_offset = result.next_begin_offset
            # The store read and the decoding are synchronous: after a restart the backlog can
            # be millions of records, so give the loop back between batches.
            await asyncio.sleep(0)

    def _apply(self, queue: ReviveQueue, record: bytes, offset: int) -> None:
        metrics = self.broker.metrics
        try:
            tag, body = record_tag_and_body(record)
            if tag == CK_TAG:
                ck = PopCheckPoint.from_json(body)
                queue.apply_checkpoint(ck, offset)
                if metrics is not None:
                    metrics.on_revive_out(ck.cid, ck.topic, queue.queue_id, "CK")
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = AckMsg.from_json(body) if tag == ACK_TAG else BatchAckMsg.from_json(body)
                queue.apply_ack(ack)
                if metrics is not None:
                    metrics.on_revive_out(ack.consumer_group, ack.topic, queue.queue_id, "ACK")
            else:
                log.warning("unknown revive log record tag %r at %d@%d", tag, queue.queue_id, offset)
        except (RecordError, RevivePayloadError, UnicodeDecodeError) as exc:
            log.error("skip a bad revive log record at %d@%d: %s", queue.queue_id, offset, exc)

    async def _revive_due(self, queue: ReviveQueue) -> int:
        now = self.broker.now_ms()
        wait = self.pop.config.revive_ack_wait_ms
        due = sorted((e for e in queue.pending.values() if e.ck.revive_time + wait <= now),
                     key=lambda e: e.revive_offset)
        revived = 0
        for entry in due:
            ck = entry.ck
            for index in range(ck.num):
                if entry.acked >> index & 1:
                    continue
                if not await self._revive_message(ck, ck.ack_offset_by_index(index)):
                    return revived  # keep it (and everything after it) for the next pass
                entry.acked |= 1 << index
                revived += 1
            queue.pending.pop(ck_key(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name),
                              None)
            await asyncio.sleep(0)  # re-reads and re-puts need not yield: bound the turn to one checkpoint
        return revived

    async def _revive_message(self, ck: PopCheckPoint, offset: int) -> bool:
        """Re-puts one message; True when done (including a message that no longer exists)."""
        broker = self.broker
        if ck.broker_name and ck.broker_name != broker.config.broker_name:
            # Written here by a slave acting for that set (EscapeBridge#getMessageAsync upstream):
            # the message is read back from that set.
            try:
                msg = await broker.escape_bridge.get_message(ck.broker_name, ck.topic, ck.queue_id, offset)
            except Exception:  # noqa: BLE001 -- logged there; keep the checkpoint for the next pass
                return False
            if msg is None:
                log.warning("revive: message %s@%d:%d not found on %s, skip it", ck.topic, ck.queue_id, offset,
                            ck.broker_name)
                return True
        else:
            result = await broker.get_message(REVIVE_GROUP, ck.topic, ck.queue_id, offset, 1, READ_SIZE, None)
            if result is None or result.message_count == 0 or result.message_queue_offset[0] != offset:
                log.warning("revive: message %s@%d:%d not found (%s), skip it", ck.topic, ck.queue_id, offset,
                            getattr(result, "status", None))
                return True
            try:
                msg = decode_record(bytes(result.message_buffer_list[0]), 0, check_crc=False)
            except RecordError as exc:
                log.error("revive: message %s@%d:%d is unreadable: %s", ck.topic, ck.queue_id, offset, exc)
                return True
        what = f"{ck.topic}@{ck.queue_id}:{offset}"
        if msg.reconsume_times >= dead_letter.retry_max_times(broker, ck.cid):
            inner = dead_letter.dlq_message(broker, ck.topic, ck.cid, msg, msg.reconsume_times + 1)
        else:
            inner = dead_letter.retry_message(broker, ck.topic, ck.cid, msg, ck.pop_time,
                                              self.pop.config.use_separate_retry_queue)
        # EscapeBridge#putMessageToSpecificQueue upstream: a slave acting as master writes elsewhere.
        ok, status = await dead_letter.put_with_status(broker.escape_bridge, inner, what)
        metrics = broker.metrics
        if metrics is not None:
            metrics.on_revive_retry(ck.cid, ck.topic, status)
        return ok

    def pending_count(self) -> int:
        return sum(len(q.pending) for q in self.queues.values())

    def revive_progress(self) -> dict[int, tuple[int, int]]:
        """Per revive queue: (records not yet committed as revived, ms the oldest pending
        checkpoint is past its revive time) -- rocketmq_pop_revive_lag / _latency."""
        now = self.broker.now_ms()
        out: dict[int, tuple[int, int]] = {}
        store = self.broker.message_store
        for queue_id, queue in list(self.queues.items()):
            behind = max(store.get_max_offset_in_queue(self.pop.revive_topic, queue_id) - queue.commit_offset(), 0)
            due = [e.ck.revive_time for e in queue.pending.values()]
            latency = max(now - min(due), 0) if due else 0
            out[queue_id] = (behind, latency)
        return out
