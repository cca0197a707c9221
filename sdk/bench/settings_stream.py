"""The Telemetry stream a simple consumer holds open, for the benchmarks' raw gRPC receive loops.

Apache's proxy answers a ReceiveMessage whose client has sent no Settings over Telemetry with
INTERNAL_SERVER_ERROR ("settings" is null: ReceiveMessageActivity#receiveMessage reads them from
GrpcClientSettingsManager#getClientSettings by client id). OrbitMQ's proxy receives without them.
A loop measured against both opens this first, with the metadata (client id) its receives carry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proto.pool import Duration


def _duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


@contextlib.asynccontextmanager
async def consumer_settings(channel: grpc.aio.Channel, metadata: list[tuple[str, str]], group: str, topic: str,
                            polling_ms: int = 1_000, timeout: float = 10.0) -> AsyncIterator[None]:  # noqa: ASYNC109
    """Send SIMPLE_CONSUMER Settings of ``group`` on ``topic`` and keep the stream open inside the
    block; returns once the proxy answered them (or after ``timeout``)."""
    settings = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER, request_timeout=_duration(int(timeout * 1000)),
        subscription=pb.Subscription(
            group=pb.Resource(name=group), long_polling_timeout=_duration(polling_ms),
            subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=topic), expression=pb.FilterExpression(
                type=pb.FilterType.TAG, expression="*"))]),
        user_agent=pb.UA(language=pb.Language.PYTHON, version="5.1.2"))
    closed = asyncio.Event()

    async def commands() -> AsyncIterator[spb.TelemetryCommand]:
        yield spb.TelemetryCommand(settings=settings)
        await closed.wait()

    call = sgrpc.MessagingServiceStub(channel).Telemetry(commands(), metadata=metadata)
    answered = asyncio.Event()

    async def read() -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            async for _command in call:
                answered.set()

    reader = asyncio.create_task(read())
    try:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(answered.wait(), timeout)
        yield
    finally:
        closed.set()
        call.cancel()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
