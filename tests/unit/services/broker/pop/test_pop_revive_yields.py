"""The revive service reads its backlog in batches and gives the event loop back between them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from orbitmq.broker.pop.revive import PopReviveService, ReviveQueue
from orbitmq.broker.store.model import GetMessageResult, GetMessageStatus

BACKLOG = 50


class _BacklogBroker:
    """A revive queue holding BACKLOG records, served one per (synchronous) read."""

    metrics = None

    def __init__(self) -> None:
        self.reads = 0

    async def get_message(self, group, topic, queue_id, offset, batch, max_bytes, message_filter):
        self.reads += 1
        result = GetMessageResult(GetMessageStatus.FOUND, next_begin_offset=offset, max_offset=BACKLOG)
        if offset >= BACKLOG:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            return result
        result.add_message(b"not a record", offset)  # skipped as unreadable, like a corrupt entry
        result.next_begin_offset = offset + 1
        return result


async def test_consuming_a_backlog_lets_other_tasks_run_between_batches() -> None:
    broker = _BacklogBroker()
    pop = SimpleNamespace(broker=broker, revive_topic="rmq_sys_REVIVE_LOG_C",
                          config=SimpleNamespace(revive_batch_size=1))
    service = PopReviveService(pop)  # type: ignore[arg-type]
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    queue = ReviveQueue(0, 0)
    await service._consume(queue)
    stop.set()
    await other
    assert queue.read_offset == BACKLOG
    assert broker.reads == BACKLOG + 1
    assert ticks >= BACKLOG - 1  # the other task ran between the batches, not only at the end
