"""`orbitmq bench sdk-pull`: how fast the SDK PullConsumer drains a backlog.

In one `orbitmq local` (or ``--endpoint``), ``--messages`` 1 KiB messages are written with the
SDK producer, then a PullConsumer of a fresh group subscribes, seeks to the beginning and polls
until it has them all. Prints msgs/s and the client's CPU per message. ``drain_rate`` is the
figure other benchmarks (the Spark source's) compare against.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Sequence

from orbitmq.bench.scenario import start_local, stop_local
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.message import Message
from orbitmq.consumer.pull import AsyncPullConsumer
from orbitmq.producer import AsyncProducer


async def write_backlog(endpoint: str, topic: str, messages: int, size: int) -> None:
    body = b"x" * size
    async with AsyncProducer(ClientConfig(endpoint, request_timeout=10), [topic], max_batch_messages=512) as p:
        pending = []
        for _ in range(messages):
            pending.append(p.send_nowait(Message(topic, body)))
            if len(pending) >= 4096:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)


async def drain_rate(endpoint: str, topic: str, group: str, expected: int) -> tuple[float, float]:
    """(msgs/s, client CPU µs per message) of one PullConsumer reading ``expected`` messages of
    ``topic`` from the beginning."""
    async with AsyncPullConsumer(ClientConfig(endpoint, request_timeout=10), group, long_polling_timeout=1) as c:
        await c.subscribe(topic)
        await c.seek_to_beginning()
        got = 0
        started, cpu = time.monotonic(), time.process_time()
        while got < expected:
            got += len(await c.poll(1.0, 4096))
        elapsed = time.monotonic() - started
        return got / elapsed, (time.process_time() - cpu) / got * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench sdk-pull", description=__doc__)
    p.add_argument("--endpoint", help="a running proxy (default: start a temporary orbitmq local)")
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--size", type=int, default=1024)
    args = p.parse_args(list(argv or []))
    tmp = None
    proc = None
    endpoint = args.endpoint
    if endpoint is None:
        tmp = tempfile.TemporaryDirectory(prefix="orbitmq-bench-pull-")
        proc, endpoint = start_local(tmp.name)
    topic = f"SdkPullBench{uuid.uuid4().hex[:8]}"
    try:
        asyncio.run(write_backlog(endpoint, topic, args.messages, args.size))
        rate, cpu_us = asyncio.run(drain_rate(endpoint, topic, f"SdkPullBenchG{uuid.uuid4().hex[:8]}",
                                              args.messages))
    finally:
        if proc is not None:
            stop_local(proc)
        if tmp is not None:
            tmp.cleanup()
    print(f"SDK PullConsumer drained {args.messages:,} x {args.size} B messages: {rate:,.0f} msgs/s "
          f"(client CPU {cpu_us:.0f} µs/msg), proxy {endpoint}")
    return 0
