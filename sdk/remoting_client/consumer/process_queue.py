"""ProcessQueue: a pulled queue's messages between the pull and the consumption (ProcessQueue).

The messages wait in offset order (msgTreeMap) and are counted (msgCount, msgSize) so the pull
service can apply flow control; the committable offset is the first message still held, so an
offset never passes a message not yet consumed. Orderly consumption moves a batch to
``consuming`` first (consumingMsgOrderlyTreeMap) and commits or rolls it back as a whole.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterable

from orbitmq.common.message import MessageConst, MessageExt

# ProcessQueue's system-property knobs, upstream's defaults (milliseconds there, seconds here).
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0  # rocketmq.client.rebalance.lockMaxLiveTime
REBALANCE_LOCK_INTERVAL = 20.0  # rocketmq.client.rebalance.lockInterval
PULL_MAX_IDLE_TIME = 120.0  # rocketmq.client.pull.pullMaxIdleTime


def _now() -> float:
    return time.monotonic()


class ProcessQueue:
    def __init__(self, lock_max_live_time: float = REBALANCE_LOCK_MAX_LIVE_TIME,
                 pull_max_idle_time: float = PULL_MAX_IDLE_TIME) -> None:
        self._msgs: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted keys of _msgs
        self.consuming: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        self.consuming_now = False  # ProcessQueue#consuming: an orderly consume request is running
        self.msg_acc_cnt = 0
        self.try_unlock_times = 0
        self.last_pull_timestamp = _now()
        self.last_consume_timestamp = _now()
        self.last_lock_timestamp = _now()
        self.lock_max_live_time = lock_max_live_time
        self.pull_max_idle_time = pull_max_idle_time
        # consumeLock: held while an orderly batch runs, so a rebalance does not drop the queue mid-batch
        self.consume_lock = asyncio.Lock()

    def is_lock_expired(self) -> bool:
        return _now() - self.last_lock_timestamp > self.lock_max_live_time

    def is_pull_expired(self) -> bool:
        return _now() - self.last_pull_timestamp > self.pull_max_idle_time

    def put_message(self, msgs: Iterable[MessageExt]) -> bool:
        """Cache pulled messages; True when an orderly consumer should start a consume request."""
        added = 0
        for msg in msgs:
            off = msg.queue_offset
            if off in self._msgs:
                continue
            self._msgs[off] = msg
            if not self._offsets or off > self._offsets[-1]:
                self._offsets.append(off)
            else:
                bisect.insort(self._offsets, off)
            added += 1
            self.queue_offset_max = off
            self.msg_size += len(msg.body or b"")
        self.msg_count += added
        dispatch = False
        if self._msgs and not self.consuming_now:
            dispatch = True
            self.consuming_now = True
        if added:
            last = msg
            max_offset = last.properties.get(MessageConst.MAX_OFFSET)
            if max_offset is not None:
                try:
                    acc = int(max_offset) - last.queue_offset
                except ValueError:
                    acc = 0
                if acc > 0:
                    self.msg_acc_cnt = acc
        return dispatch

    def get_max_span(self) -> int:
        """Last cached offset minus the first (the concurrent consumer's span flow control)."""
        if not self._offsets:
            return 0
        return self._offsets[-1] - self._offsets[0]

    def remove_message(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; the offset to commit: the first one left, else max + 1; -1: none."""
        result = -1
        now = _now()
        self.last_consume_timestamp = now
        if not self._msgs:
            return result
        result = self.queue_offset_max + 1
        removed = 0
        for msg in msgs:
            prev = self._msgs.pop(msg.queue_offset, None)
            if prev is not None:
                i = bisect.bisect_left(self._offsets, msg.queue_offset)
                del self._offsets[i]
                removed += 1
                self.msg_size -= len(prev.body or b"")
        self.msg_count -= removed
        if self._offsets:
            result = self._offsets[0]
        return result

    @property
    def msg_tree_size(self) -> int:
        return len(self._msgs)

    def first_offset(self) -> int | None:
        return self._offsets[0] if self._offsets else None

    def messages(self) -> list[MessageExt]:
        return [self._msgs[o] for o in self._offsets]

    def has_temp_message(self) -> bool:
        return bool(self._msgs)

    def clear(self) -> None:
        self._msgs.clear()
        self._offsets.clear()
        self.consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    # ---- orderly ---------------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` first messages to the consuming map; none left ends the run."""
        now = _now()
        self.last_consume_timestamp = now
        result = []
        while self._offsets and len(result) < batch_size:
            off = self._offsets.pop(0)
            msg = self._msgs.pop(off)
            result.append(msg)
            self.consuming[off] = msg
        if not result:
            self.consuming_now = False
        return result

    def commit(self) -> int:
        """The orderly batch was consumed: the offset after it (-1 when nothing was consuming)."""
        if not self.consuming:
            return -1
        offset = max(self.consuming) + 1
        self.msg_count -= len(self.consuming)
        for msg in self.consuming.values():
            self.msg_size -= len(msg.body or b"")
        self.consuming.clear()
        return offset

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put a suspended orderly batch back in front of the queue."""
        for msg in msgs:
            self.consuming.pop(msg.queue_offset, None)
            if msg.queue_offset not in self._msgs:
                self._msgs[msg.queue_offset] = msg
                bisect.insort(self._offsets, msg.queue_offset)

    # ---- consumeTimeout clean-up ------------------------------------------------------------

    def expired_messages(self, consume_timeout_minutes: float, limit: int = 16) -> list[MessageExt]:
        """ProcessQueue#cleanExpiredMsg's choice: the first (up to 16) messages whose consumption
        began more than consumeTimeout minutes ago, oldest first, stopping at the first fresh one."""
        now_ms = time.time() * 1000
        out = []
        for off in self._offsets[:limit]:
            msg = self._msgs[off]
            started = msg.properties.get(MessageConst.CONSUME_START_TIMESTAMP)
            if not started or now_ms - int(started) <= consume_timeout_minutes * 60_000:
                break
            out.append(msg)
        return out
