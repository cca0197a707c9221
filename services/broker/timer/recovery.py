"""Recovery of the timer store at start (upstream TimerMessageStore.recover).

1. Re-scan the timer log from one file before the checkpoint's flush position to its real end
   (the files are mapped, so everything written before a crash of the process is there), re-link
   each unit into its slot, and cut the log after the last valid unit.
2. The queue offset resumes after the message of the last unit, or at the checkpoint's offset if
   that is further, clamped to the ConsumeQueue; entries re-read after it are filed again, so a
   crash gives duplicates, never a loss.
3. The read time resumes at the checkpoint's (slots from there are delivered again), but no
   earlier than the wheel reaches back (7 days less 60 slots); a first start begins now.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orbitmq.common.message_codec import RecordError, decode_record

from .wheel_math import MAGIC_DELETE, SLOTS_TOTAL, TIMER_BLANK_SLOTS, TIMER_TOPIC

if TYPE_CHECKING:
    from .interfaces import RecoveryTimer

log = logging.getLogger(__name__)


def recover(timer: RecoveryTimer) -> None:
    """Bring the wheel, log and positions of ``timer`` back in step (worker thread, before start)."""
    cp = timer.checkpoint.data
    timer_log = timer.timer_log
    timer_log.load()
    precision = timer.precision_ms
    now_floor = timer.floor_now()
    fresh = not timer.checkpoint.existed and not timer_log.queue.mapped_files
    if fresh or cp.last_read_time_ms <= 0:
        read_time = now_floor
    else:
        read_time = max(cp.last_read_time_ms, now_floor - SLOTS_TOTAL * precision + TIMER_BLANK_SLOTS * precision)
    # 1. the log from one file before the flushed position
    file_size = timer_log.file_size
    start = max(cp.last_timer_log_flush_pos - file_size, timer_log.min_offset())
    start -= start % file_size
    units, end = timer_log.scan(start)
    timer_log.set_end(end)
    wheel = timer.wheel
    relinked = 0
    for unit in units:
        if unit.delayed_time_ms < read_time:
            continue  # its slot was delivered: leave the wheel's newer use of that index alone
        slot = wheel.get_slot(unit.delayed_time_ms)
        if slot.empty or slot.last_pos < unit.pos:
            wheel.revise_last(unit.delayed_time_ms, unit.pos, -1 if unit.magic & MAGIC_DELETE else 1)
            relinked += 1
    # 2. the queue offset
    queue_offset = cp.last_timer_queue_offset
    if units:
        last = units[-1]
        raw = timer.store.commit_log.get_message(last.offset_py, last.size_py)
        if raw is not None:
            try:
                msg = decode_record(raw, 0, check_crc=False)
                if msg.topic == TIMER_TOPIC:
                    queue_offset = max(queue_offset, msg.queue_offset + 1)
            except RecordError as exc:
                log.warning("timer recovery: the last unit's message is unreadable: %s", exc)
    cq = timer.store.get_consume_queue(TIMER_TOPIC, 0)
    if cq is not None:
        queue_offset = min(max(queue_offset, cq.get_min_offset_in_queue()), cq.get_max_offset_in_queue())
    else:
        queue_offset = 0
    timer.commit_queue_offset = queue_offset
    timer.curr_read_time_ms = read_time
    # Nothing is read before the enqueue service has filed what it finds from here on.
    timer.curr_write_time_ms = read_time
    log.info("timer store recovered: log end %d (%d units re-scanned, %d re-linked), queue offset %d, "
             "read time %d", end, len(units), relinked, queue_offset, read_time)
