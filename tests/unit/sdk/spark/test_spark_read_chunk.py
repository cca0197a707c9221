"""The Spark source's range read never skips offsets silently (sdk/spark/clients.py read_chunk).

A PullMessage that answers fewer messages than asked with a next offset further on would, if
trusted, drop the messages in between without a word; without a filter a queue's offsets are
contiguous, so the read goes on right after what it got, retries a gap, and fails naming the
queue and the offset if the gap stays.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("pyarrow", reason="the Spark source needs the spark extra")

from orbitmq.clientcore.message import MessageQueue  # noqa: E402
from orbitmq.spark import clients  # noqa: E402

MQ = MessageQueue("T", "broker-a", 0)


class FakeConsumer:
    """Queue offsets [0, size); ``holes`` maps an offset to how many more pulls answer it empty
    with a next offset far ahead (what a misbehaving server would say)."""

    def __init__(self, size: int, holes: dict[int, int]) -> None:
        self.size = size
        self.holes = dict(holes)

    async def pull(self, mq, offset, max_messages, long_polling=0.0, expression="*"):
        if self.holes.get(offset, 0) > 0:
            self.holes[offset] -= 1
            return [], self.size
        got = [SimpleNamespace(queue_offset=o) for o in range(offset, min(offset + max_messages, self.size))]
        # a short answer that stops before a hole, with a next offset that jumps the hole
        for o in range(offset, offset + len(got)):
            if self.holes.get(o, 0) > 0 and o > offset:
                got = got[:o - offset]
                return got, self.size
        return got, offset + len(got)

    async def max_offset(self, mq):
        return self.size

    async def min_offset(self, mq):
        return 0


def _read_all(consumer: FakeConsumer, end: int) -> list[int]:
    async def go() -> list[int]:
        offset, out = 0, []
        while offset < end:
            messages, offset = await clients.read_chunk(consumer, MQ, offset, end, "*", True)
            out += [m.queue_offset for m in messages]
        return out
    return asyncio.run(go())


def test_a_jumping_next_offset_is_not_trusted_and_the_gap_is_read_again(monkeypatch) -> None:
    monkeypatch.setattr(asyncio, "sleep", _no_sleep)
    assert _read_all(FakeConsumer(1000, {100: 3, 517: 1}), 1000) == list(range(1000))


def test_a_gap_that_stays_fails_naming_the_queue_and_offset(monkeypatch) -> None:
    monkeypatch.setattr(asyncio, "sleep", _no_sleep)
    with pytest.raises(clients.RocketMQReadError, match=r"queue broker-a/0 has no message at offset 300"):
        _read_all(FakeConsumer(1000, {300: 10_000}), 1000)


_real_sleep = asyncio.sleep


async def _no_sleep(delay: float, result=None):
    await _real_sleep(0)
    return result
