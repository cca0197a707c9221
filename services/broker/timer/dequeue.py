"""TimerDequeueService: due slots -> messages back on their real topic (or rolled again).

Upstream's DequeueGet, DequeueGetMessage and DequeuePut threads in one task. While
``curr_read_time_ms < curr_write_time_ms`` a worker thread skips empty slots and walks the
first non-empty one (its chain runs backwards from lastPos, so it is reversed to FIFO order) and
reads the messages; the task then puts them and only after that moves the read time past the
slot, so a crash re-delivers the slot rather than losing it (at-least-once, as upstream).

In a slot, delete markers (TIMER_DEL_UNIQKEY, not rolled) suppress the messages they name
(``REAL_TOPIC + "+" + UNIQ_KEY``) and are never delivered themselves. A rolled unit is re-put to
the timer topic with TIMER_ROLL_TIMES + 1 and filed again at its real time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import RecordError, decode_record

from .timer_log import TimerUnit
from .wheel_math import TIMER_TOPIC, need_delete, need_roll

if TYPE_CHECKING:
    from .enqueue import DueMessage
    from .interfaces import DequeueTimer

log = logging.getLogger(__name__)

IDLE_WAIT_S = 0.1
EMPTY_SLOTS_PER_SCAN = 100_000
MAX_CHAIN = 50_000_000
PUT_RETRY_WAIT_S = 0.5
PUT_TRIES = 3
YIELD_EVERY = 64
# Refusals a retry cannot fix: the message is skipped (upstream's illegal/size errors).
_PERMANENT = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                        PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, PutMessageStatus.WHEEL_TIMER_NOT_ENABLE})


class TimerDequeueService:
    def __init__(self, timer: DequeueTimer) -> None:
        self.timer = timer

    async def run(self) -> None:
        timer = self.timer
        hold = timer.config.disappear_time_after_start
        if hold > 0:
            await asyncio.sleep(hold / 1000.0)
        while True:
            try:
                if not timer.dequeue_active or timer.config.timer_stop_dequeue:
                    await asyncio.sleep(IDLE_WAIT_S)
                    continue
                if timer.curr_read_time_ms >= timer.curr_write_time_ms:
                    await asyncio.sleep(IDLE_WAIT_S / 10)
                    continue
                found = await asyncio.to_thread(self.next_slot)
                if found is None:
                    continue
                slot_ms, items = found
                if await self.deliver_slot(items):
                    if timer.curr_read_time_ms == slot_ms:
                        timer.curr_read_time_ms = slot_ms + timer.precision_ms
                else:
                    await asyncio.sleep(IDLE_WAIT_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer dequeue failed")
                await asyncio.sleep(IDLE_WAIT_S)

    # ---- reading (worker thread) --------------------------------------------------------------

    def next_slot(self) -> tuple[int, list[tuple[TimerUnit, MessageExt | None]]] | None:
        """Skip empty slots; the first due non-empty slot with its units and messages, or None."""
        timer = self.timer
        precision = timer.precision_ms
        with timer.lock:
            if not timer.running:
                return None
            wheel = timer.wheel
            t = timer.curr_read_time_ms
            limit = timer.curr_write_time_ms
            scanned = 0
            slot = None
            while t < limit:
                slot = wheel.get_slot(t)
                if not slot.empty:
                    break
                t += precision
                scanned += 1
                if scanned >= EMPTY_SLOTS_PER_SCAN:
                    break
            timer.curr_read_time_ms = t
            if slot is None or t >= limit or slot.empty:
                return None
            units = self._walk(slot.last_pos, t)
        commit_log = timer.store.commit_log
        items: list[tuple[TimerUnit, MessageExt | None]] = []
        for unit in units:
            raw = commit_log.get_message(unit.offset_py, unit.size_py)
            msg = None
            if raw is not None:
                try:
                    msg = decode_record(raw, 0, check_crc=False)
                except RecordError as exc:
                    log.error("unreadable timer message at CommitLog offset %d: %s", unit.offset_py, exc)
            else:
                log.error("timer message at CommitLog offset %d is gone", unit.offset_py)
            items.append((unit, msg))
        return t, items

    def _walk(self, last_pos: int, slot_ms: int) -> list[TimerUnit]:
        timer_log = self.timer.timer_log
        units: list[TimerUnit] = []
        pos = last_pos
        while pos >= 0 and len(units) < MAX_CHAIN:
            unit = timer_log.read_unit(pos)
            if unit is None or unit.delayed_time_ms != slot_ms:
                if pos >= timer_log.min_offset():
                    log.error("timer slot %d: broken chain at timerlog position %d", slot_ms, pos)
                break
            units.append(unit)
            pos = unit.prev_pos
        units.reverse()
        return units

    # ---- delivering (event loop) ---------------------------------------------------------------

    async def deliver_slot(self, items: list[tuple[TimerUnit, MessageExt | None]]) -> bool:
        """Put every message of one slot; False when the slot must be read again later."""
        deleted: set[str] = set()
        for unit, msg in items:
            if msg is not None and need_delete(unit.magic) and not need_roll(unit.magic):
                key = msg.properties.get(MessageConst.TIMER_DEL_UNIQKEY)
                if key:
                    deleted.add(key)
        for index, (unit, msg) in enumerate(items):
            if msg is None:
                continue
            if index % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)  # puts may not suspend (ASYNC_FLUSH): let requests in
            roll = need_roll(unit.magic)
            if not roll:
                if need_delete(unit.magic):
                    continue  # a delete marker is never delivered
                props = msg.properties
                key = f"{props.get(MessageConst.REAL_TOPIC, '')}+{props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, '')}"
                if key in deleted:
                    log.info("timer message %s cancelled by a delete marker", key)
                    continue
            inner = self.convert(msg, unit.curr_write_time_ms, roll)
            if inner is None:
                continue
            if not await self.put(inner):
                return False
            if not roll:
                self.timer.count_timing(inner.topic, -1)
        return True

    async def put_due(self, due: list[DueMessage]) -> bool:
        """Messages that were due when read from the timer queue, put without the wheel."""
        from .enqueue import ENQUEUE_SKIPPED

        for index, item in enumerate(due):
            if index % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if need_delete(item.magic):
                continue
            inner = self.convert(item.msg, ENQUEUE_SKIPPED, False)
            if inner is not None and not await self.put(inner):
                return False
        return True

    def convert(self, msg: MessageExt, enqueue_ms: int, roll: bool) -> MessageExtBrokerInner | None:
        """The message as it is put again: on its real topic, or back on the timer topic to roll."""
        timer = self.timer
        props = dict(msg.properties)
        props[MessageConst.TIMER_ENQUEUE_MS] = str(enqueue_ms)
        props[MessageConst.TIMER_DEQUEUE_MS] = str(timer.now_ms())
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        if roll:
            try:
                times = int(props.get(MessageConst.TIMER_ROLL_TIMES) or 0)
            except ValueError:
                times = 0
            props[MessageConst.TIMER_ROLL_TIMES] = str(times + 1)
            topic, queue_id = TIMER_TOPIC, 0
        else:
            topic = props.pop(MessageConst.REAL_TOPIC, "")
            try:
                queue_id = int(props.pop(MessageConst.REAL_QUEUE_ID, ""))
            except ValueError:
                queue_id = -1
            if not topic or queue_id < 0:
                log.error("timer message %s has no REAL_TOPIC/REAL_QID; dropped", msg.msg_id)
                return None
        return timer.broker.new_inner_message(
            topic=topic, queue_id=queue_id, body=msg.body, flag=msg.flag, properties=props,
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            reconsume_times=msg.reconsume_times, copy_properties=False)

    async def put(self, inner: MessageExtBrokerInner) -> bool:
        """doPut with upstream's retries; False only when delivery stopped (no longer master)."""
        timer = self.timer
        tries = 0
        while True:
            tries += 1
            result: Any = None
            try:
                result = await timer.broker.escape_bridge.put_message(inner)  # elsewhere while acting master
            except Exception:
                log.exception("timer message put to %s failed", inner.topic)
            if result is not None and result.is_ok():
                if inner.topic != TIMER_TOPIC:
                    metrics = timer.metrics
                    if metrics is not None:
                        metrics.on_timer_dequeue(inner.topic)
                return True
            status = getattr(result, "status", None)
            if status in _PERMANENT:
                log.error("timer message to %s refused by the store (%s); skipped", inner.topic, status)
                return True
            if not timer.dequeue_active:
                return False
            if tries >= PUT_TRIES and not timer.config.timer_enable_retry_until_success:
                log.error("timer message to %s not put after %d tries (%s); dropped, as upstream without "
                          "timerEnableRetryUntilSuccess", inner.topic, tries, status)
                return True
            await asyncio.sleep(PUT_RETRY_WAIT_S)
