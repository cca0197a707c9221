"""TimerDequeueService alone, over a fake timer store (DequeueTimer): the first due slot is read in
FIFO order, its messages are put back on their real topic (or rolled to the timer topic), delete
markers cancel what they name, and the read time passes a slot only once its puts are done."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from orbitmq.broker.store.model import PutMessageStatus
from orbitmq.broker.timer.dequeue import TimerDequeueService
from orbitmq.broker.timer.wheel_math import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, TIMER_TOPIC
from orbitmq.common.message import MessageConst, MessageExt

if TYPE_CHECKING:
    from conftest import FakeTimer, TimerEnv  # the fixture's fakes (this folder's conftest.py)

    from orbitmq.broker.timer.timer_log import TimerUnit

START = 1_795_000_000_000  # the fakes' clock at the start (conftest.START)
SLOT = START + 3_000


def _due(timer: FakeTimer) -> None:
    timer.curr_read_time_ms = START
    timer.curr_write_time_ms = START + 10_000
    timer.clock = START + 10_000


def _first_slot(env: TimerEnv) -> tuple[TimerDequeueService, list[tuple[TimerUnit, MessageExt | None]]]:
    """Ten seconds on: a dequeue service and the units and messages of the first due slot."""
    _due(env.timer)
    service = TimerDequeueService(env.timer)
    found = service.next_slot()
    assert found is not None
    return service, found[1]


def test_the_first_due_slot_is_read_oldest_first(timer_env: TimerEnv) -> None:
    for body in (b"1", b"2", b"3"):
        timer_env.file(SLOT, body)
    timer_env.file(SLOT + 2_000, b"later")
    timer = timer_env.timer
    _due(timer)

    found = TimerDequeueService(timer).next_slot()
    assert found is not None
    slot_ms, items = found
    assert slot_ms == SLOT and timer.curr_read_time_ms == SLOT  # the empty slots before it skipped
    assert [msg.body for _, msg in items] == [b"1", b"2", b"3"]
    assert [unit.curr_write_time_ms for unit, _ in items] == [START] * 3


def test_nothing_is_read_at_or_past_the_write_time(timer_env: TimerEnv) -> None:
    timer_env.file(SLOT, b"m")
    timer = timer_env.timer
    timer.curr_read_time_ms = START
    timer.curr_write_time_ms = SLOT  # the enqueue step has not released the slot yet
    assert TimerDequeueService(timer).next_slot() is None
    assert timer.curr_read_time_ms == SLOT


async def test_a_slot_is_put_on_the_real_topic_less_what_its_delete_markers_cancel(timer_env: TimerEnv) -> None:
    timer_env.file(SLOT, b"kept", uniq_key="U1")
    timer_env.file(SLOT, b"cancelled", uniq_key="U2")
    timer_env.file(SLOT, b"", uniq_key="U3", magic=MAGIC_DEFAULT | MAGIC_DELETE,
          extra={MessageConst.TIMER_DEL_UNIQKEY: "Real+U2"})
    timer = timer_env.timer
    service, items = _first_slot(timer_env)

    assert await service.deliver_slot(items)
    [put] = timer.broker.puts
    assert (put.topic, put.queue_id, put.body) == ("Real", 3, b"kept")
    assert MessageConst.REAL_TOPIC not in put.properties and MessageConst.REAL_QUEUE_ID not in put.properties
    assert put.properties[MessageConst.TIMER_ENQUEUE_MS] == str(START)
    assert put.properties[MessageConst.TIMER_DEQUEUE_MS] == str(START + 10_000)
    assert put.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "U1"
    assert timer.timing == {"Real": -1}


async def test_a_rolled_unit_goes_back_to_the_timer_topic_counted_once_more(timer_env: TimerEnv) -> None:
    timer_env.file(SLOT, b"far", magic=MAGIC_DEFAULT | MAGIC_ROLL, extra={MessageConst.TIMER_ROLL_TIMES: "2"})
    timer = timer_env.timer
    service, items = _first_slot(timer_env)

    assert await service.deliver_slot(items)
    [put] = timer.broker.puts
    assert (put.topic, put.queue_id, put.body) == (TIMER_TOPIC, 0, b"far")
    assert put.properties[MessageConst.TIMER_ROLL_TIMES] == "3"
    assert put.properties[MessageConst.REAL_TOPIC] == "Real"  # kept for the real delivery
    assert timer.timing == {}  # still waiting in the wheel


async def test_a_put_refused_for_good_is_skipped_and_a_lost_role_stops_the_slot(timer_env: TimerEnv) -> None:
    timer_env.file(SLOT, b"m")
    timer = timer_env.timer
    service, items = _first_slot(timer_env)

    timer.broker.status = PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    assert await service.deliver_slot(items)  # skipped: a retry cannot fix it
    timer.broker.status = PutMessageStatus.SERVICE_NOT_AVAILABLE
    timer.dequeue_active = False
    assert not await service.deliver_slot(items)  # no longer master: the slot is read again later
    assert timer.broker.puts == []


async def test_the_read_time_passes_a_slot_only_after_its_puts(timer_env: TimerEnv) -> None:
    timer_env.file(SLOT, b"m")
    timer = timer_env.timer
    _due(timer)
    timer.broker.gate = asyncio.Event()
    task = asyncio.create_task(TimerDequeueService(timer).run())
    try:
        for _ in range(200):
            if timer.curr_read_time_ms == SLOT:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert timer.curr_read_time_ms == SLOT  # the put is in flight: a crash now reads the slot again
        timer.broker.gate.set()
        for _ in range(200):
            if timer.curr_read_time_ms >= timer.curr_write_time_ms:
                break
            await asyncio.sleep(0.01)
        assert [p.body for p in timer.broker.puts] == [b"m"]
        assert timer.curr_read_time_ms == timer.curr_write_time_ms
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
