"""`orbitmq bench drain`: receive + ack a stored backlog through the proxy, counting every message.

Fills a topic with exactly ``--messages`` messages (batches of 32; every id the proxy answered is
kept), then drains it with ReceiveMessage (batches of 32) and one AckMessage per received batch
from ``-w`` receive loops. The rate is taken from the first ReceiveMessage to the ack of the last
expected message: the idle polling after the backlog is gone is not counted (the drain stops as
soon as every sent message has arrived, or after ``--idle-stop`` seconds without one). Each
message id is counted, so a drain that finishes within the invisible duration can be checked to
receive each message exactly once (duplicates and missing ids are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc

from orbitmq.bench.consumer import _duration
from orbitmq.bench.load import CHANNEL_OPTIONS, client_metadata
from orbitmq.bench.settings_stream import consumer_settings
from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc

OK = pb.Code.OK


@dataclass
class DrainResult:
    sent: int = 0
    received: int = 0
    elapsed_s: float = 0.0
    errors: int = 0
    ids: Counter[str] = field(default_factory=Counter)
    missing: int = 0

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.ids.values() if n > 1)

    @property
    def tps(self) -> float:
        return self.received / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self) -> dict:
        return {"sent": self.sent, "received": self.received, "unique": len(self.ids),
                "duplicates": self.duplicates, "missing": self.missing, "errors": self.errors,
                "elapsed_s": self.elapsed_s, "tps": self.tps}


def format_drain(title: str, s: dict) -> str:
    return (f"{title}: {s['tps']:.0f} msgs/s ({s['received']} received of {s['sent']} sent, {s['unique']} unique, "
            f"{s['duplicates']} duplicates, {s['missing']} missing, {s['errors']} errors in {s['elapsed_s']:.1f}s)")


async def fill(endpoint: str, topic: str, messages: int, size: int = 1024, batch: int = 32,
               concurrency: int = 8) -> list[str]:
    """Send exactly ``messages`` messages; returns the ids the proxy acknowledged."""
    body = os.urandom(size)
    metadata = client_metadata("bench-fill")
    ids: list[str] = []
    remaining = messages
    async with grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS) as channel:
        stub = sgrpc.MessagingServiceStub(channel)

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                n = min(batch, remaining)
                remaining -= n
                msgs = []
                for _ in range(n):
                    sysp = pb.SystemProperties(message_id=create_uniq_id(), tag="drain",
                                               message_type=pb.MessageType.NORMAL, body_encoding=pb.Encoding.IDENTITY)
                    msgs.append(pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=sysp))
                response = await stub.SendMessage(spb.SendMessageRequest(messages=msgs), metadata=metadata, timeout=30)
                if response.status.code != OK:
                    raise RuntimeError(f"fill of {topic} failed: {pb.Code.Name(response.status.code)} "
                                       f"{response.status.message}")
                ids.extend(e.message_id for e in response.entries)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ids


async def drain(endpoint: str, topic: str, group: str, expected: int, batch: int = 32, concurrency: int = 4,
                invisible_ms: int = 60_000, idle_stop_s: float = 3.0, polling_ms: int = 1_000) -> DrainResult:
    """ReceiveMessage + one AckMessage per batch until ``expected`` messages arrived (or idle)."""
    result = DrainResult()
    metadata = client_metadata("bench-drain")
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=batch, invisible_duration=_duration(invisible_ms), long_polling_timeout=_duration(polling_ms))
    ids = result.ids
    async with grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        await channel.channel_ready()
        # Apache's proxy receives only for a client that sent its Settings first.
        async with consumer_settings(channel, metadata, group, topic, polling_ms):
            loop = asyncio.get_running_loop()
            start = last = loop.time()
            done = asyncio.Event()

            async def worker() -> None:
                nonlocal last
                while not done.is_set():
                    if loop.time() - last > idle_stop_s:
                        return
                    received = []
                    try:
                        async for response in stub.ReceiveMessage(request, metadata=metadata,
                                                                  timeout=polling_ms / 1000 + 10):
                            if response.HasField("message"):
                                received.append(response.message)
                    except grpc.aio.AioRpcError as exc:
                        result.errors += 1
                        if exc.code() == grpc.StatusCode.UNAVAILABLE:
                            return
                        continue
                    if not received:
                        continue
                    entries = []
                    for m in received:
                        sp = m.system_properties
                        ids[sp.message_id] += 1
                        entries.append(spb.AckMessageEntry(message_id=sp.message_id, receipt_handle=sp.receipt_handle))
                    result.received += len(received)
                    ack = await stub.AckMessage(spb.AckMessageRequest(
                        group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries),
                        metadata=metadata, timeout=10)
                    if ack.status.code != OK:
                        result.errors += 1
                    last = loop.time()
                    if expected and len(ids) >= expected:
                        done.set()

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            result.elapsed_s = last - start
    return result


async def fill_and_drain(endpoint: str, topic: str, group: str, messages: int, size: int = 1024,
                         concurrency: int = 4, invisible_ms: int = 60_000) -> DrainResult:
    sent = await fill(endpoint, topic, messages, size)
    result = await drain(endpoint, topic, group, len(sent), concurrency=concurrency, invisible_ms=invisible_ms)
    result.sent = len(sent)
    result.missing = len(set(sent) - set(result.ids))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench drain", description=__doc__)
    parser.add_argument("--endpoint", default="127.0.0.1:8081")
    parser.add_argument("-t", "--topic", default="OrbitBenchDrain")
    parser.add_argument("-g", "--group", default="OrbitBenchDrainGroup")
    parser.add_argument("-n", "--messages", type=int, default=50_000)
    parser.add_argument("-s", "--size", type=int, default=1024)
    parser.add_argument("-w", "--concurrency", type=int, default=4, help="receive loops")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    result = asyncio.run(fill_and_drain(args.endpoint, args.topic, args.group, args.messages, args.size,
                                        args.concurrency)).summary()
    print(json.dumps(result) if args.json else format_drain("drain", result))
    return 0 if result["duplicates"] == 0 and result["missing"] == 0 else 1
