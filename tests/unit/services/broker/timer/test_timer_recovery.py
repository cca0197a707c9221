"""recover() alone, over a fake timer store (RecoveryTimer) and real files: the wheel is rebuilt
from the timer log, a torn tail is cut, slots already delivered stay empty, and the queue offset
and read time resume where nothing can be lost."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orbitmq.broker.timer.recovery import recover
from orbitmq.broker.timer.timer_log import UNIT_SIZE
from orbitmq.broker.timer.wheel_math import MAGIC_DEFAULT

if TYPE_CHECKING:
    from conftest import FakeTimer, TimerEnv  # the fixture's fakes (this folder's conftest.py)

START = 1_795_000_000_000  # the fakes' clock at the start (conftest.START)
SLOT = START + 3_000


def _checkpoint(timer: FakeTimer, read_time_ms: int, queue_offset: int = 0) -> None:
    timer.checkpoint.update(last_read_time_ms=read_time_ms, last_timer_log_flush_pos=0,
                            last_timer_queue_offset=queue_offset, master_timer_queue_offset=queue_offset)


def _restart_without_wheel(env: TimerEnv) -> FakeTimer:
    """A crash that lost the wheel file: the timer log and the checkpoint are what is left."""
    timer = env.restart(lose_wheel=True)
    timer.clock = START + 1_000
    return timer


def test_a_lost_wheel_is_rebuilt_from_the_timer_log(timer_env: TimerEnv) -> None:
    first = timer_env.file(SLOT, b"1")
    second = timer_env.file(SLOT, b"2")
    later = timer_env.file(SLOT + 2_000, b"3")
    _checkpoint(timer_env.timer, START)
    timer = _restart_without_wheel(timer_env)
    assert timer.wheel.get_slot(SLOT).empty

    recover(timer)
    assert timer.slot_units(SLOT) == [(*first, MAGIC_DEFAULT), (*second, MAGIC_DEFAULT)]
    assert timer.wheel.get_slot(SLOT).num == 2
    assert timer.slot_units(SLOT + 2_000) == [(*later, MAGIC_DEFAULT)]
    assert timer.commit_queue_offset == 3  # after the message of the last unit
    assert (timer.curr_read_time_ms, timer.curr_write_time_ms) == (START, START)


def test_delivered_slots_stay_empty_and_a_torn_tail_is_cut(timer_env: TimerEnv) -> None:
    timer_env.file(SLOT, b"delivered")
    kept = timer_env.file(SLOT + 5_000, b"waiting")
    timer_env.timer.timer_log.append(UNIT_SIZE.to_bytes(4, "big") + b"\xff" * (UNIT_SIZE - 4))  # not a unit
    _checkpoint(timer_env.timer, SLOT + 1_000)
    timer = _restart_without_wheel(timer_env)

    recover(timer)
    assert timer.wheel.get_slot(SLOT).empty
    assert timer.slot_units(SLOT + 5_000) == [(*kept, MAGIC_DEFAULT)]
    assert timer.timer_log.max_offset() == 2 * UNIT_SIZE
    assert timer.curr_read_time_ms == SLOT + 1_000


@pytest.mark.parametrize(("checkpoint_offset", "resumed"), [(0, 2), (3, 3), (10, 4)])
def test_the_queue_offset_resumes_at_the_further_of_log_and_checkpoint_within_the_queue(
        timer_env: TimerEnv, checkpoint_offset: int, resumed: int) -> None:
    timer_env.file(SLOT, b"1")
    timer_env.file(SLOT, b"2")
    timer_env.store.put_timer_message(SLOT, b"3 not filed")
    timer_env.store.put_timer_message(SLOT, b"4 not filed")
    _checkpoint(timer_env.timer, START, checkpoint_offset)
    timer = timer_env.restart()

    recover(timer)
    assert timer.commit_queue_offset == resumed  # entries re-read from there are filed again


def test_a_first_start_begins_now_at_the_queues_first_entry(timer_env: TimerEnv) -> None:
    timer = timer_env.timer
    timer_env.store.put_timer_message(SLOT, b"gone")
    timer_env.store.put_timer_message(SLOT, b"first")
    timer_env.store.timer_queue.min_offset = 1
    timer.clock = START + 2_500

    recover(timer)
    assert timer.commit_queue_offset == 1
    assert (timer.curr_read_time_ms, timer.curr_write_time_ms) == (START + 2_000, START + 2_000)
