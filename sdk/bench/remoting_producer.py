"""`orbitmq bench remoting-producer`: single-message sends straight to the broker with the Remoting
client beside the gRPC SDK's through the proxy, in one run.

One `orbitmq local` (child process, temporary data dir, free ports; or ``--namesrv`` with
``--endpoint``), ``--size``-byte messages for ``--duration`` seconds per mode, one mode after
the other in this process:

- Remoting AsyncDefaultMQProducer.send awaited one at a time, then ``--window`` sends in flight;
- gRPC SDK AsyncProducer.send awaited one at a time, then ``--window`` sends in flight with
  batching off (linger 0, one message per SendMessage), so both sides send single messages.

Prints msgs/s of each and the Remoting client's ratio to the SDK's; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence

from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.scenario import stop_local
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.message import Message as SdkMessage
from orbitmq.common.message import Message
from orbitmq.common.net import free_ports
from orbitmq.producer import AsyncProducer
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer


async def _rate(send: Callable[[], Awaitable[object]], duration: float, window: int) -> tuple[float, int]:
    """(msgs/s, errors) of ``send`` with ``window`` calls in flight for ``duration`` seconds."""
    sent = errors = 0
    started = time.monotonic()
    stop_at = started + duration

    async def worker() -> None:
        nonlocal sent, errors
        while time.monotonic() < stop_at:
            try:
                await send()
                sent += 1
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
    finally:
        await producer.shutdown()
    async with AsyncProducer(ClientConfig(endpoint, request_timeout=10), [topic], linger=0.0,
                             max_batch_messages=1) as sdk:
        await _rate(lambda: sdk.send(SdkMessage(topic, body)), 1.0, 1)
        for window in (1, args.window):
            rate, errs = await _rate(lambda: sdk.send(SdkMessage(topic, body)), args.duration, window)
            results[f"gRPC SDK send through the proxy (window {window})"] = rate
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
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = p.parse_args(list(argv or []))
    if bool(args.namesrv) != bool(args.endpoint):
        p.error("--namesrv and --endpoint go together")
    proc = tmp = None
    namesrv, endpoint = args.namesrv, args.endpoint
    if namesrv is None:
        tmp = tempfile.TemporaryDirectory(prefix="orbitmq-bench-remoting-")
        ports = free_ports(3)
        proc = launch_local(tmp.name, local_ports_args(*ports))
        namesrv, endpoint = f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[2]}"
    try:
        print(f"== Remoting producer (broker) vs gRPC SDK (proxy): {args.size} B single messages, "
              f"{args.duration:g} s per mode, NameServer {namesrv}, proxy {endpoint}", flush=True)
        results = asyncio.run(run(namesrv, endpoint, args))
    finally:
        if proc is not None:
            stop_local(proc)
        if tmp is not None:
            tmp.cleanup()
    for name, value in results.items():
        if name != "errors":
            print(f"{name:<55} {value:>10,.0f} msgs/s")
    for window in (1, args.window):
        ratio = (results[f"Remoting send to the broker (window {window})"]
                 / max(results[f"gRPC SDK send through the proxy (window {window})"], 1e-9))
        print(f"{f'Remoting / gRPC SDK (window {window})':<55} {ratio:>10.1f} x")
    print(f"{'errors':<55} {int(results['errors']):>10}")
    if args.json:
        print(json.dumps(results))
    return 0
