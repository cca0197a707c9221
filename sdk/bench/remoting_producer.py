"""`orbitmq bench remoting-producer`: single-message sends straight to the broker with the Remoting
client beside the gRPC SDK's through the proxy, in one run.

One `orbitmq local` (child process, temporary data dir, free ports; or ``--namesrv`` with
``--endpoint``), ``--size``-byte messages for ``--duration`` seconds per mode, one mode after
the other in this process:

- Remoting AsyncDefaultMQProducer.send awaited one at a time, then ``--window`` sends in flight;
- gRPC SDK AsyncProducer.send awaited one at a time, then ``--window`` sends in flight with
  batching off (linger 0, one message per SendMessage), so both sides send single messages;
- batches of ``--batch`` messages, one in flight: the Remoting client's send_batch (one
  SEND_BATCH_MESSAGE) beside the gRPC SDK's send_many with batching on (one SendMessage of the
  whole batch).

Prints msgs/s of each and the Remoting client's ratios to the SDK's; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence

from orbitmq.bench.scenario import given_or_local
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.message import Message as SdkMessage
from orbitmq.common.message import Message
from orbitmq.producer import AsyncProducer
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer


async def _rate(send: Callable[[], Awaitable[object]], duration: float, window: int,
                per_call: int = 1) -> tuple[float, int]:
    """(msgs/s, errors) of ``send`` (``per_call`` messages a call) with ``window`` calls in flight
    for ``duration`` seconds."""
    sent = errors = 0
    started = time.monotonic()
    stop_at = started + duration

    async def worker() -> None:
        nonlocal sent, errors
        while time.monotonic() < stop_at:
            try:
                await send()
                sent += per_call
            except Exception:  # counted: a benchmark reports failures instead of stopping
                errors += 1
    await asyncio.gather(*(worker() for _ in range(window)))
    return sent / (time.monotonic() - started), errors


async def run(namesrv: str, endpoint: str, args: argparse.Namespace) -> dict[str, float]:
    body = b"x" * args.size
    topic = args.topic
    results: dict[str, float] = {}
    errors = 0
    producer = AsyncDefaultMQProducer("BenchRemotingProducer", RemotingClientConfig(
        namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="bench-remoting"), send_msg_timeout=10)
    await producer.start()
    try:
        await _rate(lambda: producer.send(Message(topic, body)), 1.0, 1)  # topic created, route cached
        for window in (1, args.window):
            rate, errs = await _rate(lambda: producer.send(Message(topic, body)), args.duration, window)
            results[f"Remoting send to the broker (window {window})"] = rate
            errors += errs
        rate, errs = await _rate(lambda: producer.send_batch([Message(topic, body) for _ in range(args.batch)]),
                                 args.duration, 1, args.batch)
        results[f"Remoting send_batch of {args.batch} to the broker"] = rate
        errors += errs
    finally:
        await producer.shutdown()
    async with AsyncProducer(ClientConfig(endpoint, request_timeout=10), [topic], linger=0.0,
                             max_batch_messages=1) as sdk:
        await _rate(lambda: sdk.send(SdkMessage(topic, body)), 1.0, 1)
        for window in (1, args.window):
            rate, errs = await _rate(lambda: sdk.send(SdkMessage(topic, body)), args.duration, window)
            results[f"gRPC SDK send through the proxy (window {window})"] = rate
            errors += errs
    async with AsyncProducer(ClientConfig(endpoint, request_timeout=10), [topic], linger=0.0,
                             max_batch_messages=args.batch) as sdk:
        rate, errs = await _rate(lambda: sdk.send_many([SdkMessage(topic, body) for _ in range(args.batch)]),
                                 args.duration, 1, args.batch)
        results[f"gRPC SDK send_many of {args.batch} through the proxy (batched)"] = rate
        errors += errs
    results["errors"] = errors
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench remoting-producer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--namesrv", help="a running NameServer (with --endpoint; default: a temporary orbitmq local)")
    p.add_argument("--endpoint", help="the proxy of that cluster")
    p.add_argument("--topic", default="RemotingBenchTopic")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("-d", "--duration", type=float, default=5.0, help="seconds per mode")
    p.add_argument("--window", type=int, default=64, help="sends in flight in the concurrent modes")
    p.add_argument("--batch", type=int, default=32, help="messages a batch in the batch modes")
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = p.parse_args(list(argv or []))
    if bool(args.namesrv) != bool(args.endpoint):
        p.error("--namesrv and --endpoint go together")
    if args.batch < 1 or args.window < 1:
        p.error("--batch and --window must be at least 1")
    with given_or_local(args.namesrv, args.endpoint, "orbitmq-bench-remoting-") as (namesrv, endpoint):
        print(f"== Remoting producer (broker) vs gRPC SDK (proxy): {args.size} B single messages, "
              f"{args.duration:g} s per mode, NameServer {namesrv}, proxy {endpoint}", flush=True)
        results = asyncio.run(run(namesrv, endpoint, args))
    for name, value in results.items():
        if name != "errors":
            print(f"{name:<55} {value:>10,.0f} msgs/s")
    for window in (1, args.window):
        ratio = (results[f"Remoting send to the broker (window {window})"]
                 / max(results[f"gRPC SDK send through the proxy (window {window})"], 1e-9))
        print(f"{f'Remoting / gRPC SDK (window {window})':<55} {ratio:>10.1f} x")
    ratio = (results[f"Remoting send_batch of {args.batch} to the broker"]
             / max(results[f"gRPC SDK send_many of {args.batch} through the proxy (batched)"], 1e-9))
    print(f"{f'Remoting / gRPC SDK (batches of {args.batch})':<55} {ratio:>10.1f} x")
    print(f"{'errors':<55} {int(results['errors']):>10}")
    if args.json:
        print(json.dumps(results))
    return 0
