"""TimerEnqueueService alone, over a fake timer store (EnqueueTimer): timer-queue entries become
timer-log units chained into their wheel slots, due messages are handed over instead, a slave
files no further than its master, and the queue offset and write time move only after a batch."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from orbitmq.broker.store.consume_queue import BLANK_ENTRY_SIZE
from orbitmq.broker.timer.enqueue import TimerEnqueueService
from orbitmq.broker.timer.wheel_math import MAGIC_DEFAULT, MAGIC_DELETE
from orbitmq.common.message import MessageConst

if TYPE_CHECKING:
    from conftest import TimerEnv  # the fixture's fakes (this folder's conftest.py)

START = 1_795_000_000_000


def test_future_messages_are_filed_into_their_slots(timer_env: TimerEnv) -> None:
    store, timer = timer_env.store, timer_env.timer
    first = store.put_timer_message(START + 5_000, b"a")
    second = store.put_timer_message(START + 5_000, b"b")
    third = store.put_timer_message(START + 60_000, b"c")
    batch = TimerEnqueueService(timer).scan(100)

    assert (batch.filed, batch.due, batch.next_offset, batch.write_time_ms) == (3, [], 3, START)
    assert timer.slot_units(START + 5_000) == [(*first, MAGIC_DEFAULT), (*second, MAGIC_DEFAULT)]
    assert timer.slot_units(START + 60_000) == [(*third, MAGIC_DEFAULT)]
    assert timer.wheel.get_slot(START + 5_000).num == 2
    assert timer.timing == {"Real": 3}
    assert timer.last_enqueue_store_ms == START
    assert timer.commit_queue_offset == 0  # the service's loop moves it, after the batch


def test_due_messages_are_handed_over_and_never_share_a_batch_with_filed_ones(timer_env: TimerEnv) -> None:
    store, timer = timer_env.store, timer_env.timer
    store.put_timer_message(START - 2_000, b"late")
    store.put_timer_message(START - 1_000, b"late too")
    store.put_timer_message(START + 9_000, b"later")
    service = TimerEnqueueService(timer)

    batch = service.scan(100)
    assert [d.msg.body for d in batch.due] == [b"late", b"late too"] and batch.filed == 0
    assert batch.next_offset == 2
    assert timer.wheel.get_slot(START - 2_000).empty

    timer.commit_queue_offset = batch.next_offset
    batch = service.scan(100)
    assert (batch.due, batch.filed, batch.next_offset) == ([], 1, 3)


def test_a_delete_marker_is_filed_with_its_magic_and_counts_down(timer_env: TimerEnv) -> None:
    store, timer = timer_env.store, timer_env.timer
    store.put_timer_message(START + 5_000, b"m", uniq_key="U1")
    marker = store.put_timer_message(START + 5_000, b"", uniq_key="U2",
                                     extra={MessageConst.TIMER_DEL_UNIQKEY: "Real+U1"})
    TimerEnqueueService(timer).scan(100)

    assert timer.slot_units(START + 5_000)[1] == (*marker, MAGIC_DEFAULT | MAGIC_DELETE)
    assert timer.wheel.get_slot(START + 5_000).num == 0  # +1 for the message, -1 for its marker
    assert timer.timing == {"Real": 0}


def test_a_slave_files_no_further_than_its_master_and_delivers_nothing(timer_env: TimerEnv) -> None:
    store, timer = timer_env.store, timer_env.timer
    store.put_timer_message(START - 1_000, b"due on the master")
    store.put_timer_message(START + 5_000, b"not yet filed by the master")
    timer.dequeue_active = False
    timer.master_queue_offset = 1

    batch = TimerEnqueueService(timer).scan(100)
    assert (batch.filed, batch.due, batch.next_offset) == (1, [], 1)
    assert timer.wheel.get_slot(START - 1_000).num == 1


def test_unusable_entries_are_skipped(timer_env: TimerEnv) -> None:
    store, timer = timer_env.store, timer_env.timer
    queue = store.timer_queue
    queue.entries.append((0, BLANK_ENTRY_SIZE, 0))  # a blank ConsumeQueue entry
    queue.entries.append((10**9, 100, 0))  # its record is gone from the CommitLog
    store.put_timer_message(START + 5_000, b"no time", extra={MessageConst.TIMER_OUT_MS: "soon"})
    kept = store.put_timer_message(START + 5_000, b"kept")

    batch = TimerEnqueueService(timer).scan(100)
    assert (batch.filed, batch.next_offset) == (1, 4)
    assert timer.slot_units(START + 5_000) == [(*kept, MAGIC_DEFAULT)]


async def _run_until(service: TimerEnqueueService, done: Callable[[], bool], tries: int = 500) -> bool:
    """Runs the service's loop until ``done()`` (checked every 10 ms); whether it got there."""
    task = asyncio.create_task(service.run())
    try:
        for _ in range(tries):
            if done():
                return True
            await asyncio.sleep(0.01)
        return done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_service_moves_the_queue_offset_and_write_time_after_each_batch(timer_env: TimerEnv) -> None:
    store, timer = timer_env.store, timer_env.timer
    store.put_timer_message(START - 1_000, b"due")
    store.put_timer_message(START + 5_000, b"later")
    timer.clock = START + 400
    service = TimerEnqueueService(timer)

    timer.dequeue_service.accept = False  # a due put not done (role change): read again, offset kept
    assert not await _run_until(service, lambda: timer.commit_queue_offset > 0, tries=5)
    assert timer.curr_write_time_ms == 0

    timer.dequeue_service.accept = True
    assert await _run_until(service, lambda: timer.commit_queue_offset == 2)
    assert [d.msg.body for d in timer.dequeue_service.due] == [b"due"]
    assert timer.curr_write_time_ms == START
    assert timer.wheel.get_slot(START + 5_000).num == 1
