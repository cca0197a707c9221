"""The timer wheel's arithmetic (TimerMessageStore / TimerWheel constants and rules), free of I/O.

Kept apart so that the rounding, slot, roll and flow-control rules can be tested on their own:
these are what decide that a timer message is never delivered early.
"""

from __future__ import annotations

import random

TIMER_TOPIC = "rmq_sys_wheel_timer"

# TimerMessageStore.TIMER_WHEEL_TTL_DAY: the wheel spans this many days at any precision.
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 86_400
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # 604800, independent of precision
TIMER_BLANK_SLOTS = 60

# TimerLog magic bits; a magic is valid iff (m | 0xF) == 0xF.
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2


def is_magic_ok(magic: int) -> bool:
    return (magic | 0xF) == 0xF


def need_roll(magic: int) -> bool:
    return bool(magic & MAGIC_ROLL)


def need_delete(magic: int) -> bool:
    return bool(magic & MAGIC_DELETE)


def floor_time(time_ms: int, precision_ms: int) -> int:
    """formatTimeMs: the start of the precision interval holding ``time_ms``."""
    return time_ms // precision_ms * precision_ms


def round_deliver_ms(deliver_ms: int, precision_ms: int) -> int:
    """The slot time (TIMER_OUT_MS) of a message due at ``deliver_ms``.

    Slot T fires once floor(now) > T, i.e. at T + precision: an exact multiple of the precision
    therefore goes one slot earlier (it fires exactly on time), anything else is floored (it
    fires at the next boundary). Either way delivery is never before ``deliver_ms``.
    """
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def fire_time(slot_ms: int, precision_ms: int) -> int:
    """The earliest wall-clock time at which the slot at ``slot_ms`` is dequeued."""
    return slot_ms + precision_ms


def slot_index(time_ms: int, precision_ms: int) -> int:
    """TimerWheel.getSlotIndex: (time/precision) mod (2 * slotsTotal)."""
    return (time_ms // precision_ms) % (SLOTS_TOTAL * 2)


def effective_roll_window(roll_window_slot: int) -> int:
    """timerRollWindowSlot as TimerMessageStore uses it: out-of-range values -> slotsTotal - 60."""
    if roll_window_slot > SLOTS_TOTAL - TIMER_BLANK_SLOTS or roll_window_slot < 2:
        return SLOTS_TOTAL - TIMER_BLANK_SLOTS
    return roll_window_slot


def roll_target(delayed_ms: int, curr_write_ms: int, roll_window: int, precision_ms: int) -> int | None:
    """Where a message due at ``delayed_ms`` is parked when it is too far for the wheel, else None.

    Past the window it goes half a window ahead when it overshoots by less than a third of a
    window (so the next roll has time left), otherwise a whole window ahead; when that slot
    fires it is re-put to the timer topic and enqueued again at its real time.
    """
    window_ms = roll_window * precision_ms
    if delayed_ms - curr_write_ms < window_ms:
        return None
    if delayed_ms - curr_write_ms - window_ms < (roll_window // 3) * precision_ms:
        return curr_write_ms + (roll_window // 2) * precision_ms
    return curr_write_ms + window_ms


def is_reject(slot_num: int, congest_num_each_slot: int, rand: random.Random | None = None) -> bool:
    """TimerMessageStore.isReject: random early refusal once a slot holds more than C messages."""
    c = congest_num_each_slot
    if slot_num <= c:
        return False
    if slot_num >= c * 2:
        return True
    draw = (rand or random).randrange(1000)
    return draw > 1000 * (slot_num - c) / (c + 0.1)
