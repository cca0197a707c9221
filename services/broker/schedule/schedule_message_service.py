"""ScheduleMessageService: delivers SCHEDULE_TOPIC_XXXX messages to their real topic when due.

One asyncio task per delay level walks that level's ConsumeQueue from its saved offset. Every
entry's tag code is its delivery time; since a level has one fixed delay, its queue is in
delivery order, so the task either delivers the head entry or sleeps exactly until it is due.
ConsumeQueue and CommitLog reads happen on a worker thread; puts go through the store on the
event loop. Progress (config/delayOffset.json) is persisted every flushDelayOffsetInterval and
on shutdown, so delivery resumes where it stopped after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orbitmq.broker.store.config import SLAVE
from orbitmq.broker.store.consume_queue import is_blank_entry
from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.common.aio import cancel_and_wait, periodic
from orbitmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import RecordError, decode_record

from .delay_levels import DelayLevelTable, delay_level_to_queue_id
from .delay_offset import DelayOffsetManager
from .redirect import DelayRedirect

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

FIRST_DELAY_TIME = 1.0  # seconds before each level's first scan
DELAY_FOR_A_WHILE = 0.1  # re-scan after a pass that found nothing due / no queue yet
DELAY_FOR_A_PERIOD = 10.0  # retry after a failed re-put
SCAN_BATCH = 32


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Due:
    """A due entry read from the ConsumeQueue: its index and the record (None if gone)."""

    index: int
    record: bytes | None


class ScheduleMessageService:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        store_config = broker.store_config
        self.levels = DelayLevelTable(store_config.message_delay_level)
        self.flush_interval_ms = store_config.flush_delay_offset_interval
        self.offsets = DelayOffsetManager(store_config.config_dir)
        self.redirect = DelayRedirect(self.levels, _now_ms)
        self._store: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    @property
    def max_delay_level(self) -> int:
        return self.levels.max_level

    # ---- lifecycle --------------------------------------------------------------------------

    def attach(self, store: Any) -> None:
        """Install the put-path redirect and the delivery-time tag code on a started store."""
        self._store = store
        store.add_put_message_hook(self.redirect)
        store.set_delivery_time_function(self.levels.compute_deliver_timestamp)

    async def start(self, store: Any) -> None:
        self.attach(store)
        if not await asyncio.to_thread(self.offsets.load):
            raise RuntimeError(f"cannot load {self.offsets.path}")
        if self.broker.store_config.broker_role == SLAVE:
            return  # only a master delivers; a slave just replicates the schedule queues
        self.start_delivery()

    def start_delivery(self) -> None:
        """Deliver from the offsets in memory (a promoted slave's were copied from its master)."""
        if self._started or self._store is None:
            return
        self._started = True
        self._tasks = [asyncio.create_task(self._deliver_loop(level), name=f"ScheduleMessageTimerTask-{level}")
                       for level in self.levels.levels()]
        self._tasks.append(asyncio.create_task(
            periodic(max(self.flush_interval_ms, 100) / 1000.0, self.offsets.persist_async,
                     what="persist delayOffset.json"),
            name="ScheduleMessageService-persist"))

    async def stop_delivery(self) -> None:
        """A master turned slave stops delivering (its store refuses puts) and saves progress."""
        if not self._started:
            return
        self._started = False
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        await self.offsets.persist_async()

    async def shutdown(self) -> None:
        self._started = False
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        if self._store is not None:
            await self.offsets.persist_async()

    # ---- delivery -----------------------------------------------------------------------------

    async def _deliver_loop(self, level: int) -> None:
        await asyncio.sleep(FIRST_DELAY_TIME)
        while True:
            try:
                wait = await self.execute_on_time_up(level)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ScheduleMessageService, executeOnTimeUp of level %d failed", level)
                wait = DELAY_FOR_A_WHILE
            await asyncio.sleep(wait)

    async def execute_on_time_up(self, level: int) -> float:
        """Deliver what is due on this level; returns how long to wait before the next scan."""
        cq = self._store.get_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, delay_level_to_queue_id(level))
        if cq is None:
            return DELAY_FOR_A_WHILE
        offset = self.offsets.get(level)
        if offset >= cq.get_max_offset_in_queue():
            return DELAY_FOR_A_WHILE  # the common, idle case stays on the loop: no thread hop
        min_offset = cq.get_min_offset_in_queue()
        if offset < min_offset:
            log.error("schedule CQ offset invalid. offset=%d, cqMinOffset=%d, queueId=%d",
                      offset, min_offset, delay_level_to_queue_id(level))
            offset = min_offset
            self.offsets.update(level, offset)
        while self._started:
            due, next_offset, countdown_ms = await asyncio.to_thread(self._read_due, cq, level, offset)
            for item in due:
                if item.record is not None and not await self._deliver(level, item.record):
                    self.offsets.update(level, item.index)
                    return DELAY_FOR_A_PERIOD
                self.offsets.update(level, item.index + 1)
            offset = next_offset
            self.offsets.update(level, offset)
            if countdown_ms is not None:
                return max(countdown_ms, 1) / 1000.0
            if not due:
                return DELAY_FOR_A_WHILE
        return DELAY_FOR_A_WHILE

    def _read_due(self, cq: Any, level: int, offset: int) -> tuple[list[_Due], int, int | None]:
        """(due entries, offset after them, ms until the first entry not yet due or None)."""
        commit_log = self._store.commit_log
        due: list[_Due] = []
        now = _now_ms()
        max_offset = cq.get_max_offset_in_queue()
        index = offset
        while index < max_offset and len(due) < SCAN_BATCH:
            entry = cq.get_entry(index)
            if entry is None:
                break
            phy_offset, size, tags_code = entry
            if is_blank_entry(phy_offset, size):
                index += 1
                continue
            deliver = self._deliver_timestamp(level, phy_offset, size, tags_code, now)
            countdown = deliver - now
            if countdown > 0:
                return due, index, countdown
            due.append(_Due(index, commit_log.get_message(phy_offset, size)))
            index += 1
        return due, index, None

    def _deliver_timestamp(self, level: int, phy_offset: int, size: int, tags_code: int, now: int) -> int:
        """The entry's tag code, checked against the record's store time: an entry dispatched
        before the delivery-time function was installed (recovery) carries a tag hash instead,
        and upstream recomputes from the store timestamp in that case too."""
        delay = self.levels.delay_of(level)
        store_ts = self._store.commit_log.pickup_store_timestamp(phy_offset, size)
        deliver = tags_code if store_ts < 0 else store_ts + delay
        # correctDeliverTimestamp: never wait longer than one full delay from now.
        return min(deliver, now + delay)

    async def _deliver(self, level: int, record: bytes) -> bool:
        try:
            msg = decode_record(record, 0, check_crc=False)
        except RecordError as exc:
            log.error("skipping an unreadable SCHEDULE_TOPIC_XXXX record of level %d: %s", level, exc)
            return True
        inner = self.message_time_up(msg)
        if inner is None:
            return True
        try:
            result = await self.broker.escape_bridge.put_message(inner)  # elsewhere while acting master
        except Exception:
            log.exception("a message time up, but reput it failed, topic: %s", inner.topic)
            return False
        if result is not None and result.is_ok():
            return True
        log.error("a message time up, but reput it failed, topic: %s msgId %s status %s", inner.topic,
                  msg.msg_id, getattr(result, "status", None))
        return False

    def message_time_up(self, msg: Any) -> MessageExtBrokerInner | None:
        """The message as it goes back to its real topic/queue: DELAY removed, all else kept."""
        props = dict(msg.properties)
        real_topic = props.get(MessageConst.REAL_TOPIC)
        try:
            real_queue = int(props.get(MessageConst.REAL_QUEUE_ID, ""))
        except ValueError:
            real_queue = -1
        if not real_topic or real_queue < 0:
            log.error("SCHEDULE_TOPIC_XXXX message %s has no REAL_TOPIC/REAL_QID; dropped", msg.msg_id)
            return None
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        inner = self.broker.new_inner_message(
            topic=real_topic, queue_id=real_queue, body=msg.body, flag=msg.flag, properties=props,
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            reconsume_times=msg.reconsume_times)
        return inner
