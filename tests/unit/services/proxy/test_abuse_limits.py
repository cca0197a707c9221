"""Proxy limits against abusive gRPC clients (issue 16): long polls held, Telemetry streams and
their outboxes are bounded and answered with apache.rocketmq.v2.Code.TOO_MANY_REQUESTS."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.client_manager import TELEMETRY_OUTBOX_CAPACITY, ClientManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.service import MessagingService


class _Context:
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", self.client_id)]

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def time_remaining(self) -> float:
        return 30.0


class _SlowConsumer:
    """A long poll that holds until released."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.release = asyncio.Event()

    async def receive_message(self, ctx: Any, request: Any):
        await self.release.wait()
        yield spb.ReceiveMessageResponse(status=pb.Status(code=pb.Code.MESSAGE_NOT_FOUND))


async def _first(gen: Any) -> Any:
    async for item in gen:
        return item
    return None


async def test_long_polls_beyond_the_limit_are_answered_too_many_requests() -> None:
    config = ProxyConfig(grpc_max_long_polling_requests=4)
    consumer = _SlowConsumer(config)
    service = MessagingService(None, None, consumer, None, None)  # type: ignore[arg-type]
    held = [asyncio.create_task(_first(service.ReceiveMessage(spb.ReceiveMessageRequest(), _Context(f"c{i}"))))
            for i in range(4)]
    await asyncio.sleep(0.05)
    assert service.held_receives == 4
    refused = await asyncio.wait_for(_first(service.ReceiveMessage(spb.ReceiveMessageRequest(), _Context("x"))), 1)
    assert refused.status.code == pb.Code.TOO_MANY_REQUESTS
    consumer.release.set()
    answers = await asyncio.gather(*held)
    assert all(a.status.code == pb.Code.MESSAGE_NOT_FOUND for a in answers)
    assert service.held_receives == 0  # released: a new long poll is taken again
    consumer.release = asyncio.Event()
    consumer.release.set()
    ok = await _first(service.ReceiveMessage(spb.ReceiveMessageRequest(), _Context("y")))
    assert ok.status.code == pb.Code.MESSAGE_NOT_FOUND


def _clients(limit: int) -> ClientManager:
    return ClientManager(ProxyConfig(grpc_max_telemetry_streams=limit), SimpleNamespace())  # type: ignore[arg-type]


async def _idle_commands() -> Any:
    await asyncio.Event().wait()
    yield spb.TelemetryCommand()  # pragma: no cover


async def test_telemetry_streams_beyond_the_limit_are_refused() -> None:
    clients = _clients(3)
    service = MessagingService(None, None, None, None, clients)  # type: ignore[arg-type]
    streams = [service.Telemetry(_idle_commands(), _Context(f"c{i}")) for i in range(5)]
    firsts = [asyncio.create_task(_first(s)) for s in streams]
    await asyncio.sleep(0.05)
    assert clients.telemetry_streams == 3
    done = [t for t in firsts if t.done()]
    assert len(done) == 2 and all(t.result().status.code == pb.Code.TOO_MANY_REQUESTS for t in done)
    for task in firsts:
        task.cancel()
    await asyncio.gather(*firsts, return_exceptions=True)
    for stream in streams:
        await stream.aclose()
    assert clients.telemetry_streams == 0


async def test_one_client_id_keeps_one_stream() -> None:
    clients = _clients(100)
    service = MessagingService(None, None, None, None, clients)  # type: ignore[arg-type]
    streams = [service.Telemetry(_idle_commands(), _Context("same")) for _ in range(20)]
    firsts = [asyncio.create_task(_first(s)) for s in streams]
    await asyncio.sleep(0.05)
    # each new stream of a client ends the previous one: only the last is still open
    assert sum(not t.done() for t in firsts) == 1
    assert clients.telemetry_streams == 1
    for task in firsts:
        task.cancel()
    await asyncio.gather(*firsts, return_exceptions=True)


def test_an_outbox_that_is_not_read_ends_its_stream_instead_of_growing() -> None:
    outbox: asyncio.Queue[Any] = asyncio.Queue(TELEMETRY_OUTBOX_CAPACITY)
    offered = [ClientManager.offer(outbox, spb.TelemetryCommand()) for _ in range(TELEMETRY_OUTBOX_CAPACITY + 50)]
    assert offered.count(False) >= 1
    assert outbox.qsize() <= TELEMETRY_OUTBOX_CAPACITY
    items = [outbox.get_nowait() for _ in range(outbox.qsize())]
    assert None in items  # the stream ends at the end-of-stream marker
