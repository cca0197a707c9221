"""Abusive gRPC clients against a real proxy process (issue 16, item 5): 2,000 idle TCP
connections and a flood of Telemetry streams, while a well-behaved client is answered throughout
and the proxy's resident memory stays under a stated bound."""

from __future__ import annotations

import asyncio
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.support import ProcessRunner, free_port

# The proxy's resident set must stay under this while it is abused.
RSS_BOUND_BYTES = 300 * 1024 * 1024
TELEMETRY_LIMIT = 200


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
    runner = ProcessRunner(workdir)
    try:
        ns_port, broker_port, proxy_port = free_port(), free_port(), free_port()
        namesrv = f"127.0.0.1:{ns_port}"
        runner.start("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={workdir / 'kv.json'}"],
                     ready_port=ns_port, name="namesrv")
        conf = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerIP1": "127.0.0.1",
                "listenPort": broker_port, "storePathRootDir": str(workdir / "store"), "namesrvAddr": namesrv,
                "mappedFileSizeCommitLog": 4 * 1024 * 1024}
        conf_path = workdir / "broker.conf"
        conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), encoding="utf-8")
        runner.start("broker", ["-c", str(conf_path)], ready_port=broker_port, ready_text="boot success",
                     name="broker", timeout=30)
        proc = runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "autoCreateTopicEnable=true",
                                      f"grpcMaxTelemetryStreams={TELEMETRY_LIMIT}"],
                            ready_port=proxy_port, name="proxy")
        yield f"127.0.0.1:{proxy_port}", proc.pid
    except BaseException:
        print("\n===== service logs =====\n" + runner.report(), file=sys.stderr)
        raise
    finally:
        runner.stop_all()


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
        settings = spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER))
        await fresh.write(settings)
        reply = await asyncio.wait_for(fresh.read(), 10)
        assert reply.status.code != pb.Code.TOO_MANY_REQUESTS
        fresh.cancel()
