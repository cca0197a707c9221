"""The send load of `bench producer` and `bench baseline`: SendMessage requests over grpc.aio.

Modelled on RocketMQ's benchmark Producer: a fixed message size, a number of requests in flight
(concurrency), messages per request (batch), an optional rate limit, for a fixed duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from orbitmq.auth.signature import grpc_auth_headers, grpc_date_time
from orbitmq.bench.stats import Stats
from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc

OK = pb.Code.OK
MAX_GC_FREE_SECONDS = 300.0
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
                   ("grpc.max_send_message_length", 64 * 1024 * 1024)]


@dataclass
class LoadOptions:
    endpoint: str = "127.0.0.1:8081"
    topic: str = "OrbitBench"
    size: int = 1024
    concurrency: int = 16
    batch: int = 1
    duration: float = 10.0
    rate: float = 0.0  # messages per second, 0 = as fast as possible
    tag: str = "bench"
    credentials: tuple[str, str] | None = None  # ACL 2.0 (AccessKey, SecretKey): every request signed
    # gRPC connections the in-flight requests are spread over: one client process holds one, so
    # `orbitmq proxy --workers N` (one worker per connection) is measured with several
    connections: int = 1


def client_metadata(kind: str = "bench") -> list[tuple[str, str]]:
    return [("x-mq-client-id", f"{kind}-{uuid.uuid4().hex[:12]}"), ("x-mq-language", "PYTHON"),
            ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "v2")]


def signed_metadata(base: list[tuple[str, str]], credentials: tuple[str, str] | None) -> Callable[[], list]:
    """The metadata of the next request: ``base``, plus (with credentials) the signature headers
    as the official clients send them, computed again only when x-mq-date-time's second changes."""
    if credentials is None:
        return lambda: base
    cache: list[Any] = [None, base]

    def current() -> list[tuple[str, str]]:
        stamp = grpc_date_time()
        if stamp != cache[0]:
            cache[0], cache[1] = stamp, base + grpc_auth_headers(*credentials, stamp)
        return cache[1]

    return current


def build_request(opts: LoadOptions, body: bytes) -> spb.SendMessageRequest:
    """One SendMessage request of ``batch`` messages; born_timestamp lets consumers measure latency."""
    now_ms = int(time.time() * 1000)
    messages = []
    for _ in range(opts.batch):
        sysp = pb.SystemProperties(message_id=create_uniq_id(), tag=opts.tag, message_type=pb.MessageType.NORMAL,
                                   body_encoding=pb.Encoding.IDENTITY)
        sysp.born_timestamp.FromMilliseconds(now_ms)
        messages.append(pb.Message(topic=pb.Resource(name=opts.topic), body=body, system_properties=sysp))
    return spb.SendMessageRequest(messages=messages)


