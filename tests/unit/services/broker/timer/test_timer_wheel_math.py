"""The timer wheel's arithmetic: rounding never delivers early, slots wrap, rolls, flow control."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from orbitmq.broker.timer import wheel_math as wm


def test_constants_are_upstreams() -> None:
    assert wm.SLOTS_TOTAL == 604_800
    assert wm.TIMER_BLANK_SLOTS == 60
    assert (wm.MAGIC_DEFAULT, wm.MAGIC_ROLL, wm.MAGIC_DELETE) == (1, 2, 4)
    assert wm.TIMER_TOPIC == "rmq_sys_wheel_timer"
    assert all(wm.is_magic_ok(m) for m in range(16))
    assert not wm.is_magic_ok(16)


def test_rounding_of_the_deliver_time() -> None:
    # An exact multiple goes one slot earlier: that slot fires exactly at the requested time.
    assert wm.round_deliver_ms(10_000, 1000) == 9_000
    assert wm.fire_time(9_000, 1000) == 10_000
    # Anything else is floored and fires at the next boundary.
    assert wm.round_deliver_ms(10_001, 1000) == 10_000
    assert wm.round_deliver_ms(10_999, 1000) == 10_000
    assert wm.fire_time(10_000, 1000) == 11_000


@given(st.integers(min_value=1, max_value=2**50), st.sampled_from([100, 200, 500, 1000, 2000]))
def test_never_early_and_at_most_one_precision_late(deliver_ms: int, precision: int) -> None:
    slot = wm.round_deliver_ms(deliver_ms, precision)
    assert slot % precision == 0
    fire = wm.fire_time(slot, precision)
    assert deliver_ms <= fire < deliver_ms + precision


def test_slot_index_wraps_at_twice_the_slots() -> None:
    assert wm.slot_index(0, 1000) == 0
    assert wm.slot_index(1999, 1000) == 1
    assert wm.slot_index(2 * 604_800 * 1000, 1000) == 0
    assert wm.slot_index(2 * 604_800 * 1000 + 5000, 1000) == 5
    assert wm.slot_index(5 * 100, 100) == 5


def test_roll_window_bounds() -> None:
    assert wm.effective_roll_window(172_800) == 172_800
    assert wm.effective_roll_window(2) == 2
    assert wm.effective_roll_window(1) == 604_740
    assert wm.effective_roll_window(604_741) == 604_740
    assert wm.effective_roll_window(604_740) == 604_740


def test_roll_target() -> None:
    p = 1000
    now = 1_000_000
    window = 30  # 30 s
    assert wm.roll_target(now + 29_000, now, window, p) is None  # inside the window: no roll
    # Overshoot below window/3 (10 s): parked half a window ahead.
    assert wm.roll_target(now + 30_000, now, window, p) == now + 15_000
    assert wm.roll_target(now + 39_999, now, window, p) == now + 15_000
    # Otherwise a whole window ahead.
    assert wm.roll_target(now + 40_000, now, window, p) == now + 30_000
    assert wm.roll_target(now + 3 * 3600_000, now, window, p) == now + 30_000


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=2, max_value=10_000))
def test_a_parked_message_is_always_parked_before_its_time(delay: int, window: int) -> None:
    now = 10**12
    target = wm.roll_target(now + delay, now, window, 1000)
    if target is not None:
        assert now < target <= now + delay


def test_flow_control() -> None:
    rng = random.Random(7)
    assert not wm.is_reject(10, 10, rng)
    assert wm.is_reject(20, 10, rng)
    assert wm.is_reject(25, 10, rng)
    # In between, a random share is refused (upstream's formula).
    outcomes = {wm.is_reject(15, 10, rng) for _ in range(200)}
    assert outcomes == {True, False}
    # Off by default: Integer.MAX_VALUE.
    assert not wm.is_reject(10**6, 2**31 - 1)
