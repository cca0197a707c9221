"""A one-node ControllerManager in process: every request code's handling, errors, elections, 1008."""

from __future__ import annotations

import asyncio
import json

import pytest

from orbitmq.controller.config import ControllerConfig
from orbitmq.controller.manager import ControllerManager
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode as Q
from orbitmq.remoting.codes import ResponseCode as RC
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer
from tests.support.net import free_port

C, B = "DefaultCluster", "broker-a"


class FakeBroker:
    """A Remoting server standing in for a broker: records NOTIFY_BROKER_ROLE_CHANGED."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0)
        self.notified: list[RemotingCommand] = []
        self.got = asyncio.Event()

    async def start(self) -> str:
        async def on_notify(request: RemotingCommand, channel) -> None:
            self.notified.append(request)
            self.got.set()
            return None

        self.server.register(Q.NOTIFY_BROKER_ROLE_CHANGED, on_notify)
        await self.server.start()
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture
async def controller(tmp_path):
    config = ControllerConfig(
        controller_d_leger_group="g", controller_d_leger_peers=f"n0-127.0.0.1:{free_port()}",
        controller_d_leger_self_id="n0", controller_store_path=str(tmp_path / "store"), listen_port=0,
        bind_address="127.0.0.1", scan_not_active_broker_interval=100, scan_inactive_master_interval=60000,
        config_store_path=str(tmp_path / "controller.properties"))
    manager = ControllerManager(config)
    await manager.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not manager.is_leader_ready():
        assert loop.time() < deadline
        await asyncio.sleep(0.05)
    client = RemotingClient()
    try:
        yield manager, client
    finally:
        await client.close()
        await manager.shutdown()


async def call(manager, client, code, fields=None, body=b""):
    return await client.invoke(manager.address, RemotingCommand.request(code, fields or {}, body))


def hb(bid: int, addr: str, timeout: int = 400, epoch: int = 1, max_offset: int = 0) -> RemotingCommand:
    request = RemotingCommand.request(Q.BROKER_HEARTBEAT, {
        "clusterName": C, "brokerName": B, "brokerAddr": addr, "brokerId": str(bid), "epoch": str(epoch),
        "maxOffset": str(max_offset), "confirmOffset": "0", "heartbeatTimeoutMills": str(timeout)})
    return request


async def register(manager, client, bid: int, addr: str) -> None:
    r = await call(manager, client, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
    assert r.code == RC.SUCCESS and r.ext_fields["nextBrokerId"] == str(bid)
    r = await call(manager, client, Q.CONTROLLER_APPLY_BROKER_ID, {
        "clusterName": C, "brokerName": B, "appliedBrokerId": str(bid), "registerCheckCode": f"{addr};123"})
    assert r.code == RC.SUCCESS, r.remark
    r = await call(manager, client, Q.CONTROLLER_REGISTER_BROKER, {
        "clusterName": C, "brokerName": B, "brokerId": str(bid), "brokerAddress": addr})
    assert r.code == RC.SUCCESS, r.remark


async def test_metadata_and_errors(controller):
    manager, client = controller
    r = await call(manager, client, Q.CONTROLLER_GET_METADATA_INFO)
    assert r.ext_fields["isLeader"] == "true" and r.ext_fields["controllerLeaderId"] == "n0"
    assert r.ext_fields["controllerLeaderAddress"] == manager.address and r.ext_fields["group"] == "g"
    assert (await call(manager, client, 4242)).code == RC.REQUEST_CODE_NOT_SUPPORTED
    missing = await call(manager, client, Q.CONTROLLER_ELECT_MASTER, {"clusterName": C})
    assert missing.code == RC.SYSTEM_ERROR and "brokerName" in missing.remark
    nan = await call(manager, client, Q.CONTROLLER_REGISTER_BROKER,
                     {"clusterName": C, "brokerName": B, "brokerId": "x", "brokerAddress": "a"})
    assert nan.code == RC.SYSTEM_ERROR
    assert (await call(manager, client, Q.CONTROLLER_GET_SYNC_STATE_DATA)).code == RC.SYSTEM_ERROR
    assert (await call(manager, client, Q.CONTROLLER_GET_SYNC_STATE_DATA, body=b"[]")).code == RC.SYSTEM_ERROR
    assert (await call(manager, client, Q.CONTROLLER_GET_SYNC_STATE_DATA, body=b"{bad")).code == RC.SYSTEM_ERROR
    no_id = await call(manager, client, Q.BROKER_HEARTBEAT, {"clusterName": C, "brokerName": B, "brokerAddr": "a"})
    assert no_id.code == RC.CONTROLLER_INVALID_REQUEST and no_id.remark == "Heart beat with empty brokerId"
    beat = await call(manager, client, Q.BROKER_HEARTBEAT, {"clusterName": C, "brokerName": B, "brokerAddr": "a",
                                                            "brokerId": "9"})
    assert beat.code == RC.SUCCESS and beat.remark == "Heart beat success"
    assert (await call(manager, client, Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "x"})).code == \
        RC.CONTROLLER_BROKER_METADATA_NOT_EXIST
    bad_body = await call(manager, client, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                          {"brokerName": B, "masterBrokerId": "1", "masterEpoch": "1"}, b"not json")
    assert bad_body.code == RC.SYSTEM_ERROR
    # still serving after all of that
    assert (await call(manager, client, Q.CONTROLLER_GET_METADATA_INFO)).code == RC.SUCCESS


async def test_controller_config_get_and_update(controller, tmp_path):
    manager, client = controller
    r = await call(manager, client, Q.GET_CONTROLLER_CONFIG)
    assert "scanInactiveMasterInterval=60000" in r.body.decode()
    r = await call(manager, client, Q.UPDATE_CONTROLLER_CONFIG, body=b"configStorePath=/tmp/x\n")
    assert r.code == RC.NO_PERMISSION
    r = await call(manager, client, Q.UPDATE_CONTROLLER_CONFIG, body=b"noSuchKey=1\n")
    assert r.code == RC.SUCCESS and "noSuchKey" not in manager.config.to_dict()  # ignored, as upstream
    r = await call(manager, client, Q.UPDATE_CONTROLLER_CONFIG, body=b"electMasterMaxRetryCount=5\n")
    assert r.code == RC.SUCCESS and manager.config.elect_master_max_retry_count == 5
    r = await call(manager, client, Q.UPDATE_CONTROLLER_CONFIG, body=b"electMasterMaxRetryCount=abc\n")
    assert r.code == RC.INVALID_PARAMETER
    r = await call(manager, client, Q.UPDATE_CONTROLLER_CONFIG, body=b"enableElectUncleanMaster=true\n")
    assert r.code == RC.SUCCESS and manager.config.enable_elect_unclean_master is True
    assert "enableElectUncleanMaster=true" in (tmp_path / "controller.properties").read_text()


async def test_register_elect_alter_then_master_timeout_elects_and_notifies(controller):
    manager, client = controller
    broker1, broker2 = FakeBroker(), FakeBroker()
    addr1, addr2 = await broker1.start(), await broker2.start()
    try:
        await register(manager, client, 1, addr1)
        await register(manager, client, 2, addr2)
        await client.invoke_oneway(manager.address, hb(1, addr1, timeout=60000, max_offset=100))
        await client.invoke_oneway(manager.address, hb(2, addr2, timeout=60000, max_offset=100))
        r = await call(manager, client, Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": B, "brokerId": "1"})
        assert r.code == RC.SUCCESS and r.ext_fields["masterBrokerId"] == "1"
        assert r.ext_fields["masterEpoch"] == "1" and r.ext_fields["masterAddress"] == addr1
        await asyncio.wait_for(broker2.got.wait(), 5)  # every alive member hears of the election
        assert broker2.notified[0].ext_fields == {"masterAddress": addr1, "masterEpoch": "1",
                                                  "syncStateSetEpoch": "1", "masterBrokerId": "1"}
        again = await call(manager, client, Q.CONTROLLER_ELECT_MASTER,
                           {"clusterName": C, "brokerName": B, "brokerId": "2"})
        assert again.code == RC.CONTROLLER_MASTER_STILL_EXIST
        r = await call(manager, client, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                       {"brokerName": B, "masterBrokerId": "1", "masterEpoch": "1"},
                       b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
        assert r.code == RC.SUCCESS and r.ext_fields["newSyncStateSetEpoch"] == "2"
        fenced = await call(manager, client, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                            {"brokerName": B, "masterBrokerId": "1", "masterEpoch": "1"},
                            b'{"syncStateSet":[1],"syncStateSetEpoch":1}')
        assert fenced.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        assert fenced.ext_fields["newSyncStateSetEpoch"] == "0"  # a primitive int upstream: always sent

        broker2.notified.clear()
        broker2.got.clear()
        # broker 1 stops beating with a short timeout; broker 2 keeps a long one
        await client.invoke_oneway(manager.address, hb(1, addr1, timeout=200, max_offset=100))
        await asyncio.wait_for(broker2.got.wait(), 10)
        notify = broker2.notified[-1]
        assert notify.ext_fields["masterBrokerId"] == "2" and notify.ext_fields["masterEpoch"] == "2"
        assert json.loads(notify.body) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
        r = await call(manager, client, Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": B})
        assert r.ext_fields["masterBrokerId"] == "2" and r.ext_fields["masterEpoch"] == "2"
        data = json.loads((await call(manager, client, Q.CONTROLLER_GET_SYNC_STATE_DATA, body=b'["broker-a"]')).body)
        entry = data["replicasInfoTable"][B]
        assert entry["masterBrokerId"] == 2 and [m["brokerId"] for m in entry["notInSyncReplicas"]] == [1]
        assert entry["notInSyncReplicas"][0]["alive"] is False

        # cleaning a living broker needs -l; a dead one can go
        r = await call(manager, client, Q.CLEAN_BROKER_DATA, {"brokerName": B, "brokerControllerIdsToClean": "2"})
        assert r.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        r = await call(manager, client, Q.CLEAN_BROKER_DATA, {"clusterName": C, "brokerName": B,
                                                              "brokerControllerIdsToClean": "1"})
        assert r.code == RC.SUCCESS
        r = await call(manager, client, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
        assert r.ext_fields["nextBrokerId"] == "3"
    finally:
        await broker1.server.close()
        await broker2.server.close()


async def test_process_read_event_reads_through_raft(controller):
    manager, client = controller
    r = await call(manager, client, Q.UPDATE_CONTROLLER_CONFIG, body=b"processReadEvent=true\n")
    assert r.code == RC.SUCCESS and manager.config.is_process_read_event
    before = manager.raft.status()["commit_idx"]
    r = await call(manager, client, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
    assert r.code == RC.SUCCESS and r.ext_fields["nextBrokerId"] == "1"
    assert manager.raft.status()["commit_idx"] > before  # the read committed a barrier entry


async def test_inactive_master_scan(controller):
    manager, client = controller
    await register(manager, client, 1, "127.0.0.1:1")
    await register(manager, client, 2, "127.0.0.1:2")
    await client.invoke_oneway(manager.address, hb(1, "127.0.0.1:1", timeout=60000))
    await client.invoke_oneway(manager.address, hb(2, "127.0.0.1:2", timeout=60000))
    await call(manager, client, Q.CONTROLLER_GET_METADATA_INFO)  # the oneway beats are in by now
    await manager.scan_inactive_master()  # never elected: left to the brokers' first election
    r = await call(manager, client, Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": B})
    assert r.ext_fields == {"masterEpoch": "0"}
    r = await call(manager, client, Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": B, "brokerId": "2"})
    assert r.code == RC.SUCCESS and r.ext_fields["masterBrokerId"] == "2"
    r = await call(manager, client, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                   {"brokerName": B, "masterBrokerId": "2", "masterEpoch": "1"},
                   b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
    assert r.code == RC.SUCCESS
    await manager.scan_inactive_master()  # master alive: nothing to do
    assert (await call(manager, client, Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": B})).ext_fields[
        "masterEpoch"] == "1"
    # the master's liveness lapses without a listener call (as if the scan had not run yet)
    manager.heartbeat_manager.broker_live_table.pop((C, B, 2))
    await manager.scan_inactive_master()
    r = await call(manager, client, Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": B})
    assert r.ext_fields["masterBrokerId"] == "1" and r.ext_fields["masterEpoch"] == "2"
