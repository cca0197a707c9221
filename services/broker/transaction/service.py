"""Which half messages are still open, and their resolution (commit / rollback) with an op.

Upstream decides "finished" per half-queue offset from the op queue alone, so a commit that
races a check copy, or a second commit, stores the message twice. OrbitMQ keeps, per
transaction id, the half-queue offsets that are still open (a send, its check copies, a resend
by the client): END_TRANSACTION resolves the transaction once and writes one op naming all of
them, and a commit or rollback of a transaction that is no longer open changes nothing.

The index is rebuilt from disk (op queue, then half queue from the CID_RMQ_SYS_TRANS offsets)
when the broker becomes master, so it survives restarts and crashes. Ops are written at once
(the 5.1+ batched body form, one op per resolution) rather than buffered for 3 s: a crash
then never forgets a resolution.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner
from orbitmq.common.constants import CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import RecordError, decode_record

from . import bridge
from .op_codec import REMOVE_TAG, decode_op_body

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

HALF_QUEUE_ID = bridge.HALF_QUEUE_ID
_READ_BATCH = 32
_READ_BYTES = 64 * 1024 * 1024
_FOUND = GetMessageStatus.FOUND


@dataclass(slots=True)
class StoredHalf:
    """A record read from the half (or op) queue."""

    queue_offset: int
    message: MessageExt


class TransactionalMessageService:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Serialises resolutions and the check scan's copies, so a copy is never made of a
        # transaction that is being resolved (which would reopen it).
        self.lock = asyncio.Lock()
        self._loaded = False
        self._open: dict[int, str] = {}  # open half-queue offset -> transaction id
        self._by_transaction: dict[str, set[int]] = {}
        self._topic_of: dict[str, str] = {}  # open transaction id -> real topic (half-message gauge)
        self._done: set[int] = set()  # half-queue offsets >= the half consume offset with an op
        self._op_max: dict[int, int] = {}  # op-queue offset -> largest half offset it names
        self._loaded_to = 0  # half-queue offsets below this were read into the index

    # ---- offsets -------------------------------------------------------------------------

    def consume_offset(self, topic: str) -> int:
        """CID_RMQ_SYS_TRANS's offset in a half/op queue, else the queue's min offset."""
        offset = self.broker.consumer_offset_manager.query_offset(CID_SYS_RMQ_TRANS, topic, HALF_QUEUE_ID)
        if offset < 0:
            offset = self.broker.message_store.get_min_offset_in_queue(topic, HALF_QUEUE_ID)
        return max(offset, 0)

    def commit_offset(self, topic: str, offset: int) -> None:
        self.broker.consumer_offset_manager.commit_offset(CID_SYS_RMQ_TRANS, topic, HALF_QUEUE_ID, offset)

    # ---- reading -------------------------------------------------------------------------

    def read(self, topic: str, offset: int, count: int = _READ_BATCH) -> tuple[list[StoredHalf], int]:
        """Up to ``count`` records of a half/op queue from ``offset`` and the next offset to read."""
        store = self.broker.message_store
        result = store.get_message(CID_SYS_RMQ_TRANS, topic, HALF_QUEUE_ID, offset, count, _READ_BYTES, None)
        if result.status is not _FOUND:
            return [], max(result.next_begin_offset, offset)
        out = []
        for record, queue_offset in zip(result.message_buffer_list, result.message_queue_offset, strict=False):
            try:
                out.append(StoredHalf(queue_offset, decode_record(bytes(record), 0, check_crc=False)))
            except RecordError:
                log.warning("unreadable record at %s offset %d", topic, queue_offset)
        return out, result.next_begin_offset

    def half_at(self, commit_log_offset: int) -> MessageExt | None:
        """The record at a CommitLog offset; None when there is none (the offset comes from a
        client, so it may point anywhere: past the end, between records, at a blank)."""
        try:
            record = self.broker.message_store.select_one_message_by_offset(commit_log_offset)
        except (IndexError, ValueError, OSError, RecordError) as exc:
            log.debug("no record at CommitLog offset %d: %s", commit_log_offset, exc)
            return None
        if not record:
            return None
        try:
            return decode_record(bytes(record), 0, check_crc=False)
        except RecordError:
            return None

    # ---- the open index ------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the index: it is rebuilt from disk, under ``lock``, on next use (a new master)."""
        self._loaded = False

    def _clear(self) -> None:
        self._open.clear()
        self._by_transaction.clear()
        self._topic_of.clear()
        self._done.clear()
        self._op_max.clear()

    async def ensure_loaded(self) -> None:
        """Rebuild the index from the op and half queues once (caller holds ``lock``)."""
        if self._loaded:
            await self.catch_up()
            return
        self._clear()
        half_from = self.consume_offset(RMQ_SYS_TRANS_HALF_TOPIC)
        op_offset = self.consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC)
        while True:
            ops, next_offset = self.read(RMQ_SYS_TRANS_OP_HALF_TOPIC, op_offset)
            for op in ops:
                self._note_op(op, half_from)
            if not ops or next_offset <= op_offset:
                break
            op_offset = next_offset
            await asyncio.sleep(0)  # a long op queue must not hold up the loop
        self._loaded_to = half_from
        self._loaded = True
        await self.catch_up()
        log.info("transaction index loaded: %d open half message(s) from half offset %d",
                 len(self._open), half_from)

    def _note_op(self, op: StoredHalf, half_from: int) -> None:
        if op.message.properties.get(MessageConst.TAGS) != REMOVE_TAG:
            return
        offsets = decode_op_body(op.message.body)
        self._op_max[op.queue_offset] = max(offsets, default=-1)
        for offset in offsets:
            if offset >= half_from:
                self._done.add(offset)

    async def catch_up(self) -> None:
        """Index the half messages stored since the last look."""
        while True:
            halves, next_offset = self.read(RMQ_SYS_TRANS_HALF_TOPIC, self._loaded_to, 256)
            for half in halves:
                self.register(half.queue_offset, bridge.transaction_id_of(half.message),
                              bridge.real_topic_of(half.message))
            if not halves or next_offset <= self._loaded_to:
                return
            self._loaded_to = next_offset
            await asyncio.sleep(0)

    def register(self, half_offset: int, transaction_id: str, topic: str) -> None:
        """A half record at ``half_offset`` is open unless an op already finished it."""
        if half_offset in self._done or half_offset in self._open:
            return
        if half_offset < self.consume_offset(RMQ_SYS_TRANS_HALF_TOPIC) and half_offset < self._loaded_to:
            return
        self._open[half_offset] = transaction_id
        self._by_transaction.setdefault(transaction_id, set()).add(half_offset)
        self._topic_of[transaction_id] = topic

    def half_messages(self) -> dict[str, int]:
        """Open transactions per real topic (the ``rocketmq_half_messages`` gauge)."""
        counts: dict[str, int] = {}
        if not self._loaded:
            return counts
        for transaction_id in self._by_transaction:
            topic = self._topic_of.get(transaction_id, "")
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    def note_read(self, half: StoredHalf) -> None:
        """Index a half record read past the last catch-up (stored while the scan ran)."""
        if half.queue_offset >= self._loaded_to:
            self.register(half.queue_offset, bridge.transaction_id_of(half.message), bridge.real_topic_of(half.message))

    def is_open(self, transaction_id: str) -> bool:
        return bool(self._by_transaction.get(transaction_id))

    def is_open_offset(self, half_offset: int) -> bool:
        return half_offset in self._open

    def open_count(self) -> int:
        return len(self._open)

    def close_offset(self, half_offset: int) -> None:
        """A half record leaves the index without an op (checked and copied, or discarded)."""
        transaction_id = self._open.pop(half_offset, None)
        if transaction_id is None:
            return
        offsets = self._by_transaction.get(transaction_id)
        if offsets is not None:
            offsets.discard(half_offset)
            if not offsets:
                del self._by_transaction[transaction_id]
                self._topic_of.pop(transaction_id, None)

    def _take(self, transaction_id: str) -> list[int]:
        offsets = sorted(self._by_transaction.pop(transaction_id, ()))
        self._topic_of.pop(transaction_id, None)
        for offset in offsets:
            self._open.pop(offset, None)
            self._done.add(offset)
        return offsets

    def _reopen(self, transaction_id: str, offsets: list[int], topic: str) -> None:
        for offset in offsets:
            self._done.discard(offset)
            self._open[offset] = transaction_id
        if offsets:
            self._by_transaction.setdefault(transaction_id, set()).update(offsets)
            self._topic_of[transaction_id] = topic

    def prune(self, half_consume_offset: int, op_consume_offset: int) -> int:
        """Drop what lies below the committed half offset; the op offset that may be committed."""
        self._done = {o for o in self._done if o >= half_consume_offset}
        while op_consume_offset in self._op_max and self._op_max[op_consume_offset] < half_consume_offset:
            del self._op_max[op_consume_offset]
            op_consume_offset += 1
        return op_consume_offset

    # ---- resolution ----------------------------------------------------------------------

    async def resolve(self, half: MessageExt, half_offset: int,
                      commit: MessageExtBrokerInner | None) -> tuple[bool, object | None]:
        """Finish the transaction of ``half`` (caller holds ``lock``): store ``commit`` (None for a
        rollback) and one op naming every open record of it. (False, None) when the transaction
        is not open; (True, put result) otherwise, the result None for a rollback."""
        transaction_id = bridge.transaction_id_of(half)
        topic = bridge.real_topic_of(half)
        if half_offset >= self._loaded_to:
            self.register(half_offset, transaction_id, topic)  # sent but not yet indexed
        if not self.is_open(transaction_id):
            return False, None
        offsets = self._take(transaction_id)
        result = None
        if commit is not None:
            result = await self.broker.put_message(commit)
            if not result.is_ok():
                self._reopen(transaction_id, offsets, topic)
                return True, result
        named = offsets if half_offset in offsets else sorted({*offsets, half_offset})
        await self.write_op(named)
        return True, result

    async def write_op(self, half_offsets: list[int]) -> None:
        op = bridge.op_message(self.broker, half_offsets)
        result = await self.broker.put_message(op)
        if not result.is_ok():
            log.error("writing the op of half offsets %s failed: %s (they will be checked again)",
                      half_offsets, result.status)
            return
        appended = result.append_message_result
        self._op_max[appended.logics_offset] = max(half_offsets)
