"""`orbitmq bench remoting-drain`: drain a backlog straight from the brokers with the Remoting
consumers, beside the gRPC SDK's drain of the same backlog through the proxy.

One `orbitmq local` (child process, temporary data dir, free ports; or ``--namesrv`` with
``--endpoint``) gets ``--messages`` messages of ``--size`` bytes (Remoting batch sends of 64).
Then, each with a fresh group from the first offset: the Remoting push consumer (concurrent
listener, consumeMessageBatchMaxSize 32, pullBatchSize 32), the Remoting lite pull consumer
(poll), and the gRPC ReceiveMessage + AckMessage drain of ``orbitmq bench drain`` through the
proxy. Each rate runs from the consumer's start to its last expected message; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Sequence

from orbitmq.bench.drain import drain as grpc_drain
from orbitmq.bench.scenario import given_or_local
from orbitmq.common.message import Message, MessageExt
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import (
    AsyncDefaultLitePullConsumer,
    AsyncDefaultMQPushConsumer,
    ConsumeConcurrentlyStatus,
)
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer


def _config(namesrv: str, name: str) -> RemotingClientConfig:
    return RemotingClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


async def fill(namesrv: str, topic: str, messages: int, size: int, batch: int = 64) -> int:
    producer = AsyncDefaultMQProducer("BenchRemotingDrainProducer", _config(namesrv, "bench-drain-p"),
                                      send_msg_timeout=10)
    await producer.start()
    body = b"x" * size
    sent = 0
    try:
        await producer.send(Message(topic, body))  # the topic is created and its route cached
        sent = 1
        window: list[asyncio.Future[object]] = []
        while sent < messages:
            n = min(batch, messages - sent)
            window.append(asyncio.ensure_future(producer.send_batch([Message(topic, body) for _ in range(n)])))
            sent += n
            if len(window) >= 16:
                await asyncio.gather(*window)
                window = []
        await asyncio.gather(*window)
    finally:
        await producer.shutdown()
    return sent


async def push_drain(namesrv: str, topic: str, expected: int) -> float:
    done = asyncio.Event()
    count = 0
    loop = asyncio.get_running_loop()

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        nonlocal count
        count += len(msgs)
        if count >= expected:
            loop.call_soon(done.set)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncDefaultMQPushConsumer(f"BenchPush{uuid.uuid4().hex[:8]}", _config(namesrv, "bench-drain-push"),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                          consume_message_batch_max_size=32, pull_batch_size=32,
                                          consume_thread_min=4, consume_thread_max=4)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    started = time.monotonic()
    await consumer.start()
    try:
        await done.wait()
        return count / (time.monotonic() - started)
    finally:
        await consumer.shutdown()


async def lite_pull_drain(namesrv: str, topic: str, expected: int) -> float:
    consumer = AsyncDefaultLitePullConsumer(f"BenchLite{uuid.uuid4().hex[:8]}", _config(namesrv, "bench-drain-lite"),
                                            consume_from_where="CONSUME_FROM_FIRST_OFFSET", pull_batch_size=32)
    consumer.subscribe(topic)
    started = time.monotonic()
    await consumer.start()
    got = 0
    try:
        while got < expected:
            got += len(await consumer.poll(1.0))
        return got / (time.monotonic() - started)
    finally:
        await consumer.shutdown()


async def run(namesrv: str, endpoint: str, args: argparse.Namespace) -> dict[str, float]:
    topic = f"{args.topic}{uuid.uuid4().hex[:8]}"
    expected = await fill(namesrv, topic, args.messages, args.size)
    results = {"Remoting push consumer from the broker": await push_drain(namesrv, topic, expected),
               "Remoting lite pull consumer from the broker": await lite_pull_drain(namesrv, topic, expected)}
    grpc = await grpc_drain(endpoint, topic, f"BenchGrpc{uuid.uuid4().hex[:8]}", expected,
                            concurrency=args.concurrency)
    results["gRPC SDK receive + ack through the proxy"] = grpc.tps
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench remoting-drain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--namesrv", help="a running NameServer (with --endpoint; default: a temporary orbitmq local)")
    p.add_argument("--endpoint", help="the proxy of that cluster")
    p.add_argument("--topic", default="RemotingDrainBench")
    p.add_argument("-n", "--messages", type=int, default=50_000)
    p.add_argument("-s", "--size", type=int, default=1024)
    p.add_argument("-w", "--concurrency", type=int, default=4, help="gRPC receive loops")
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = p.parse_args(list(argv or []))
    if bool(args.namesrv) != bool(args.endpoint):
        p.error("--namesrv and --endpoint go together")
    with given_or_local(args.namesrv, args.endpoint, "orbitmq-bench-remoting-drain-") as (namesrv, endpoint):
        print(f"== drain of {args.messages:,} x {args.size} B: Remoting consumers (broker) vs gRPC SDK (proxy), "
              f"NameServer {namesrv}, proxy {endpoint}", flush=True)
        results = asyncio.run(run(namesrv, endpoint, args))
    for name, value in results.items():
        print(f"{name:<50} {value:>10,.0f} msgs/s")
    ratio = results["Remoting push consumer from the broker"] / max(
        results["gRPC SDK receive + ack through the proxy"], 1e-9)
    print(f"{'Remoting push / gRPC SDK':<50} {ratio:>10.1f} x")
    if args.json:
        print(json.dumps(results))
    return 0
