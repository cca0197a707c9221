"""RemotingServer + RemotingClient over real sockets on 127.0.0.1."""

import asyncio
import random

import pytest

from orbitmq.remoting import (
    Channel,
    RemotingClient,
    RemotingCommand,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingServer,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
    SerializeType,
)

ECHO = RequestCode.QUERY_MESSAGE
SLEEP = RequestCode.GET_MAX_OFFSET
BOOM = RequestCode.GET_MIN_OFFSET
ONEWAY = RequestCode.UNREGISTER_CLIENT
CALLBACK = RequestCode.HEART_BEAT


async def _echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    await asyncio.sleep(random.uniform(0, 0.02))
    return request.response_to(ResponseCode.SUCCESS, ext_fields={"n": request.ext_fields["n"]},
                               body=request.body)


async def _sleep(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    await asyncio.sleep(float(request.ext_fields["sleep"]))
    return request.response_to(ResponseCode.SUCCESS)


async def _boom(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    raise ValueError("disk on fire")


@pytest.fixture
async def server():
    srv = RemotingServer()
    srv.register(ECHO, _echo)
    srv.register(SLEEP, _sleep)
    srv.register(BOOM, _boom)
    await srv.start()
    yield srv
    await srv.close()


@pytest.fixture
async def client():
    c = RemotingClient(connect_timeout=1.0)
    yield c
    await c.close()


def _addr(srv: RemotingServer) -> str:
    return f"127.0.0.1:{srv.port}"


@pytest.mark.parametrize("serialize_type", list(SerializeType))
async def test_thousand_concurrent_requests_matched_by_opaque(server, client, serialize_type):
    async def one(n: int) -> None:
        req = RemotingCommand.request(ECHO, {"n": str(n)}, f"body-{n}".encode(), serialize_type=serialize_type)
        resp = await client.invoke(_addr(server), req, timeout=10)
        assert resp.code == ResponseCode.SUCCESS and resp.opaque == req.opaque
        assert resp.ext_fields["n"] == str(n) and resp.body == f"body-{n}".encode()
        assert resp.serialize_type is serialize_type and resp.is_response

    await asyncio.gather(*(one(n) for n in range(1000)))
    assert len(server.channels) == 1  # all multiplexed on one connection


async def test_timeout_keeps_connection_usable(server, client):
    req = RemotingCommand.request(SLEEP, {"sleep": "0.5"})
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(_addr(server), req, timeout=0.1)
    resp = await client.invoke(_addr(server), RemotingCommand.request(ECHO, {"n": "1"}), timeout=3)
    assert resp.code == ResponseCode.SUCCESS
    await asyncio.sleep(0.5)  # the late reply arrives and is dropped quietly
    resp = await client.invoke(_addr(server), RemotingCommand.request(ECHO, {"n": "2"}), timeout=3)
    assert resp.ext_fields["n"] == "2" and len(server.channels) == 1


async def test_oneway_runs_without_reply(server, client):
    seen = asyncio.Event()
    replies_sent = []

    async def oneway(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        seen.set()
        replies_sent.append(request.opaque)
        return request.response_to(ResponseCode.SUCCESS)  # must be discarded: the request is oneway

    server.register(ONEWAY, oneway)
    req = RemotingCommand.request(ONEWAY, {"clientID": "c1"})
    await client.invoke_oneway(_addr(server), req)
    await asyncio.wait_for(seen.wait(), 3)
    assert req.is_oneway
    channel = await client.get_channel(_addr(server))
    assert channel._response_table == {}
    # the connection still answers normally, so no stray response confused it
    resp = await client.invoke(_addr(server), RemotingCommand.request(ECHO, {"n": "x"}))
    assert resp.ext_fields["n"] == "x" and replies_sent == [req.opaque]


async def test_unknown_code_and_processor_exception(server, client):
    resp = await client.invoke(_addr(server), RemotingCommand.request(RequestCode.POP_MESSAGE))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "not supported" in resp.remark
    resp = await client.invoke(_addr(server), RemotingCommand.request(BOOM))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "disk on fire" in resp.remark
    resp = await client.invoke(_addr(server), RemotingCommand.request(ECHO, {"n": "after"}))
    assert resp.code == ResponseCode.SUCCESS


async def test_server_calls_client_back_and_sees_close(server, client):
    closed = asyncio.Event()
    callback_results = []

    async def heartbeat(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        channel.on_close(lambda ch: closed.set())
        check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "M1"})
        answer = await channel.invoke(check, timeout=3)
        callback_results.append(answer.remark)
        await channel.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                            {"consumerGroup": "G"}))
        return request.response_to(ResponseCode.SUCCESS, remark=answer.remark)

    notified = asyncio.Event()

    async def check_state(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return request.response_to(ResponseCode.SUCCESS, remark=f"state of {request.ext_fields['msgId']}")

    async def notify(request: RemotingCommand, channel: Channel) -> None:
        assert request.is_oneway
        notified.set()

    server.register(CALLBACK, heartbeat)
    client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, check_state)
    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, notify)
    resp = await client.invoke(_addr(server), RemotingCommand.request(CALLBACK))
    assert resp.remark == "state of M1" and callback_results == ["state of M1"]
    await asyncio.wait_for(notified.wait(), 3)
    await client.close_channel(_addr(server))
    await asyncio.wait_for(closed.wait(), 3)


