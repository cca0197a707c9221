"""Message listeners and their contexts (MessageListenerConcurrently / MessageListenerOrderly).

A listener is a plain or async callable ``(msgs, context) -> status``; the consumer tells the two
kinds apart by the ``orderly`` flag it was registered with. Raising counts as RECONSUME_LATER
(concurrently) or SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly), and so does returning None.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.message import MessageExt


class ConsumeConcurrentlyStatus(enum.StrEnum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.StrEnum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"
    # Deprecated upstream (only meaningful with autoCommit off): kept so listeners port as written.
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"


class ConsumeReturnType(enum.StrEnum):
    SUCCESS = "SUCCESS"
    TIME_OUT = "TIME_OUT"
    EXCEPTION = "EXCEPTION"
    RETURNNULL = "RETURNNULL"
    FAILED = "FAILED"


@dataclass
class ConsumeConcurrentlyContext:
    message_queue: MessageQueueRef
    # 0: the broker picks (3 + reconsumeTimes); -1: straight to the DLQ; >0: this delay level
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1  # the last successful message's index on CONSUME_SUCCESS


@dataclass
class ConsumeOrderlyContext:
    message_queue: MessageQueueRef
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1  # -1: the consumer's suspendCurrentQueueTimeMillis


Listener = Callable[[list[MessageExt], Any], Any | Awaitable[Any]]


async def call_listener(listener: Listener, msgs: list[MessageExt], context: Any,
                        executor: concurrent.futures.Executor | None = None) -> Any:
    """Run a sync or async listener; a sync one runs on ``executor``'s threads so it may block."""
    if inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(type(listener).__call__):
        return await listener(msgs, context)
    result = await asyncio.get_running_loop().run_in_executor(executor, listener, msgs, context)
    if inspect.isawaitable(result):
        result = await result
    return result
