"""A subscribed PullConsumer hands a queue over cleanly: it stops reading a queue it lost, commits
that queue's position, and only then asks for its share again (the request that tells the proxy
the queue is free); its own commits never race the release (sdk/consumer/pull.py)."""

from __future__ import annotations

import asyncio

import pytest

from orbitmq import AsyncPullConsumer, ClientConfig, MessageQueue
from orbitmq.clientcore.errors import BadRequestError

Q0, Q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)


class _Proxy:
    """Stands in for the consumer's RPCs, recording them in order."""

    def __init__(self, consumer: AsyncPullConsumer, shares: list[set[MessageQueue]]) -> None:
        self.calls: list[tuple] = []
        self.shares = shares
        self.offsets: dict[MessageQueue, int] = {}
        consumer._query_assignment = self.query  # type: ignore[method-assign]
        consumer._update_offset = self.update  # type: ignore[method-assign]
        consumer.committed = self.committed  # type: ignore[method-assign]
        consumer._announce_settings = self.announce  # type: ignore[method-assign]

    async def query(self, topic: str) -> set[MessageQueue]:
        self.calls.append(("QueryAssignment", topic))
        return self.shares.pop(0) if len(self.shares) > 1 else self.shares[0]

    async def update(self, mq: MessageQueue, offset: int) -> None:
        self.calls.append(("UpdateOffset", mq.queue_id, offset))
        self.offsets[mq] = offset

    async def committed(self, mq: MessageQueue) -> int | None:
        return self.offsets.get(mq)

    async def announce(self) -> None:
        self.calls.append(("Settings",))


def _consumer() -> AsyncPullConsumer:
    consumer = AsyncPullConsumer(ClientConfig("127.0.0.1:1"), "G")
    consumer.running = True
    return consumer


def test_a_lost_queue_is_committed_before_the_share_is_asked_again() -> None:
    async def run() -> None:
        consumer = _consumer()
        proxy = _Proxy(consumer, [set(), {Q0, Q1}, {Q0}])
        await consumer.subscribe("T")
        assert set(consumer.assignment()) == {Q0, Q1}
        consumer._positions[Q1] = 7  # polled up to offset 6
        proxy.calls.clear()
        await consumer._rebalance("T")
        assert consumer.assignment() == [Q0]
        assert Q1 not in consumer._positions  # nothing more is read from it
        assert proxy.calls == [("QueryAssignment", "T"), ("UpdateOffset", 1, 7), ("QueryAssignment", "T")]
        # a committed offset is never moved back by a release
        proxy.offsets[Q0] = 50
        consumer._positions[Q0] = 40
        proxy.shares = [set()]
        await consumer._rebalance("T")
        assert proxy.offsets[Q0] == 50
        # the group moved Q1 away: its offset is not this instance's to commit
        with pytest.raises(BadRequestError):
            await consumer.commit({Q1: 9})
        if consumer._scan_task is not None:
            consumer._scan_task.cancel()

    asyncio.run(run())
