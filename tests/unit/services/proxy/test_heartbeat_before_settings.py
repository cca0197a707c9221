"""A heartbeat that races its client's first Settings command (ClientManager#heartbeat): waited for,
whether or not the client's Telemetry stream is open yet, within the call's deadline."""

from __future__ import annotations

import asyncio
import time

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import client_manager
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext


class _Cluster:
    async def group_config(self, group: str) -> None:
        return None


def _ctx(client_id: str, time_remaining: float | None = None) -> ProxyContext:
    return ProxyContext(client_id, "JAVA", "5.0.8", "127.0.0.1:50000", "", time_remaining)


PRODUCER = pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")]))


async def test_a_heartbeat_waits_for_the_settings_of_an_open_stream() -> None:
    clients = ClientManager(ProxyConfig(), _Cluster())  # type: ignore[arg-type]
    clients._heartbeat_brokers = _no_brokers  # type: ignore[method-assign]
    clients.attach_stream(_ctx("c1"))
    beat = asyncio.ensure_future(clients.heartbeat(_ctx("c1"), spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)))
    await asyncio.sleep(0.1)
    assert not beat.done()
    await clients.on_settings(_ctx("c1"), PRODUCER)
    response = await asyncio.wait_for(beat, 1)
    assert response.status.code == pb.Code.OK, response.status
    assert not clients._settings_waiters


async def test_a_heartbeat_before_the_stream_opens_waits_for_it_and_its_settings() -> None:
    clients = ClientManager(ProxyConfig(), _Cluster())  # type: ignore[arg-type]
    clients._heartbeat_brokers = _no_brokers  # type: ignore[method-assign]
    beat = asyncio.ensure_future(clients.heartbeat(_ctx("c2"), spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)))
    await asyncio.sleep(0.1)
    assert not beat.done()
    clients.attach_stream(_ctx("c2"))
    await asyncio.sleep(0.05)
    assert not beat.done()  # a stream alone is not enough: the settings are what the answer needs
    await clients.on_settings(_ctx("c2"), PRODUCER)
    response = await asyncio.wait_for(beat, 1)
    assert response.status.code == pb.Code.OK, response.status
    assert not clients._settings_waiters


async def test_a_heartbeat_whose_settings_never_come_is_refused_after_the_wait(monkeypatch) -> None:
    monkeypatch.setattr(client_manager, "SETTINGS_WAIT_SECONDS", 0.2)
    clients = ClientManager(ProxyConfig(), _Cluster())  # type: ignore[arg-type]
    started = time.monotonic()
    response = await clients.heartbeat(_ctx("nobody"), spb.HeartbeatRequest())
    assert response.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    assert response.status.message == "cannot find client settings for this client"
    assert time.monotonic() - started >= 0.2
    clients.attach_stream(_ctx("silent"))  # a stream, but no Settings ever
    response = await clients.heartbeat(_ctx("silent"), spb.HeartbeatRequest())
    assert response.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    assert not clients._settings_waiters


async def test_the_wait_ends_before_the_callers_deadline() -> None:
    clients = ClientManager(ProxyConfig(), _Cluster())  # type: ignore[arg-type]
    started = time.monotonic()
    response = await clients.heartbeat(_ctx("late", time_remaining=0.5), spb.HeartbeatRequest())
    elapsed = time.monotonic() - started
    assert response.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    assert 0.25 <= elapsed < 2.0  # time_remaining less SETTINGS_WAIT_RESERVE_SECONDS (0.3 s), not 3 s
    response = await clients.heartbeat(_ctx("spent", time_remaining=0.1), spb.HeartbeatRequest())
    assert response.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE  # no time left to wait at all
    assert not clients._settings_waiters


async def _no_brokers(client: object) -> None:
    return None
