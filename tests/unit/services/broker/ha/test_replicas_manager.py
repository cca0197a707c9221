"""ReplicasManager against a scripted controller on a real Remoting port (ReplicasManager#startBasicService, #register, #changeToMaster, #changeToSlave).

The scripted controller keeps just enough of the controller's state (ids, master, epochs,
SyncStateSet) to answer 1001-1005, 1012, 1013 and 904 the way the reference says; the broker
side is a fake host and HA service that record what the manager asked of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.ha import replicas_manager as rm
from orbitmq.broker.ha.controller_client import ControllerClient
from orbitmq.broker.ha.replicas_manager import ReplicasManager, State
from orbitmq.broker.outer_api import RegisterBrokerResult
from orbitmq.broker.store.config import SLAVE, SYNC_MASTER, MessageStoreConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer
from tests.support.services import broker_conf


class ScriptedController:
    """One controller node. ``leader_addr`` None = this node is the leader."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0)
        self.requests: list[tuple[int, dict[str, str], bytes]] = []
        self.heartbeats: list[dict[str, str]] = []
        self.leader_addr: str | None = None
        self.no_leader = False  # 1005 names no leader (an election in progress)
        self.ids: dict[int, tuple[str, str]] = {}  # id -> (address, check code)
        self.next_id = 1
        self.master_id: int | None = None
        self.master_epoch = 0
        self.sss: set[int] = set()
        self.sss_epoch = 0
        self.alter_code = ResponseCode.SUCCESS
        self.replica_info_code = ResponseCode.SUCCESS
        for code in (1001, 1002, 1003, 1004, 1005, 1012, 1013, 904):
            self.server.register(code, self.handle)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def __aenter__(self) -> ScriptedController:
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.close()

    def codes(self) -> list[int]:
        return [code for code, _, _ in self.requests]

    def _master_fields(self) -> dict[str, str]:
        if self.master_id is None:
            return {"masterEpoch": str(self.master_epoch)}
        return {"masterBrokerId": str(self.master_id), "masterAddress": self.ids[self.master_id][0],
                "masterEpoch": str(self.master_epoch), "syncStateSetEpoch": str(self.sss_epoch)}

    def _sss_body(self) -> bytes:
        return json.dumps({"syncStateSet": sorted(self.sss), "syncStateSetEpoch": self.sss_epoch}).encode()

    async def handle(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        f = dict(request.ext_fields or {})
        code = request.code
        if code == RequestCode.BROKER_HEARTBEAT:
            self.heartbeats.append(f)
            return None
        self.requests.append((code, f, bytes(request.body or b"")))
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            leader = "" if self.no_leader else (self.leader_addr or self.addr)
            return request.response_to(ResponseCode.SUCCESS, None, {
                "group": "g", "controllerLeaderId": "n0", "controllerLeaderAddress": leader,
                "isLeader": str(self.leader_addr is None).lower(), "peers": f"n0:{leader};"})
        if self.leader_addr is not None:
            return request.response_to(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
        if code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            return request.response_to(ResponseCode.SUCCESS, None, {**f, "nextBrokerId": str(self.next_id)})
        if code == RequestCode.CONTROLLER_APPLY_BROKER_ID:
            bid = int(f["appliedBrokerId"])
            known = self.ids.get(bid)
            if known is not None and known[1] != f["registerCheckCode"]:
                return request.response_to(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "id taken")
            self.ids[bid] = (f["registerCheckCode"].split(";")[0], f["registerCheckCode"])
            self.next_id = max(self.next_id, bid + 1)
            return request.response_to(ResponseCode.SUCCESS, None, {"clusterName": f["clusterName"],
                                                                    "brokerName": f["brokerName"]})
        if code == RequestCode.CONTROLLER_REGISTER_BROKER:
            bid = int(f["brokerId"])
            if bid not in self.ids:
                return request.response_to(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "unknown id")
            self.ids[bid] = (f["brokerAddress"], self.ids[bid][1])
            fields = {"clusterName": f["clusterName"], "brokerName": f["brokerName"]}
            if self.master_id is not None:
                fields.update(self._master_fields())
            return request.response_to(ResponseCode.SUCCESS, None, fields, self._sss_body())
        if code == RequestCode.CONTROLLER_ELECT_MASTER:
            bid = int(f["brokerId"])
            if self.master_id is not None:
                return request.response_to(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, None, self._master_fields(),
                                           json.dumps({"syncStateSet": sorted(self.sss)}).encode())
            self.master_id, self.master_epoch = bid, self.master_epoch + 1
            self.sss, self.sss_epoch = {bid}, self.sss_epoch + 1
            body = ('{"brokerMemberGroup":{"cluster":"C","brokerName":"b","brokerAddrs":{'
                    + ",".join(f'{i}:"{a}"' for i, (a, _) in sorted(self.ids.items()))
                    + '}},"syncStateSet":[' + str(bid) + "]}")
            return request.response_to(ResponseCode.SUCCESS, None, self._master_fields(), body.encode())
        if code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            if self.replica_info_code != ResponseCode.SUCCESS:
                return request.response_to(self.replica_info_code, "scripted")
            return request.response_to(ResponseCode.SUCCESS, None, self._master_fields(), self._sss_body())
        if code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET:
            if self.alter_code != ResponseCode.SUCCESS:
                return request.response_to(self.alter_code, "scripted refusal")
            body = json.loads(request.body)
            self.sss, self.sss_epoch = set(body["syncStateSet"]), self.sss_epoch + 1
            return request.response_to(ResponseCode.SUCCESS, None, {"newSyncStateSetEpoch": str(self.sss_epoch)},
                                       self._sss_body())
        return request.response_to(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "?")


class FakeReplication:
    def get_confirm_offset(self) -> int:
        return 2048


class FakeStore:
    replication = FakeReplication()

    def get_max_phy_offset(self) -> int:
        return 4096


class FakeHA:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.local_broker_id: int | None = None
        self.sync_state_set_listener: Any = None
        self.sss: set[int] = set()
        self.shrink_to: set[int] | None = None
        self.accept = True

    async def change_to_master(self, epoch: int) -> bool:
        self.calls.append(("master", epoch))
        return self.accept

    async def change_to_slave(self, addr: str | None, epoch: int, slave_id: int) -> bool:
        self.calls.append(("slave", addr, epoch, slave_id))
        return self.accept

    def update_master_address(self, addr: str) -> None:
        self.calls.append(("ha_addr", addr))

    def set_sync_state_set(self, ids: set[int], epoch: int | None = None) -> None:
        self.sss = set(ids)
        self.sss_epoch = epoch

    def maybe_shrink_sync_state_set(self) -> set[int]:
        return set(self.shrink_to if self.shrink_to is not None else self.sss)


class FakeEpochCache:
    def last_epoch(self) -> int:
        return 7


class FakeHost:
    def __init__(self, root: Path, controller_addr: str, port: int = 10911) -> None:
        values = broker_conf(port, root, brokerClusterName="C", brokerName="b", brokerId=-1,
                             enableControllerMode="true", controllerAddr=controller_addr, brokerRole="SLAVE",
                             namesrvAddr=None, mappedFileSizeCommitLog=None)
        self.config = BrokerConfig.from_mapping(values)
        self.config.resolve_defaults()
        self.store_config = MessageStoreConfig.from_mapping(values)
        self.message_store = FakeStore()
        self.fenced = False
        self.state_version = 0
        self.registrations: list[tuple[int, int, bool]] = []
        self.register_result: RegisterBrokerResult | None = None
        self.special: list[bool] = []
        self.slave_sync: list[str | None] = []

    def set_fenced(self, fenced: bool) -> None:
        self.fenced = fenced

    def update_state_version(self, master_epoch: int) -> None:
        self.state_version = master_epoch

    async def register_broker_all(self) -> dict[str, RegisterBrokerResult | None]:
        self.registrations.append((self.config.broker_id, self.state_version, self.fenced))
        return {"ns": self.register_result}

    async def change_special_service_status(self, master: bool) -> None:
        self.special.append(master)

    def start_slave_synchronize(self, master_addr: str | None) -> None:
        self.slave_sync.append(master_addr)

    def stop_slave_synchronize(self) -> None:
        self.slave_sync.append(None)


async def _wait(predicate: Any, what: str, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(autouse=True)
def _fast_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rm, "LEADER_LOOKUP_PAUSE", 0.01)
    monkeypatch.setattr(rm, "RETRY_SEQUENCE_PERIOD", 0.05)
    monkeypatch.setattr(rm, "HA_ADDRESS_RETRY_PERIOD", 0.05)
    monkeypatch.setattr(rm, "FIRST_SSS_CHECK_DELAY", 3600)
    monkeypatch.setattr(rm, "REREGISTER_PAUSE", 0.0)


def _manager(host: FakeHost, ha: FakeHA) -> ReplicasManager:
    return ReplicasManager(host, ha, FakeEpochCache(), ControllerClient(host.config, timeout=2.0))


@contextlib.asynccontextmanager
async def _running(manager: ReplicasManager) -> AsyncIterator[None]:
    """Start the manager, wait until it is RUNNING, and shut it down after the block."""
    await manager.start()
    try:
        await _wait(lambda: manager.state is State.RUNNING, "RUNNING")
        yield
    finally:
        await manager.shutdown()


async def test_first_broker_registers_elects_itself_and_runs_as_master(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        host, ha = FakeHost(tmp_path, ctl.addr), FakeHA()
        manager = _manager(host, ha)
        assert host.fenced and manager.state is State.INITIAL  # fenced from construction
        async with _running(manager):
            assert ctl.codes()[:5] == [1005, 1012, 1013, 1003, 1002]
            assert manager.broker_controller_id == 1 and ha.local_broker_id == 1
            assert (tmp_path / "brokerIdentity").read_text() == "C#b#1"
            assert not (tmp_path / "brokerIdentity-temp").exists()
            apply = next(f for c, f, _ in ctl.requests if c == 1013)
            assert apply["registerCheckCode"].startswith("127.0.0.1:10911;")
            # One heartbeat before the elect, with the reference's fields.
            assert ctl.heartbeats and ctl.heartbeats[0]["brokerId"] == "1"
            assert ctl.heartbeats[0]["epoch"] == "7" and ctl.heartbeats[0]["maxOffset"] == "4096"
            assert ctl.heartbeats[0]["confirmOffset"] == "2048"
            assert ctl.heartbeats[0]["heartbeatTimeoutMills"] == "10000"
            # Master: brokerId 0, SYNC_MASTER, stateVersion = epoch, special services on, unfenced.
            assert ha.calls == [("master", 1)]
            assert host.config.broker_id == 0 and host.store_config.broker_role == SYNC_MASTER
            assert host.state_version == 1 and host.special == [True] and not host.fenced
            assert manager.sync_state_set == {1} and ha.sss == {1}
            # Never registered with the NameServers while fenced; registered as id 0 once running.
            assert host.registrations and all(not fenced for _, _, fenced in host.registrations)
            assert host.registrations[-1][:2] == (0, 1)


async def test_second_broker_becomes_slave_and_learns_master_ha_address(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        ctl.ids[1] = ("127.0.0.1:20911", "127.0.0.1:20911;1")
        ctl.next_id, ctl.master_id, ctl.master_epoch, ctl.sss, ctl.sss_epoch = 2, 1, 3, {1}, 4
        host, ha = FakeHost(tmp_path, ctl.addr, port=30911), FakeHA()
        # The master has not registered with the NameServer yet: no HA address in the answer.
        host.register_result = RegisterBrokerResult(None, None)
        manager = _manager(host, ha)
        async with _running(manager):
            assert RequestCode.CONTROLLER_ELECT_MASTER not in ctl.codes()  # register named a master
            assert ha.calls == [("slave", None, 3, 2)]
            assert host.config.broker_id == 2 and host.store_config.broker_role == SLAVE
            assert host.slave_sync[-1] == "127.0.0.1:20911" and host.state_version == 3
            # A stale answer naming another master is not trusted...
            host.register_result = RegisterBrokerResult("10.0.0.9:1", "10.0.0.9:0")
            await asyncio.sleep(0.2)
            assert ("ha_addr", "10.0.0.9:1") not in ha.calls
            # ...the re-registration every HA_ADDRESS_RETRY_PERIOD picks the right one up.
            host.register_result = RegisterBrokerResult("127.0.0.1:20912", "127.0.0.1:20911")
            await _wait(lambda: ("ha_addr", "127.0.0.1:20912") in ha.calls, "master HA address")
            count = len(host.registrations)
            await asyncio.sleep(0.2)
            assert len(host.registrations) == count  # the retry stopped


async def test_role_changes_only_on_a_newer_epoch(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        host, ha = FakeHost(tmp_path, ctl.addr), FakeHA()
        manager = _manager(host, ha)
        async with _running(manager):
            ha.calls.clear()
            # Stale or equal epochs are ignored, whoever they name.
            assert not await manager.change_broker_role(5, "127.0.0.1:1", 1, 9, {5})
            assert not await manager.change_broker_role(5, "127.0.0.1:1", 0, 9, {5})
            assert ha.calls == [] and host.config.broker_id == 0
            # A newer epoch naming another broker: slave of it.
            assert await manager.change_broker_role(5, "127.0.0.1:1", 2, 9, {5})
            assert ha.calls == [("slave", None, 2, 1)] and host.config.broker_id == 1
            assert host.store_config.broker_role == SLAVE and host.special == [True, False]
            # Back to master at epoch 3: the SyncStateSet from the announcement is adopted.
            assert await manager.change_broker_role(1, host.config.broker_addr, 3, 10, {1})
            assert ha.calls[-1] == ("master", 3) and host.config.broker_id == 0
            assert manager.sync_state_set == {1} and manager.sync_state_set_epoch == 10
            assert host.state_version == 3 and host.special == [True, False, True]


async def test_sync_state_set_expand_and_shrink_send_alter(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        host, ha = FakeHost(tmp_path, ctl.addr), FakeHA()
        manager = _manager(host, ha)
        async with _running(manager):
            ctl.ids[2] = ("127.0.0.1:2", "x")
            # Expand: the HA service's listener proposes {1, 2} at the current sssEpoch (1).
            await ha.sync_state_set_listener({1, 2}, 1)
            code, fields, body = ctl.requests[-1]
            assert code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET
            assert (fields["brokerName"], fields["masterBrokerId"], fields["masterEpoch"]) == ("b", "1", "1")
            assert json.loads(body) == {"syncStateSet": [1, 2], "syncStateSetEpoch": 1}
            assert manager.sync_state_set == {1, 2} and manager.sync_state_set_epoch == 2 and ha.sss == {1, 2}
            # Shrink: slave 2 fell behind.
            ha.shrink_to = {1}
            await manager.check_sync_state_set()
            assert json.loads(ctl.requests[-1][2]) == {"syncStateSet": [1], "syncStateSetEpoch": 2}
            assert manager.sync_state_set == {1} and manager.sync_state_set_epoch == 3
            # Nothing to change: no request.
            count = len(ctl.requests)
            await manager.check_sync_state_set()
            assert len(ctl.requests) == count
            # A refused ALTER leaves the agreed set in place (and ends "synchronizing").
            ctl.alter_code = ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
            ha.sss = {1, 2}
            assert not await manager.alter_sync_state_set({1, 2}, 3)
            assert manager.sync_state_set == {1} and ha.sss == {1}


async def test_poll_follows_a_new_master_and_reregisters_on_2008(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        host, ha = FakeHost(tmp_path, ctl.addr), FakeHA()
        manager = _manager(host, ha)
        async with _running(manager):
            ctl.ids[4] = ("127.0.0.1:4", "x")
            ctl.master_id, ctl.master_epoch, ctl.sss = 4, 5, {4}
            await manager.sync_broker_metadata()
            assert ha.calls[-1] == ("slave", None, 5, 1) and manager.master_address == "127.0.0.1:4"
            ctl.replica_info_code = ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
            before = ctl.codes().count(RequestCode.CONTROLLER_REGISTER_BROKER)
            await manager.sync_broker_metadata()
            assert ctl.codes().count(RequestCode.CONTROLLER_REGISTER_BROKER) == before + 1
            # The master died and the controller found no successor: epoch grew, no master -> elect.
            ctl.replica_info_code = ResponseCode.SUCCESS
            ctl.master_id, ctl.master_epoch = None, 6
            await manager.sync_broker_metadata()
            assert ctl.master_id == 1 and ha.calls[-1] == ("master", 7) and host.config.broker_id == 0


async def test_not_leader_answer_rediscovers_the_leader(tmp_path: Path) -> None:
    async with ScriptedController() as follower, ScriptedController() as leader:
        follower.leader_addr = leader.addr
        host = FakeHost(tmp_path, f"{follower.addr};{leader.addr}")
        client = ControllerClient(host.config, timeout=2.0)
        try:
            client.leader_addr = follower.addr  # stale: the follower answers 2007
            assert await client.get_next_broker_id("C", "b") == 1
            assert client.leader_addr == leader.addr
            assert RequestCode.CONTROLLER_GET_NEXT_BROKER_ID in follower.codes()
            assert RequestCode.CONTROLLER_GET_NEXT_BROKER_ID in leader.codes()
            # Heartbeats go to every reachable controller.
            await client.scan_reachable()
            await client.send_heartbeat(cluster_name="C", broker_name="b", broker_addr="a:1", broker_id=1,
                                        epoch=1, max_offset=0, confirm_offset=0, heartbeat_timeout_millis=10000,
                                        election_priority=3)
            await _wait(lambda: follower.heartbeats and leader.heartbeats, "heartbeats on both")
            assert leader.heartbeats[0]["electionPriority"] == "3"
        finally:
            await client.close()


async def test_restart_paths_of_the_identity_files(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        # A crash after the temp file: the same id and check code are applied again, no 1012.
        (tmp_path / "brokerIdentity-temp").write_text("C#b#1#127.0.0.1:10911;42")
        host, ha = FakeHost(tmp_path, ctl.addr), FakeHA()
        manager = _manager(host, ha)
        await manager.client.discover_leader()
        await manager.register_to_controller()
        assert RequestCode.CONTROLLER_GET_NEXT_BROKER_ID not in ctl.codes()
        assert manager.broker_controller_id == 1 and (tmp_path / "brokerIdentity").read_text() == "C#b#1"
        await manager.client.close()

        # A temp file whose id was given to another broker (2014): dropped, a new id applied.
        (tmp_path / "brokerIdentity").unlink()
        (tmp_path / "brokerIdentity-temp").write_text("C#b#1#127.0.0.1:10911;43")
        manager = _manager(FakeHost(tmp_path, ctl.addr), FakeHA())
        await manager.client.discover_leader()
        await manager.register_to_controller()
        assert manager.broker_controller_id == 2 and (tmp_path / "brokerIdentity").read_text() == "C#b#2"
        await manager.client.close()

        # The metadata file: straight to 1003.
        ctl.requests.clear()
        manager = _manager(FakeHost(tmp_path, ctl.addr), FakeHA())
        await manager.client.discover_leader()
        await manager.register_to_controller()
        assert ctl.codes() == [1005, 1003] and manager.broker_controller_id == 2
        await manager.client.close()


async def test_controller_addresses_from_dns_lookup(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, "localhost:19878")
    host.config.fetch_controller_addr_by_dns_lookup = True
    client = ControllerClient(host.config)
    try:
        assert "127.0.0.1:19878" in await client.refresh_addresses()
        host.config.fetch_controller_addr_by_dns_lookup = False
        host.config.controller_addr = "127.0.0.1:1;127.0.0.1:2"  # updated at runtime
        assert await client.refresh_addresses() == ["127.0.0.1:1", "127.0.0.1:2"]
    finally:
        await client.close()


async def test_queued_alter_uses_the_epoch_of_the_one_before(tmp_path: Path) -> None:
    async with ScriptedController() as ctl:
        host, ha = FakeHost(tmp_path, ctl.addr), FakeHA()
        manager = _manager(host, ha)
        async with _running(manager):
            ctl.ids[2] = ctl.ids[3] = ("127.0.0.1:2", "x")
            # Two listener calls before the first answer: both report sssEpoch 1.
            await asyncio.gather(ha.sync_state_set_listener({1, 2}, 1), ha.sync_state_set_listener({1, 2, 3}, 1))
            alters = [json.loads(b) for c, _, b in ctl.requests if c == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET]
            assert alters == [{"syncStateSet": [1, 2], "syncStateSetEpoch": 1},
                              {"syncStateSet": [1, 2, 3], "syncStateSetEpoch": 2}]
            assert manager.sync_state_set == {1, 2, 3} and manager.sync_state_set_epoch == 3
            assert ha.sss == {1, 2, 3} and ha.sss_epoch == 3