async def run_send_load(opts: LoadOptions) -> Stats:
    """Send for ``opts.duration``; RT is measured per request from the moment it is sent.

    With a rate, requests are started on a fixed schedule (open loop, one slot every
    batch/rate seconds) and how late each start was is recorded (asyncio timers wake up to about
    1 ms late), so a reader can tell a late load generator from a slow server. The collector is
    off while measuring (runs up to 5 minutes): a GC pause here would show up as server latency.
    """
    stats = Stats()
    body = os.urandom(opts.size)
    metadata = signed_metadata(client_metadata("bench-producer"), opts.credentials)
    if opts.connections < 1:
        raise ValueError(f"--connections must be at least 1, got {opts.connections}")
    # Each channel its own subchannel pool, hence its own TCP connection (grpc shares them otherwise).
    options = CHANNEL_OPTIONS + ([("grpc.use_local_subchannel_pool", 1)] if opts.connections > 1 else [])
    async with contextlib.AsyncExitStack() as channels:
        stubs = [sgrpc.MessagingServiceStub(await channels.enter_async_context(
            grpc.aio.insecure_channel(opts.endpoint, options=options))) for _ in range(opts.connections)]
        # Warm each connection and the proxy's route cache outside the measurement.
        for stub in stubs:
            warm = await stub.SendMessage(build_request(opts, body), metadata=metadata(), timeout=10)
            if warm.status.code != pb.Code.OK:
                raise RuntimeError(
                    f"send to {opts.topic} failed: {pb.Code.Name(warm.status.code)} {warm.status.message}")
        stats.warmup_messages = opts.batch * len(stubs)  # stored, but outside the timed count
        loop = asyncio.get_running_loop()
        interval = opts.batch / opts.rate if opts.rate > 0 else 0.0
        slot = 0
        latencies = stats.latencies_ms
        start_lags = stats.start_lags_ms
        perf = time.perf_counter

        async def worker(send: Callable[..., Any]) -> None:
            nonlocal slot
            while True:
                if interval:
                    due = start + slot * interval
                    slot += 1
                    if due >= end:
                        return
                    delay = due - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    start_lags.append((loop.time() - due) * 1000)
                elif loop.time() >= end:
                    return
                request = build_request(opts, body)
                t0 = perf()
                failure = None
                try:
                    response = await send(request, metadata=metadata(), timeout=10)
                    if response.status.code != OK:
                        failure = f"{pb.Code.Name(response.status.code)}: {response.status.message}"
                except grpc.aio.AioRpcError as exc:
                    failure = f"gRPC {exc.code().name}: {exc.details()}"
                latencies.append((perf() - t0) * 1000)
                stats.requests += 1
                if failure is None:
                    stats.messages += opts.batch
                else:
                    stats.add_error(failure)

        # Long-lived objects out of the collector's way; the collector itself paused for runs
        # short enough that the garbage it would have reclaimed cannot matter.
        gc.collect()
        gc.freeze()
        if opts.duration <= MAX_GC_FREE_SECONDS:
            gc.disable()
        try:
            start = loop.time()
            end = start + opts.duration
            await asyncio.gather(*(worker(stubs[i % len(stubs)].SendMessage) for i in range(opts.concurrency)))
            stats.elapsed_s = loop.time() - start
        finally:
            gc.enable()
            gc.unfreeze()
    return stats


def add_load_arguments(parser) -> None:
    parser.add_argument("--endpoint", default="127.0.0.1:8081", help="proxy gRPC endpoint")
    parser.add_argument("-t", "--topic", default="OrbitBench")
    parser.add_argument("-s", "--size", type=int, default=1024, help="message body size in bytes")
    parser.add_argument("-w", "--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("-b", "--batch", type=int, default=1, help="messages per SendMessage request")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds to run")
    parser.add_argument("-r", "--rate", type=float, default=0.0, help="messages per second (0 = unlimited)")
    parser.add_argument("-c", "--connections", type=int, default=1,
                        help="gRPC connections the requests in flight are spread over (one per client process; "
                             "several to measure `orbitmq proxy --workers N`)")


def add_comparison_arguments(parser, *, concurrency: int, duration: float, batch: bool = True,
                             rounds_help: str | None = None) -> None:
    """The flags the same-run comparisons share (bench auth, metrics, replicas, proxy-workers)."""
    parser.add_argument("-s", "--size", type=int, default=1024, help="message body size in bytes")
    parser.add_argument("-w", "--concurrency", type=int, default=concurrency, help="requests in flight")
    if batch:
        parser.add_argument("-b", "--batch", type=int, default=1, help="messages per SendMessage request")
    parser.add_argument("-d", "--duration", type=float, default=duration, help="seconds per measurement")
    if rounds_help is not None:
        parser.add_argument("-r", "--rounds", type=int, default=3, help=rounds_help)
    parser.add_argument("--json", action="store_true")


def options_from(args) -> LoadOptions:
    return LoadOptions(endpoint=args.endpoint, topic=args.topic, size=args.size, concurrency=args.concurrency,
                       batch=args.batch, duration=args.duration, rate=args.rate,
                       connections=getattr(args, "connections", 1))  # bench all's loads have no such flag
