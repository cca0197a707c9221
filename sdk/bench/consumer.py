"""`orbitmq bench consumer`: consume TPS and end-to-end latency through ReceiveMessage/AckMessage.

End-to-end latency is the time from the producer's born timestamp to the message's arrival at
the consumer, so it covers proxy, broker store and POP (producer and consumer share the clock).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from orbitmq.bench.load import CHANNEL_OPTIONS, client_metadata
from orbitmq.bench.settings_stream import consumer_settings
from orbitmq.bench.stats import Stats, format_summary
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proto.pool import Duration


@dataclass
class ConsumeOptions:
    endpoint: str = "127.0.0.1:8081"
    topic: str = "OrbitBench"
    group: str = "OrbitBenchGroup"
    concurrency: int = 4
    batch: int = 32
    duration: float = 10.0
    invisible_ms: int = 30_000
    polling_ms: int = 1_000
    # Stop once messages have arrived and then none for this many seconds (0 = run the duration).
    idle_stop_s: float = 0.0


def _duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


async def run_consume_load(opts: ConsumeOptions, stop: asyncio.Event | None = None,
                           stats: Stats | None = None, ready_line: str | None = None) -> Stats:
    """Receive and ack until ``duration`` passes (or ``stop`` is set); ``stats`` fills as it goes."""
    stats = stats if stats is not None else Stats()
    metadata = client_metadata("bench-consumer")
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=opts.group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=opts.topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=opts.batch, invisible_duration=_duration(opts.invisible_ms),
        long_polling_timeout=_duration(opts.polling_ms))
    async with grpc.aio.insecure_channel(opts.endpoint, options=CHANNEL_OPTIONS) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        await channel.channel_ready()
        # Apache's proxy receives only for a client that sent its Settings first.
        async with consumer_settings(channel, metadata, opts.group, opts.topic, opts.polling_ms):
            if ready_line:
                print(ready_line, flush=True)
            loop = asyncio.get_running_loop()
            start = loop.time()
            end = start + opts.duration

            last_message_at = start

            async def worker() -> None:
                nonlocal last_message_at
                while loop.time() < end and not (stop and stop.is_set()):
                    if opts.idle_stop_s and stats.messages and loop.time() - last_message_at > opts.idle_stop_s:
                        return
                    received: list[pb.Message] = []
                    try:
                        async for response in stub.ReceiveMessage(request, metadata=metadata,
                                                                  timeout=opts.polling_ms / 1000 + 5):
                            if response.HasField("message"):
                                now_ms = time.time() * 1000
                                props = response.message.system_properties
                                born = props.born_timestamp.ToMilliseconds()
                                stats.latencies_ms.append(max(0.0, now_ms - born))
                                if props.HasField("store_timestamp"):
                                    stored = props.store_timestamp.ToMilliseconds()
                                    stats.send_leg_ms.append(max(0.0, stored - born))
                                    stats.consume_leg_ms.append(max(0.0, now_ms - stored))
                                received.append(response.message)
                    except grpc.aio.AioRpcError as exc:
                        stats.add_error(f"ReceiveMessage gRPC {exc.code().name}: {exc.details()}")
                        continue
                    stats.requests += 1
                    if not received:
                        continue
                    stats.messages += len(received)
                    last_message_at = loop.time()
                    entries = [spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                                   receipt_handle=m.system_properties.receipt_handle) for m in received]
                    ack = await stub.AckMessage(spb.AckMessageRequest(
                        group=pb.Resource(name=opts.group), topic=pb.Resource(name=opts.topic), entries=entries),
                        metadata=metadata, timeout=10)
                    if ack.status.code != pb.Code.OK:
                        stats.add_error(f"AckMessage {pb.Code.Name(ack.status.code)}: {ack.status.message}")

            await asyncio.gather(*(worker() for _ in range(opts.concurrency)))
            # Consume TPS is over the time messages kept arriving, not the idle polling after them.
            stats.elapsed_s = (last_message_at if stats.messages else loop.time()) - start
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench consumer", description=__doc__)
    parser.add_argument("--endpoint", default="127.0.0.1:8081")
    parser.add_argument("-t", "--topic", default="OrbitBench")
    parser.add_argument("-g", "--group", default="OrbitBenchGroup")
    parser.add_argument("-w", "--concurrency", type=int, default=4, help="receive streams in flight")
    parser.add_argument("-b", "--batch", type=int, default=32, help="messages per ReceiveMessage")
    parser.add_argument("-d", "--duration", type=float, default=10.0)
    parser.add_argument("--idle-stop", type=float, default=0.0,
                        help="stop once no message arrived for this many seconds (after the first)")
    parser.add_argument("--json", action="store_true")
    # Internal (`bench all`): print this line once connected, before consuming.
    parser.add_argument("--ready-line", help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv or []))
    opts = ConsumeOptions(endpoint=args.endpoint, topic=args.topic, group=args.group,
                          concurrency=args.concurrency, batch=args.batch, duration=args.duration,
                          idle_stop_s=args.idle_stop)
    summary = asyncio.run(run_consume_load(opts, ready_line=args.ready_line)).summary()
    print(json.dumps(summary) if args.json else format_summary("consumer", summary, "end-to-end"))
    return 0
