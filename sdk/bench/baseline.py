"""`orbitmq bench baseline`: the same SendMessage load against a bare grpc.aio echo server.

The server answers each request with one OK entry per message and does nothing else, so its
throughput is the ceiling of gRPC + protobuf in Python on this machine; the proxy's figure is
reported as a ratio of it. The server runs in its own process, like the proxy does.

For the end-to-end shape the same server is also a relay: once a ReceiveMessage has asked for a
topic, the messages later sent to it are kept in memory and handed to ReceiveMessage calls
(status, messages, delivery timestamp, as the proxy streams them) and AckMessage answers OK.
No store, no broker, no conversion: what the same producer and consumer measure through it is
the floor of an end-to-end run of Python gRPC on this machine. Topics nobody receives from are
only echoed, so the throughput runs keep nothing. Drained from the relay, a stored backlog shows
what a receive + ack drain costs Python gRPC alone (``run_relay_drain``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence

import grpc

from orbitmq.bench.drain import DrainResult, drain, fill_and_drain
from orbitmq.bench.load import CHANNEL_OPTIONS, add_load_arguments, options_from, run_send_load
from orbitmq.bench.stats import format_summary
from orbitmq.common.runtime import freeze_startup_objects
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc

RELAY_RECEIPT_HANDLE = "relay"


class RelayTopic:
    """The messages sent to one topic since a consumer first asked for it, in arrival order."""

    def __init__(self) -> None:
        self.messages: deque[pb.Message] = deque()
        self.waiters: deque[asyncio.Future[None]] = deque()

    def put(self, messages) -> None:
        self.messages.extend(messages)
        # Wake as many long polls as there are messages: each takes what is there when it runs.
        for _ in range(min(len(messages), len(self.waiters))):
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def take(self, max_count: int, timeout_s: float) -> list[pb.Message]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.messages:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            waiter = loop.create_future()
            self.waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return []
            finally:
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
        messages = self.messages
        return [messages.popleft() for _ in range(min(max_count, len(messages)))]


class EchoService(sgrpc.MessagingServiceServicer):
    def __init__(self) -> None:
        self.relayed: dict[str, RelayTopic] = {}

    async def SendMessage(self, request, context):
        ok = pb.Status(code=pb.Code.OK, message="OK")
        messages = request.messages
        entries = [spb.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=i)
                   for i, m in enumerate(messages)]
        if messages and self.relayed:
            relay = self.relayed.get(messages[0].topic.name)
            if relay is not None:
                relay.put(messages)
        return spb.SendMessageResponse(status=ok, entries=entries)

    async def ReceiveMessage(self, request, context) -> AsyncIterator[spb.ReceiveMessageResponse]:
        topic = request.message_queue.topic.name
        relay = self.relayed.get(topic)
        if relay is None:
            relay = self.relayed[topic] = RelayTopic()
        timeout_s = request.long_polling_timeout.ToMilliseconds() / 1000 if request.HasField(
            "long_polling_timeout") else 20.0
        messages = await relay.take(max(1, request.batch_size), timeout_s)
        if not messages:
            yield spb.ReceiveMessageResponse(status=pb.Status(code=pb.Code.MESSAGE_NOT_FOUND, message="no new message"))
        else:
            yield spb.ReceiveMessageResponse(status=pb.Status(code=pb.Code.OK, message="OK"))
            for message in messages:
                response = spb.ReceiveMessageResponse()
                response.message.CopyFrom(message)
                response.message.system_properties.receipt_handle = RELAY_RECEIPT_HANDLE
                yield response
        last = spb.ReceiveMessageResponse()
        last.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield last

    async def AckMessage(self, request, context):
        ok = pb.Status(code=pb.Code.OK, message="OK")
        entries = [spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok)
                   for e in request.entries]
        return spb.AckMessageResponse(status=ok, entries=entries)


ECHO_READY = "baseline echo server on"


async def serve(port: int) -> None:
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    sgrpc.add_MessagingServiceServicer_to_server(EchoService(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    freeze_startup_objects()  # as every server entry point does (orbitmq.common.runtime)
    print(f"{ECHO_READY} 127.0.0.1:{bound}", flush=True)
    await server.wait_for_termination()


def start_server_process() -> tuple[subprocess.Popen, str]:
    """Run the echo server in a child process; returns (process, endpoint)."""
    proc = subprocess.Popen([sys.executable, "-m", "orbitmq", "bench", "baseline", "--serve", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if ECHO_READY not in line:
        proc.kill()
        proc.wait()
        raise RuntimeError("baseline echo server did not start")
    return proc, line.rsplit(" ", 1)[1].strip()


def stop_server_process(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_baseline(args) -> dict[str, float]:
    proc, endpoint = start_server_process()
    try:
        time.sleep(0.2)
        opts = options_from(args)
        opts.endpoint = endpoint
        return asyncio.run(run_send_load(opts)).summary()
    finally:
        stop_server_process(proc)


async def _relay_fill_and_drain(endpoint: str, messages: int, size: int) -> DrainResult:
    topic, group = "OrbitBenchRelayDrain", "OrbitBenchRelayDrainGroup"
    # The relay keeps a topic's messages only once a consumer has asked for it.
    await drain(endpoint, topic, group, expected=1, concurrency=1, idle_stop_s=0.05, polling_ms=50)
    return await fill_and_drain(endpoint, topic, group, messages, size)


def run_relay_drain(messages: int, size: int = 1024) -> dict:
    """The drain of ``bench drain`` (fill, then receive + batched ack) from the echo's in-memory
    relay: no store, no broker, no conversion; the same protocol shape served by Python gRPC alone."""
    proc, endpoint = start_server_process()
    try:
        time.sleep(0.2)
        return asyncio.run(_relay_fill_and_drain(endpoint, messages, size)).summary()
    finally:
        stop_server_process(proc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench baseline", description=__doc__)
    add_load_arguments(parser)
    parser.add_argument("--serve", type=int, metavar="PORT", help="only run the echo server (0 = any port)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    if args.serve is not None:
        try:
            asyncio.run(serve(args.serve))
        except KeyboardInterrupt:
            pass
        return 0
    summary = run_baseline(args)
    print(json.dumps(summary) if args.json else format_summary(
        f"baseline (bare grpc.aio echo) size={args.size} batch={args.batch} concurrency={args.concurrency}", summary))
    return 0
