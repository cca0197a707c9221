"""AsyncTraceDispatcher's batching loop: every record written, and shutdown never hangs."""

from __future__ import annotations

import asyncio

from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.trace import AsyncTraceDispatcher


class _RecordingProducer:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def send(self, msg) -> None:
        self.bodies.append(msg.body)

    async def shutdown(self) -> None:
        pass


def _dispatcher() -> tuple[AsyncTraceDispatcher, _RecordingProducer]:
    d = AsyncTraceDispatcher(RemotingClientConfig(namesrv_addr="127.0.0.1:1", client_ip="127.0.0.1"), "G")
    producer = _RecordingProducer()
    d._producer = producer
    return d, producer


async def test_records_trickling_in_around_the_polling_time_are_all_written() -> None:
    d, producer = _dispatcher()
    d._task = asyncio.create_task(d._run())
    for i in range(40):  # some land inside a batch's 100 ms window, some just after it
        d.append(f"[r{i}]", [])
        await asyncio.sleep(0.013 * (i % 9))
    await d.shutdown()
    written = "".join(b.decode() for b in producer.bodies)
    assert all(f"[r{i}]" in written for i in range(40))
    assert d._task is None


async def test_shutdown_while_the_loop_waits_returns() -> None:
    for delay in (0.0, 0.05, 0.099, 0.1, 0.101):
        d, producer = _dispatcher()
        d._task = asyncio.create_task(d._run())
        d.append("first", [])
        await asyncio.sleep(delay)
        d.append("second", [])
        async with asyncio.timeout(5):
            await d.shutdown()
        written = "".join(b.decode() for b in producer.bodies)
        assert "first" in written and "second" in written
