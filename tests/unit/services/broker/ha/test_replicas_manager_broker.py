"""A whole in-process broker in controller mode against the scripted controller: fenced (puts
answer 14, nothing registered with the NameServer) until the role is settled, then master as
brokerId 0 with stateVersion = masterEpoch. Also the HA port derived from listenPort."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.ha import replicas_manager as rm
from orbitmq.broker.ha.replicas_manager import State
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.common.message import properties_to_string
from orbitmq.common.route import RegisterBrokerBody
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer
from tests.support import free_port
from tests.support.net import free_port_pair
from tests.support.services import broker_conf
from tests.unit.services.broker.ha.test_replicas_manager import ScriptedController


class RecordingNameServer:
    """Answers REGISTER_BROKER and keeps (brokerId, stateVersion) of each registration."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0)
        self.registrations: list[tuple[int, int]] = []
        self.server.register(RequestCode.REGISTER_BROKER, self.handle)
        self.server.register(RequestCode.UNREGISTER_BROKER, self.handle)

    async def handle(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if request.code == RequestCode.REGISTER_BROKER:
            body = RegisterBrokerBody.decode(bytes(request.body))
            version = body.topic_config_serialize_wrapper.data_version.state_version
            self.registrations.append((int(request.ext_fields["brokerId"]), version))
        return request.response_to(ResponseCode.SUCCESS)


def _broker(root: Path, **values: str) -> BrokerController:
    conf = broker_conf(values.pop("listenPort", 0), root, **{
        "brokerClusterName": "C", "brokerName": "b", "namesrvAddr": None, "mappedFileSizeCommitLog": 1024 * 1024,
        **values})
    return BrokerController(BrokerConfig.from_mapping(conf), MessageStoreConfig.from_mapping(conf),
                            listen_host="127.0.0.1")


async def _send(client: RemotingClient, addr: str) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG", "b": "FenceTopic", "c": "TBW102", "d": "1", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string({"UNIQ_KEY": "A" * 32}),
        "j": "0", "k": "false", "m": "false"}, b"x"), 5)


async def _wait(predicate: Any, what: str, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_fenced_until_running_then_master_as_broker_id_0(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rm, "LEADER_LOOKUP_PAUSE", 0.01)
    monkeypatch.setattr(rm, "RETRY_SEQUENCE_PERIOD", 0.05)
    namesrv = RecordingNameServer()
    await namesrv.server.start()
    async with ScriptedController() as ctl:
        ctl.no_leader = True
        broker = _broker(tmp_path, enableControllerMode="true", controllerAddr=ctl.addr, brokerId="-1",
                         brokerRole="SLAVE", namesrvAddr=f"127.0.0.1:{namesrv.server.port}")
        await broker.start()
        client = RemotingClient()
        try:
            assert broker.replicas_manager.state is State.INITIAL and broker.fenced
            response = await _send(client, broker.config.broker_addr)
            assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert await broker.register_broker_all() == {}
            # Not a master (yet): no delay delivery, no POP revive.
            assert not broker.schedule_message_service._started
            assert broker.pop_service.revive_service._task is None
            await asyncio.sleep(0.2)
            assert namesrv.registrations == []

            ctl.no_leader = False  # the controller group elected its leader
            await _wait(lambda: broker.replicas_manager.state is State.RUNNING, "RUNNING")
            assert not broker.fenced
            assert broker.config.broker_id == 0 and broker.store_config.broker_role == "SYNC_MASTER"
            # The promotion's registration is sent in the background: wait for it to arrive.
            await _wait(lambda: bool(namesrv.registrations), "the master's registration")
            assert namesrv.registrations[-1] == (0, 1)  # brokerId 0, stateVersion = masterEpoch 1
            response = await _send(client, broker.config.broker_addr)
            assert response.code == ResponseCode.SUCCESS, response.remark
            # The epoch file holds the master's epoch from offset 0 (what 1007 answers).
            entries = broker.epoch_cache.all_entries()
            assert [(e.epoch, e.start_offset) for e in entries] == [(1, 0)]
            assert broker.schedule_message_service._started  # delay delivery on the master only
            revive_tasks = [t for t in asyncio.all_tasks() if t.get_name() == "PopReviveService"]
            assert len(revive_tasks) == 1
        finally:
            await client.close()
            await broker.shutdown()
    await namesrv.server.close()


async def test_ha_port_is_listen_port_plus_one_or_free_when_taken(tmp_path: Path) -> None:
    port = free_port_pair()
    broker = _broker(tmp_path / "a", listenPort=str(port))
    await broker.start()
    try:
        # A classic master runs POP revive once (not twice).
        assert len([t for t in asyncio.all_tasks() if t.get_name() == "PopReviveService"]) == 1
        assert broker.config.ha_listen_port == port + 1
        assert broker.ha_service.listen_port == port + 1
    finally:
        await broker.shutdown()
    # listenPort + 1 taken by someone else: a free port, registered as the HA address.
    blocker = socket.socket()
    for _ in range(50):  # a free port whose neighbour this test can occupy itself
        port = free_port()
        try:
            blocker.bind(("0.0.0.0", port + 1))
            break
        except OSError:
            continue
    else:
        raise AssertionError("found no free port whose neighbour was free too")
    with blocker:
        blocker.listen()
        broker = _broker(tmp_path / "b", listenPort=str(port))
        await broker.start()
        try:
            assert broker.config.ha_listen_port not in (0, port + 1)
            assert broker.config.ha_server_addr == f"127.0.0.1:{broker.ha_service.listen_port}"
        finally:
            await broker.shutdown()
        # A configured haListenPort that is taken fails the start.
        broker = _broker(tmp_path / "c", listenPort="0", haListenPort=str(port + 1))
        with pytest.raises(OSError):
            await broker.start()
        await broker.abort_start()
