"""MessageQueueSelector and upstream's stock selectors (SelectMessageQueueByHash / ByRandom)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.java_hash import java_string_hash

# select(mqs, msg, arg) -> the queue to send to (MessageQueueSelector#select)
MessageQueueSelector = Callable[[list[MessageQueueRef], Any, Any], MessageQueueRef]


def _java_hash_code(arg: Any) -> int:
    """Object#hashCode of the usual argument types (String, Integer, Long)."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg
        value = arg & 0xFFFFFFFFFFFFFFFF  # Long#hashCode: (int) (value ^ (value >>> 32))
        folded = (value ^ (value >> 32)) & 0xFFFFFFFF
        return folded - (1 << 32) if folded & 0x80000000 else folded
    return java_string_hash(str(arg))


def select_message_queue_by_hash(mqs: list[MessageQueueRef], msg: Any, arg: Any) -> MessageQueueRef:
    """SelectMessageQueueByHash: abs(arg.hashCode()) % queues, so one key keeps one queue."""
    value = _java_hash_code(arg)
    if value < 0:
        value = abs(value)
    return mqs[value % len(mqs)]


def select_message_queue_by_random(mqs: list[MessageQueueRef], msg: Any, arg: Any) -> MessageQueueRef:
    """SelectMessageQueueByRandom."""
    return mqs[random.randrange(len(mqs))]
