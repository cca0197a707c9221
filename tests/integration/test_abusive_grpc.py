"""Abusive gRPC clients against a real proxy process (issue 16, item 5): 2,000 idle TCP
connections, a flood of Telemetry streams and a client that never reads its socket, while a
well-behaved client is answered throughout and the proxy's resident memory stays under a stated
bound."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proto.pool import Duration
from tests.support import free_port, running, start_broker, start_namesrv

# The proxy's resident set must stay under this while it is abused.
RSS_BOUND_BYTES = 300 * 1024 * 1024
TELEMETRY_LIMIT = 200
# Server keepalive pings: a connection whose client answers none is closed after about twice this.
KEEPALIVE_MS = 2000


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(8192, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 4500:
        pytest.skip("cannot raise RLIMIT_NOFILE")
    workdir: Path = tmp_path_factory.mktemp("abusive-grpc")
    with running(workdir) as runner:
        proxy_port = free_port()
        _, namesrv = start_namesrv(runner, name="namesrv")
        start_broker(runner, workdir, namesrv)
        proc = runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "autoCreateTopicEnable=true",
                                      f"grpcMaxTelemetryStreams={TELEMETRY_LIMIT}",
                                      f"grpcKeepaliveTimeMillis={KEEPALIVE_MS}",
                                      f"grpcKeepaliveTimeoutMillis={KEEPALIVE_MS}"],
                            ready_port=proxy_port, name="proxy")
        yield f"127.0.0.1:{proxy_port}", proc.pid


def _md(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


async def _query_route(stub: sgrpc.MessagingServiceStub) -> None:
    request = spb.QueryRouteRequest(topic=pb.Resource(name="AbuseTopic"))
    response = await stub.QueryRoute(request, metadata=_md("good-client"), timeout=10)
    assert response.status.code == pb.Code.OK, response.status


async def test_two_thousand_idle_connections(proxy: tuple[str, int]) -> None:
    endpoint, pid = proxy
    host, port = endpoint.rsplit(":", 1)
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        await _query_route(stub)
        conns = []
        try:
            for _ in range(20):
                conns += await asyncio.gather(*(asyncio.open_connection(host, int(port)) for _ in range(100)))
                await _query_route(stub)
            assert len(conns) == 2000
            await asyncio.sleep(1)
            await _query_route(stub)
            assert _rss(pid) < RSS_BOUND_BYTES
        finally:
            for _, writer in conns:
                writer.close()
        await _query_route(stub)


async def test_a_flood_of_telemetry_streams(proxy: tuple[str, int]) -> None:
    endpoint, pid = proxy
    async with grpc.aio.insecure_channel(endpoint) as good, grpc.aio.insecure_channel(endpoint) as bad:
        stub = sgrpc.MessagingServiceStub(good)
        flood = sgrpc.MessagingServiceStub(bad)
        calls = [flood.Telemetry(metadata=_md(f"flood-{i}")) for i in range(TELEMETRY_LIMIT + 300)]
        firsts: list[asyncio.Future] = []
        try:
            # which streams the proxy takes depends on the order it sees them: any 200 stay open,
            # the other 300 are answered TOO_MANY_REQUESTS at once
            firsts = [asyncio.ensure_future(call.read()) for call in calls]
            for _ in range(600):
                if sum(f.done() for f in firsts) >= len(calls) - TELEMETRY_LIMIT:
                    break
                await asyncio.sleep(0.1)
                if _ % 20 == 0:
                    await _query_route(stub)  # answered throughout
            await asyncio.sleep(0.3)
            answered = [f.result() for f in firsts if f.done()]
            assert len(answered) == len(calls) - TELEMETRY_LIMIT
            assert all(a.status.code == pb.Code.TOO_MANY_REQUESTS for a in answered), answered[:3]
            # the same client id opening stream after stream keeps one: the older ones end
            # (which one survives depends on the order the proxy sees them: the last attached)
            open_id = f"flood-{next(i for i, f in enumerate(firsts) if not f.done())}"  # an accepted one
            same = [flood.Telemetry(metadata=_md(open_id)) for _ in range(20)]
            reads = [asyncio.ensure_future(call.read()) for call in same]
            for _ in range(200):  # until 19 have ended (the 20th stays open)
                if sum(r.done() for r in reads) >= 19:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.2)  # and no 20th ends
            ended = [r for r in reads if r.done() and r.result() is grpc.aio.EOF]
            assert len(ended) == 19, [r.result() if r.done() else "open" for r in reads]
            for call in same:
                call.cancel()
            await asyncio.gather(*reads, return_exceptions=True)
            await _query_route(stub)
            assert _rss(pid) < RSS_BOUND_BYTES
        finally:
            for call in calls:
                call.cancel()
            await asyncio.gather(*firsts, return_exceptions=True)
        await asyncio.sleep(0.5)
        # the streams were closed: the limit counts open streams, so new ones are accepted again
        fresh = flood.Telemetry(metadata=_md("fresh"))
        settings = spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing()))
        await fresh.write(settings)
        reply = await asyncio.wait_for(fresh.read(), 10)
        assert reply.status.code != pb.Code.TOO_MANY_REQUESTS
        fresh.cancel()


# ---- a client that never reads -------------------------------------------------------------------
# HTTP/2 spoken by hand, so that nothing reads the socket behind the test's back (a gRPC client
# library would, answering pings and granting flow-control window as it goes).

def _h2_frame(frame_type: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((frame_type, flags)) + stream_id.to_bytes(4, "big") + payload


def _hpack_literal(name: str, value: str) -> bytes:
    """A header field as HPACK's "literal without indexing, new name" (both strings under 127 bytes)."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes((len(n),)) + n + bytes((len(v),)) + v


