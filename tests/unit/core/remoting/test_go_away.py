"""GO_AWAY: a Remoting server shutting down gracefully, and the client moving to a new connection.

In-process servers and client on loopback (orbitmq.remoting only); a round-robin TCP balancer in
front of two servers stands for the load balancer a fleet of proxies sits behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from orbitmq.remoting.channel import GO_AWAY_MIN_VERSION
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingSendRequestError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer, server_limits
from orbitmq.remoting.server_config import RemotingServerConfig
from tests.support.tcp_balancer import TcpBalancer

CODE = 9999
V4_9_8 = 399  # MQVersion.Version.V4_9_8.ordinal(): a client that does not know GO_AWAY


class Echo:
    def __init__(self, name: str) -> None:
        self.name = name
        self.served: list[bytes] = []

    async def __call__(self, request: RemotingCommand, channel: object) -> RemotingCommand:
        self.served.append(bytes(request.body))
        return request.response_to(ResponseCode.SUCCESS, self.name)


async def serve(name: str, wait: float | None) -> tuple[RemotingServer, Echo]:
    server = RemotingServer("127.0.0.1", 0, shutdown_wait_seconds=wait)
    echo = Echo(name)
    server.register(CODE, echo)
    await server.start()
    return server, echo


def request(body: bytes, version: int | None = None) -> RemotingCommand:
    cmd = RemotingCommand.request(CODE, {}, body)
    if version is not None:
        cmd.version = version
    return cmd


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


def test_keys_as_netty_server_config() -> None:
    config = RemotingServerConfig.from_mapping({})
    assert (config.enable_shutdown_gracefully, config.shutdown_wait_time_seconds) == (False, 30)
    assert server_limits(config)["shutdown_wait_seconds"] is None
    config = RemotingServerConfig.from_mapping({"enableShutdownGracefully": "true", "shutdownWaitTimeSeconds": "7"})
    assert server_limits(config)["shutdown_wait_seconds"] == 7.0


async def test_client_moves_to_the_next_server_behind_a_balancer(client: RemotingClient) -> None:
    (a, echo_a), (b, echo_b) = await serve("a", 1.5), await serve("b", None)
    balancer = await TcpBalancer([f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"]).start()
    try:
        first = await client.invoke(balancer.address, request(b"before"))
        assert first.remark == "a"
        closing = asyncio.ensure_future(a.close())
        await asyncio.sleep(0.2)
        during = await asyncio.gather(*(client.invoke(balancer.address, request(b"during-%d" % i)) for i in range(5)))
        assert [r.code for r in during] == [ResponseCode.SUCCESS] * 5
        assert {r.remark for r in during} == {"b"}  # answered by b after one reconnect, none failed
        assert echo_a.served == [b"before"]  # a ran none of them, b ran each once
        assert sorted(echo_b.served) == sorted(b"during-%d" % i for i in range(5))
        assert len(balancer.connections) == 2
        await closing
    finally:
        await balancer.close()
        await b.close()


async def test_go_away_twice_fails_the_call(client: RemotingClient) -> None:
    a, echo = await serve("a", 1.0)
    try:
        addr = f"127.0.0.1:{a.port}"
        await client.invoke(addr, request(b"warm"))
        closing = asyncio.ensure_future(a.close())
        await asyncio.sleep(0.2)
        with pytest.raises(RemotingSendRequestError, match="GO_AWAY twice"):
            await client.invoke(addr, request(b"x"))  # the new connection lands on the same server
        assert echo.served == [b"warm"]
        await closing
    finally:
        await a.close()


async def test_without_reconnect_the_call_fails_at_once(client: RemotingClient) -> None:
    client.reconnect_for_go_away = False
    a, _ = await serve("a", 1.0)
    try:
        closing = asyncio.ensure_future(a.close())
        await asyncio.sleep(0.2)
        with pytest.raises(RemotingSendRequestError, match="Receive GO_AWAY from"):
            await client.invoke(f"127.0.0.1:{a.port}", request(b"x"))
        await closing
    finally:
        await a.close()


async def test_old_clients_and_oneway_requests_are_still_served(client: RemotingClient) -> None:
    a, echo = await serve("a", 1.0)
    try:
        addr = f"127.0.0.1:{a.port}"
        closing = asyncio.ensure_future(a.close())
        await asyncio.sleep(0.2)
        old = await client.invoke(addr, request(b"old", version=V4_9_8))
        assert (old.code, old.remark) == (ResponseCode.SUCCESS, "a")
        edge = await client.invoke(addr, request(b"edge", version=GO_AWAY_MIN_VERSION))
        assert edge.code == ResponseCode.SUCCESS  # 5.3.1 itself does not know GO_AWAY
        await client.invoke_oneway(addr, request(b"oneway"))
        await asyncio.sleep(0.2)
        assert echo.served == [b"old", b"edge", b"oneway"]  # a oneway request is never dropped
        await closing
    finally:
        await a.close()


async def test_without_the_key_the_server_closes_at_once(client: RemotingClient) -> None:
    a, _ = await serve("a", None)
    addr = f"127.0.0.1:{a.port}"
    await client.invoke(addr, request(b"x"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await a.close()
    assert loop.time() - started < 1.0
