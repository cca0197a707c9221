"""A small asyncio client of the proxy's MessagingService for failover benchmarks and chaos tests.

Sends one message per request (so each acknowledgement names exactly one message), receives
through ReceiveMessage (POP) and acks. It reports outcomes instead of raising, because callers
keep going through a failover and count what happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from orbitmq.bench.load import CHANNEL_OPTIONS, client_metadata
from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proto.pool import Duration

OK = pb.Code.OK
# Where the key of a message travels: a user property the checker reads back on delivery.
KEY_PROPERTY = "chaosKey"


@dataclass
class SendOutcome:
    """One SendMessage: ``message_id`` when acknowledged (OK), else ``error`` says why."""

    key: str
    message_id: str | None
    error: str | None
    latency_s: float


@dataclass
class Delivery:
    """One delivered message: its key, id, group, queue and receipt handle (for the ack)."""

    key: str
    message_id: str
    group: str
    receipt_handle: str
    queue_offset: int


def _duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


class ProxyClient:
    """One gRPC channel to a proxy; ``async with ProxyClient(endpoint) as c``."""

    def __init__(self, endpoint: str, request_timeout: float = 10.0) -> None:
        self.endpoint = endpoint
        self.request_timeout = request_timeout
        self.metadata = client_metadata("chaos")
        self._channel: grpc.aio.Channel | None = None
        self._stub: sgrpc.MessagingServiceStub | None = None

    async def __aenter__(self) -> ProxyClient:
        self._channel = grpc.aio.insecure_channel(self.endpoint, options=CHANNEL_OPTIONS)
        self._stub = sgrpc.MessagingServiceStub(self._channel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    @property
    def stub(self) -> sgrpc.MessagingServiceStub:
        if self._stub is None:
            raise RuntimeError("ProxyClient is not open: use `async with`")
        return self._stub

    async def send(self, topic: str, key: str, body: bytes | None = None, group: str | None = None) -> SendOutcome:
        """Send one message carrying ``key`` (user property and message key); FIFO when ``group``."""
        sysp = pb.SystemProperties(message_id=create_uniq_id(), keys=[key],
                                   message_type=pb.MessageType.FIFO if group else pb.MessageType.NORMAL,
                                   body_encoding=pb.Encoding.IDENTITY)
        if group:
            sysp.message_group = group
        sysp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
        message = pb.Message(topic=pb.Resource(name=topic), body=body if body is not None else key.encode(),
                             user_properties={KEY_PROPERTY: key}, system_properties=sysp)
        started = time.monotonic()
        try:
            response = await self.stub.SendMessage(spb.SendMessageRequest(messages=[message]),
                                                   metadata=self.metadata, timeout=self.request_timeout)
        except grpc.aio.AioRpcError as exc:
            return SendOutcome(key, None, f"gRPC {exc.code().name}: {exc.details()}", time.monotonic() - started)
        elapsed = time.monotonic() - started
        if response.status.code != OK or not response.entries:
            return SendOutcome(key, None, f"{pb.Code.Name(response.status.code)}: {response.status.message}", elapsed)
        return SendOutcome(key, response.entries[0].message_id, None, elapsed)

    async def receive(self, topic: str, group: str, batch: int = 16, invisible_ms: int = 10_000,
                      polling_ms: int = 1_000) -> tuple[list[Delivery], str | None]:
        """One ReceiveMessage: (deliveries, error or None)."""
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            batch_size=batch, invisible_duration=_duration(invisible_ms), long_polling_timeout=_duration(polling_ms))
        out: list[Delivery] = []
        error = None
        try:
            async for response in self.stub.ReceiveMessage(request, metadata=self.metadata,
                                                           timeout=polling_ms / 1000 + self.request_timeout):
                if response.HasField("status") and response.status.code not in (OK, pb.Code.MESSAGE_NOT_FOUND):
                    error = f"{pb.Code.Name(response.status.code)}: {response.status.message}"
                if response.HasField("message"):
                    m = response.message
                    sp = m.system_properties
                    out.append(Delivery(m.user_properties.get(KEY_PROPERTY, ""), sp.message_id, sp.message_group,
                                        sp.receipt_handle, sp.queue_offset))
        except grpc.aio.AioRpcError as exc:
            error = f"gRPC {exc.code().name}: {exc.details()}"
        return out, error

    async def ack(self, topic: str, group: str, deliveries: list[Delivery]) -> list[str | None]:
        """AckMessage for ``deliveries``: per delivery None (acked) or the error."""
        if not deliveries:
            return []
        request = spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=[
            spb.AckMessageEntry(message_id=d.message_id, receipt_handle=d.receipt_handle) for d in deliveries])
        try:
            response = await self.stub.AckMessage(request, metadata=self.metadata, timeout=self.request_timeout)
        except grpc.aio.AioRpcError as exc:
            return [f"gRPC {exc.code().name}: {exc.details()}"] * len(deliveries)
        by_id = {e.message_id: e.status for e in response.entries}
        out: list[str | None] = []
        for d in deliveries:
            status = by_id.get(d.message_id)
            out.append(None if status is not None and status.code == OK else
                       f"{pb.Code.Name(status.code) if status else 'MISSING'}: {status.message if status else ''}")
        return out
