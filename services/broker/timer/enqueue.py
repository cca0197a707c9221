"""TimerEnqueueService: rmq_sys_wheel_timer queue 0 -> timer log units and wheel slots.

Upstream's EnqueueGet and EnqueuePut threads in one task: a worker thread reads a batch of
ConsumeQueue entries and their records and files them under the lock; the task then advances
``commit_queue_offset`` and ``curr_write_time_ms``. A message already due when it is read (its
slot is before the batch's write time) is not filed: it is put to its real topic directly, as
upstream hands it to dequeuePut. A batch is either filed units or direct puts, never both, so
recovery (which resumes after the message of the last unit) never skips a direct put.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orbitmq.broker.store.consume_queue import is_blank_entry
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import RecordError, decode_record

from .wheel_math import MAGIC_DEFAULT, MAGIC_DELETE, TIMER_TOPIC

if TYPE_CHECKING:
    from .interfaces import EnqueueTimer

log = logging.getLogger(__name__)

BATCH_MAX = 2048
IDLE_WAIT_S = 0.1
# TIMER_ENQUEUE_MS of a message that skipped the wheel (Long.MAX_VALUE upstream).
ENQUEUE_SKIPPED = 2**63 - 1


@dataclass(slots=True)
class DueMessage:
    """A message read from the timer queue that is already due."""

    msg: MessageExt
    magic: int


@dataclass(slots=True)
class EnqueueBatch:
    next_offset: int
    write_time_ms: int
    filed: int = 0
    due: list[DueMessage] = field(default_factory=list)


class TimerEnqueueService:
    topic = TIMER_TOPIC

    def __init__(self, timer: EnqueueTimer) -> None:
        self.timer = timer

    async def run(self) -> None:
        timer = self.timer
        while True:
            try:
                if timer.config.timer_stop_enqueue:
                    await asyncio.sleep(IDLE_WAIT_S)
                    continue
                batch = await asyncio.to_thread(self.scan, BATCH_MAX)
                if batch.due and not await timer.dequeue_service.put_due(batch.due):
                    await asyncio.sleep(IDLE_WAIT_S)  # not delivered (role change): read them again
                    continue
                timer.commit_queue_offset = batch.next_offset
                if batch.write_time_ms > timer.curr_write_time_ms:
                    timer.curr_write_time_ms = batch.write_time_ms
                if not batch.filed and not batch.due:
                    await asyncio.sleep(self._idle_wait())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer enqueue failed")
                await asyncio.sleep(IDLE_WAIT_S)

    def _idle_wait(self) -> float:
        """Up to 100 ms, but wake at the next precision boundary so the due slot is released."""
        timer = self.timer
        now = timer.now_ms()
        to_boundary = timer.precision_ms - now % timer.precision_ms
        return max(min(IDLE_WAIT_S, to_boundary / 1000.0 + 0.001), 0.001)

    def scan(self, max_entries: int) -> EnqueueBatch:
        """Read and file up to ``max_entries`` ConsumeQueue entries (worker thread)."""
        timer = self.timer
        write_time = max(timer.floor_now(), timer.curr_write_time_ms)
        offset = timer.commit_queue_offset
        batch = EnqueueBatch(offset, write_time)
        cq = timer.store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return batch
        min_offset = cq.get_min_offset_in_queue()
        if offset < min_offset:
            log.warning("timer queue offset %d is below the queue's first entry %d; skipping ahead", offset, min_offset)
            offset = min_offset
        end = min(cq.get_max_offset_in_queue(), offset + max_entries)
        commit_log = timer.store.commit_log
        deliver_now = timer.dequeue_active
        if not deliver_now:
            end = min(end, timer.master_queue_offset)  # a slave: no further than its master
        while offset < end and timer.running:
            entry = cq.get_entry(offset)
            if entry is None:
                break
            phy_offset, size, _ = entry
            if is_blank_entry(phy_offset, size):
                offset += 1
                continue
            raw = commit_log.get_message(phy_offset, size)
            if raw is None:
                log.error("timer message at CommitLog offset %d is gone; skipped", phy_offset)
                offset += 1
                continue
            try:
                msg = decode_record(raw, 0, check_crc=False)
            except RecordError as exc:
                log.error("unreadable timer message at CommitLog offset %d skipped: %s", phy_offset, exc)
                offset += 1
                continue
            props = msg.properties
            try:
                delayed_ms = int(props[MessageConst.TIMER_OUT_MS])
            except (KeyError, ValueError):
                log.error("timer message %s has no valid TIMER_OUT_MS; skipped", msg.msg_id)
                offset += 1
                continue
            magic = MAGIC_DEFAULT | (MAGIC_DELETE if MessageConst.TIMER_DEL_UNIQKEY in props else 0)
            real_topic = props.get(MessageConst.REAL_TOPIC, "")
            if deliver_now and delayed_ms < write_time:
                if batch.filed:
                    break
                batch.due.append(DueMessage(msg, magic))
            else:
                if batch.due:
                    break
                with timer.lock:
                    timer.do_enqueue(phy_offset, size, delayed_ms, magic, real_topic, write_time)
                batch.filed += 1
                if not props.get(MessageConst.TIMER_ROLL_TIMES):
                    timer.count_timing(real_topic, -1 if magic & MAGIC_DELETE else 1)
                    metrics = timer.metrics
                    if metrics is not None:
                        metrics.on_timer_enqueue(real_topic)
                        metrics.on_delay_latency(max(delayed_ms - msg.born_timestamp, 0) / 1000.0)
            timer.last_enqueue_store_ms = msg.store_timestamp
            offset += 1
        batch.next_offset = offset
        return batch