async def test_broken_connection_fails_inflight_then_reconnects_after_restart(client):
    srv = RemotingServer()
    srv.register(ECHO, _echo)
    srv.register(SLEEP, _sleep)
    await srv.start()
    port = srv.port
    addr = f"127.0.0.1:{port}"
    assert (await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "1"}))).code == 0
    pending = asyncio.create_task(client.invoke(addr, RemotingCommand.request(SLEEP, {"sleep": "5"}), timeout=10))
    await asyncio.sleep(0.1)
    await srv.close()
    with pytest.raises(RemotingSendRequestError, match="closed"):
        await asyncio.wait_for(pending, 2)  # fails at once, not after its 10 s timeout
    with pytest.raises(RemotingConnectError):
        await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "2"}))

    srv2 = RemotingServer(port=port)
    srv2.register(ECHO, _echo)
    await srv2.start()
    try:
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "3"}))
        assert resp.ext_fields["n"] == "3"
    finally:
        await srv2.close()


async def test_connect_error_for_closed_port(client):
    probe = RemotingServer()
    await probe.start()
    port = probe.port
    await probe.close()
    with pytest.raises(RemotingConnectError):
        await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO, {"n": "1"}))


async def test_overload_answers_system_busy_and_recovers(client):
    srv = RemotingServer(max_concurrent_requests=2)
    srv.register(SLEEP, _sleep)
    srv.register(ECHO, _echo)
    await srv.start()
    try:
        addr = _addr(srv)
        results = await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(SLEEP, {"sleep": "0.3"}))
                                         for _ in range(5)))
        codes = sorted(r.code for r in results)
        assert codes == [ResponseCode.SUCCESS] * 2 + [ResponseCode.SYSTEM_BUSY] * 3
        assert all("[OVERLOAD]" in r.remark for r in results if r.code == ResponseCode.SYSTEM_BUSY)
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "ok"}))
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await srv.close()


async def test_processor_returning_none_sends_nothing(server, client):
    async def silent(request: RemotingCommand, channel: Channel) -> None:
        return None

    server.register(RequestCode.GET_KV_CONFIG, silent)
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(_addr(server), RemotingCommand.request(RequestCode.GET_KV_CONFIG), timeout=0.2)
    resp = await client.invoke(_addr(server), RemotingCommand.request(ECHO, {"n": "still"}))
    assert resp.ext_fields["n"] == "still"


async def test_idle_connection_is_closed_by_server(client):
    srv = RemotingServer(channel_max_idle_seconds=0.3)
    srv.register(ECHO, _echo)
    await srv.start()
    try:
        addr = _addr(srv)
        assert (await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "1"}))).code == 0
        channel = await client.get_channel(addr)
        await asyncio.wait_for(channel.wait_closed(), 3)
        assert not srv.channels
        assert (await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "2"}))).code == 0
    finally:
        await srv.close()
