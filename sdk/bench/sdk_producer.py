"""`orbitmq bench sdk-producer`: the SDK producer with automatic batching vs the official client.

In one `orbitmq local` (child process, temporary data dir, free ports; or ``--endpoint``), 1 KiB
messages for ``--duration`` seconds each, one after the other in this process:

- the official Python client (rocketmq-python-client) in its two sending modes: ``send`` in a
  loop, and ``send_async`` with ``--window`` futures outstanding; the better one is the baseline;
- the SDK's AsyncProducer (``--linger``, ``--max-batch-messages``) with ``--window`` sends
  outstanding, and the synchronous Producer's ``send_async`` the same way.

Prints msgs/s of each and the SDK's ratio to the official client's best mode.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench.scenario import start_local, stop_local
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.message import Message
from orbitmq.producer import AsyncProducer, Producer


def official_sync(endpoint: str, topic: str, body: bytes, duration: float) -> float:
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq import Message as OfficialMessage
    from rocketmq import Producer as OfficialProducer

    producer = OfficialProducer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        sent = 0
        started = time.monotonic()
        while time.monotonic() - started < duration:
            m = OfficialMessage()
            m.topic = topic
            m.body = body
            producer.send(m)
            sent += 1
        return sent / (time.monotonic() - started)
    finally:
        producer.shutdown()


def official_async(endpoint: str, topic: str, body: bytes, duration: float, window: int) -> float:
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq import Message as OfficialMessage
    from rocketmq import Producer as OfficialProducer

    producer = OfficialProducer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        pending: collections.deque = collections.deque()
        sent = 0
        started = time.monotonic()
        while time.monotonic() - started < duration:
            m = OfficialMessage()
            m.topic = topic
            m.body = body
            pending.append(producer.send_async(m))
            if len(pending) >= window:
                pending.popleft().result(30)
                sent += 1
        while pending:
            pending.popleft().result(30)
            sent += 1
        return sent / (time.monotonic() - started)
    finally:
        producer.shutdown()


async def sdk_async(endpoint: str, topic: str, body: bytes, duration: float, window: int, linger: float,
                    max_batch_messages: int) -> tuple[float, float]:
    """(msgs/s, messages per SendMessage request)."""
    async with AsyncProducer(ClientConfig(endpoint, request_timeout=10), [topic], linger=linger,
                             max_batch_messages=max_batch_messages) as producer:
        slots = asyncio.Semaphore(window)
        errors = 0

        def done(f: asyncio.Future) -> None:
            nonlocal errors
            slots.release()
            if f.exception() is not None:
                errors += 1

        sent = 0
        started = time.monotonic()
        while time.monotonic() - started < duration:
            await slots.acquire()
            producer.send_nowait(Message(topic, body)).add_done_callback(done)
            sent += 1
        await producer.flush()
        elapsed = time.monotonic() - started
        if errors:
            raise RuntimeError(f"{errors} SDK sends failed")
        return sent / elapsed, producer.messages_sent / max(producer.requests_sent, 1)


def sdk_sync(endpoint: str, topic: str, body: bytes, duration: float, window: int, linger: float,
             max_batch_messages: int) -> float:
    with Producer(ClientConfig(endpoint, request_timeout=10), [topic], linger=linger,
                  max_batch_messages=max_batch_messages) as producer:
        pending: collections.deque = collections.deque()
        sent = 0
        started = time.monotonic()
        while time.monotonic() - started < duration:
            pending.append(producer.send_async(Message(topic, body)))
            if len(pending) >= window:
                pending.popleft().result(30)
                sent += 1
        while pending:
            pending.popleft().result(30)
            sent += 1
        return sent / (time.monotonic() - started)


def run(endpoint: str, args: argparse.Namespace) -> dict[str, float]:
    body = b"x" * args.size
    topic = args.topic
    # Warm up: topic auto-created, routes cached, connections open.
    sdk_sync(endpoint, topic, body, 1.0, 64, args.linger, args.max_batch_messages)
    results: dict[str, float] = {}
    results["official send (sync loop)"] = official_sync(endpoint, topic, body, args.duration)
    results[f"official send_async (window {args.official_window})"] = official_async(
        endpoint, topic, body, args.duration, args.official_window)
    rate, per_request = asyncio.run(sdk_async(endpoint, topic, body, args.duration, args.window, args.linger,
                                              args.max_batch_messages))
    results[f"SDK AsyncProducer batching (window {args.window})"] = rate
    results["  messages per SendMessage"] = per_request
    results[f"SDK Producer.send_async batching (window {args.window})"] = sdk_sync(
        endpoint, topic, body, args.duration, args.window, args.linger, args.max_batch_messages)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench sdk-producer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", help="a running proxy (default: start a temporary orbitmq local)")
    p.add_argument("--topic", default="SdkBenchTopic")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--duration", type=float, default=10.0, help="seconds per mode")
    p.add_argument("--window", type=int, default=4096, help="SDK sends outstanding")
    p.add_argument("--official-window", type=int, default=256, help="official send_async futures outstanding")
    p.add_argument("--linger", type=float, default=0.005)
    p.add_argument("--max-batch-messages", type=int, default=512)
    args = p.parse_args(list(argv or []))
    proc = None
    tmp = None
    endpoint = args.endpoint
    if endpoint is None:
        tmp = tempfile.TemporaryDirectory(prefix="orbitmq-bench-sdk-")
        proc, endpoint = start_local(tmp.name)
    try:
        print(f"== SDK producer vs official Python client: {args.size} B messages, {args.duration:.0f} s per mode, "
              f"linger={args.linger}s max_batch_messages={args.max_batch_messages}, proxy {endpoint}", flush=True)
        results = run(endpoint, args)
    finally:
        if proc is not None:
            stop_local(proc)
        if tmp is not None:
            tmp.cleanup()
    official_best = max(v for k, v in results.items() if k.startswith("official"))
    for name, value in results.items():
        if name.startswith("  "):
            print(f"{name:<55} {value:>10.1f}")
        else:
            print(f"{name:<55} {value:>10,.0f} msgs/s")
    sdk_best = results[f"SDK AsyncProducer batching (window {args.window})"]
    print(f"{'SDK AsyncProducer / official best mode':<55} {sdk_best / official_best:>10.1f} x")
    return 0
