"""services/proxy/local.py: the in-process channel pair between a local-mode proxy and its broker."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from orbitmq.proxy.local import LocalRemotingClient, channel_pair
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingSendRequestError, RemotingTimeoutError
from orbitmq.remoting.processor import ProcessorTable
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer


async def test_requests_run_on_the_other_end_as_a_socket_would_deliver_them() -> None:
    broker, client = ProcessorTable(), ProcessorTable()
    seen = []

    async def send(request, channel):
        seen.append((dict(request.ext_fields), request.body, channel))
        request.ext_fields["mutated"] = "yes"  # the caller's command is not touched
        return request.response_to(ResponseCode.SUCCESS, ext_fields={"msgId": "m1"})

    broker.register(RequestCode.SEND_MESSAGE, send)
    proxy_end, broker_end = channel_pair(client, broker, "10.0.0.1:10911", "10.0.0.2:8081")
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T", "queueId": 3, "none": None},
                                      bytearray(b"body"))
    request.ext_fields["queueId"] = 3  # not a string: a socket would carry "3"
    response = await proxy_end.invoke(request, 1.0)
    assert seen == [({"topic": "T", "queueId": "3"}, b"body", broker_end)]
    assert "mutated" not in request.ext_fields
    assert response.code == ResponseCode.SUCCESS and response.is_response
    assert response.opaque == request.opaque and response.ext_fields == {"msgId": "m1"}
    assert broker_end.remote_address == "10.0.0.2:8081" and proxy_end.remote_address == "10.0.0.1:10911"
    # unknown codes: what the broker's table answers over a socket
    unknown = await proxy_end.invoke(RemotingCommand.request(9999), 1.0)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_broker_to_proxy_requests_reach_the_client_processors_with_a_timeout() -> None:
    broker, client = ProcessorTable(), ProcessorTable()
    checks = []
    never = asyncio.Event()

    async def check(request, channel):
        checks.append((request.ext_fields["transactionId"], request.is_oneway, channel))
        return None

    async def running_info(request, channel):
        await never.wait()

    client.register(RequestCode.CHECK_TRANSACTION_STATE, check)
    client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
    proxy_end, broker_end = channel_pair(client, broker, "b:1", "p:2")
    await broker_end.invoke_oneway(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"transactionId": "t"}))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert checks == [("t", True, proxy_end)]
    with pytest.raises(RemotingTimeoutError):
        await broker_end.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 0.05)


async def test_closing_one_end_closes_both_and_runs_the_listeners() -> None:
    proxy_end, broker_end = channel_pair(ProcessorTable(), ProcessorTable(), "b:1", "p:2")
    closed = []
    broker_end.on_close(closed.append)
    await proxy_end.close()
    assert closed == [broker_end] and not broker_end.is_active and not proxy_end.is_active
    with pytest.raises(RemotingSendRequestError):
        await proxy_end.invoke(RemotingCommand.request(RequestCode.HEART_BEAT), 1.0)


async def test_local_remoting_client_serves_the_broker_address_in_process() -> None:
    server = RemotingServer()
    accepted = []
    server.on_connect(accepted.append)

    async def heartbeat(request, channel):
        return request.response_to(ResponseCode.SUCCESS, remark=channel.remote_address)

    server.register(RequestCode.HEART_BEAT, heartbeat)
    broker = SimpleNamespace(config=SimpleNamespace(broker_addr="127.0.0.1:1"), remoting_server=server)
    client = LocalRemotingClient(broker, "127.0.0.1:8081")
    hooked = []
    client.rpc_hook = hooked.append  # ACL signing still applies to in-process calls
    try:
        response = await client.invoke("127.0.0.1:1", RemotingCommand.request(RequestCode.HEART_BEAT), 1.0)
        assert response.code == ResponseCode.SUCCESS and response.remark == "127.0.0.1:8081"
        assert len(hooked) == 1 and len(accepted) == 1 and server.channels == frozenset(accepted)
        await client.invoke("127.0.0.1:1", RemotingCommand.request(RequestCode.HEART_BEAT), 1.0)
        assert len(accepted) == 1  # one channel, as one pooled connection
    finally:
        await client.close()
    assert server.channels == frozenset()


def _cluster_service(local: str | None):
    from orbitmq.common.route import BrokerData, QueueData, TopicRouteData
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.proxy.config import ProxyConfig

    route = TopicRouteData([QueueData("broker-a", 2, 2, 6), QueueData("broker-b", 2, 2, 6)],
                           [BrokerData("C", "broker-a", {0: "a:1"}), BrokerData("C", "broker-b", {0: "b:1"})])
    cluster = ClusterService(ProxyConfig(), SimpleNamespace(), SimpleNamespace())  # type: ignore[arg-type]
    cluster.local_broker_name = local

    async def fixed_route(topic: str):
        return route

    cluster.route = fixed_route  # type: ignore[method-assign]
    return cluster


async def test_local_mode_sends_and_receives_on_the_local_broker_when_it_serves_the_topic() -> None:
    """LocalTopicRouteService#getCurrentMessageQueueView: the local broker's queues only."""
    cluster = _cluster_service("broker-b")
    assert {q.broker_name for q in await cluster.write_queues("T")} == {"broker-b"}
    assert {(await cluster.select_write_queue("T", "group-1")).broker_name for _ in range(4)} == {"broker-b"}
    assert await cluster.read_brokers("T") == [("broker-b", "b:1")]
    # a topic the local broker does not serve: the brokers that do, over Remoting
    elsewhere = _cluster_service("broker-x")
    assert {q.broker_name for q in await elsewhere.write_queues("T")} == {"broker-a", "broker-b"}
    assert [b for b, _ in await elsewhere.read_brokers("T")] == ["broker-a", "broker-b"]
    # cluster mode: every broker
    assert {q.broker_name for q in await _cluster_service(None).write_queues("T")} == {"broker-a", "broker-b"}