def _h2_receive_requests(authority: str, topic: str, group: str, streams: int) -> bytes:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=32, invisible_duration=Duration(seconds=10), long_polling_timeout=Duration(seconds=5))
    body = request.SerializeToString()
    grpc_message = b"\x00" + len(body).to_bytes(4, "big") + body
    headers = b"".join(_hpack_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", "/apache.rocketmq.v2.MessagingService/ReceiveMessage"),
        (":authority", authority), ("content-type", "application/grpc"), ("te", "trailers"),
        ("x-mq-client-id", "never-reads"), ("x-mq-language", "PYTHON")))
    out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2_frame(0x4, 0, 0) + _h2_frame(0x4, 0x1, 0)  # SETTINGS, its ACK
    for i in range(streams):
        stream_id = 2 * i + 1
        out += _h2_frame(0x1, 0x4, stream_id, headers)  # HEADERS, END_HEADERS
        out += _h2_frame(0x0, 0x1, stream_id, grpc_message)  # DATA, END_STREAM
    return out


async def test_a_client_that_never_reads_is_closed_and_its_messages_come_back(proxy: tuple[str, int]) -> None:
    """20 ReceiveMessage streams on one connection whose client never reads: HTTP/2 flow control
    lets the proxy send at most a window's worth, the keepalive ping goes unanswered and the
    connection is closed, and what those streams popped is received by a good consumer."""
    endpoint, pid = proxy
    host, port = endpoint.rsplit(":", 1)
    topic, group, count, size = "NeverReadsTopic", "NeverReadsGroup", 96, 64 * 1024
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        for start in range(0, count, 16):
            request = spb.SendMessageRequest(messages=[pb.Message(
                topic=pb.Resource(name=topic), body=f"{i:04d}".encode() + bytes(size - 4),
                system_properties=pb.SystemProperties(message_id=f"NEVERREADS{i:06d}", body_encoding=pb.Encoding.IDENTITY,
                                                      message_type=pb.MessageType.NORMAL))
                for i in range(start, start + 16)])
            response = await stub.SendMessage(request, metadata=_md("good-client"), timeout=10)
            assert response.status.code == pb.Code.OK, response.status

        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(_h2_receive_requests(endpoint, topic, group, streams=20))
            await writer.drain()
            rss_before = _rss(pid)
            for _ in range(6):  # the proxy answers everyone else meanwhile, within its memory bound
                await asyncio.sleep(0.5)
                await _query_route(stub)
                assert _rss(pid) < RSS_BOUND_BYTES
            # Now read, for the first time: a window's worth of frames at most, then the close.
            received = 0
            async with asyncio.timeout(8 * KEEPALIVE_MS / 1000 + 20):
                while chunk := await reader.read(65536):
                    received += len(chunk)
            assert received < 4 * 65535 + 64 * 1024, received  # the flow-control windows, plus headers and pings
            print(f"proxy RSS {rss_before / 2**20:.0f} MiB -> {_rss(pid) / 2**20:.0f} MiB; {received} bytes sent "
                  f"to the client that never read before it was closed")
        finally:
            writer.close()

        # Whatever those streams popped becomes visible again: a well-behaved consumer gets all of it.
        got: dict[str, spb.ReceiveMessageResponse] = {}
        async with asyncio.timeout(60):
            while len(got) < count:
                request = spb.ReceiveMessageRequest(
                    group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
                    filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=32,
                    invisible_duration=Duration(seconds=30), long_polling_timeout=Duration(seconds=5))
                async for response in stub.ReceiveMessage(request, metadata=_md("good-client"), timeout=20):
                    if response.HasField("message"):
                        m = response.message
                        got.setdefault(m.body[:4].decode(), m)
                        ack = spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                                    entries=[spb.AckMessageEntry(
                                                        message_id=m.system_properties.message_id,
                                                        receipt_handle=m.system_properties.receipt_handle)])
                        assert (await stub.AckMessage(ack, metadata=_md("good-client"), timeout=10)).status.code \
                            == pb.Code.OK
        assert sorted(got) == [f"{i:04d}" for i in range(count)]
