"""RemotingClient's in-flight limit: free slots are taken at once, a full client waits then fails."""

import asyncio

import pytest

from orbitmq.remoting import (
    Channel,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RequestCode,
    ResponseCode,
)
from orbitmq.remoting.errors import RemotingTooMuchRequestError

SLEEP = RequestCode.GET_MAX_OFFSET


async def _sleep(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    await asyncio.sleep(float(request.ext_fields["sleep"]))
    return request.response_to(ResponseCode.SUCCESS)


def _req(sleep: float) -> RemotingCommand:
    return RemotingCommand.request(SLEEP, {"sleep": str(sleep)})


@pytest.fixture
async def addr():
    srv = RemotingServer()
    srv.register(SLEEP, _sleep)
    await srv.start()
    yield f"127.0.0.1:{srv.port}"
    await srv.close()


async def test_full_client_rejects_then_frees_every_slot(addr):
    client = RemotingClient(max_in_flight=2)
    try:
        held = [asyncio.create_task(client.invoke(addr, _req(0.5), timeout=3.0)) for _ in range(2)]
        await asyncio.sleep(0)  # one step: a free slot is taken before the first suspension
        assert client._in_flight.locked()
        with pytest.raises(RemotingTooMuchRequestError, match="too many requests in flight"):
            await client.invoke(addr, _req(0), timeout=0.05)
        for resp in await asyncio.gather(*held):
            assert resp.code == ResponseCode.SUCCESS
        # Every slot came back, including the one of the rejected request.
        assert client._in_flight._value == 2
        resp = await client.invoke(addr, _req(0), timeout=3.0)
        assert resp.code == ResponseCode.SUCCESS
        assert client._in_flight._value == 2
    finally:
        await client.close()


async def test_waiter_gets_the_slot_a_finished_request_frees(addr):
    client = RemotingClient(max_in_flight=1)
    try:
        first = asyncio.create_task(client.invoke(addr, _req(0.2), timeout=3.0))
        await asyncio.sleep(0)  # one step: a free slot is taken before the first suspension
        assert client._in_flight.locked()
        second = await client.invoke(addr, _req(0), timeout=3.0)
        assert second.code == ResponseCode.SUCCESS
        assert (await first).code == ResponseCode.SUCCESS
        assert client._in_flight._value == 1
    finally:
        await client.close()
