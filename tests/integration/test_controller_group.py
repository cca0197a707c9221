"""A 3-node controller group as real ``orbitmq controller`` processes on loopback.

Leader election and GET_METADATA_INFO, leader-only writes (2007 elsewhere), the broker-id and
registration flow, elections, kill -9 of the leader, restart from disk, an isolated leader, a
master's death (closed channel) electing a new master and notifying the surviving broker (1008),
and the mqadmin controller commands.
"""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.admin import cli
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode as Q
from orbitmq.remoting.codes import ResponseCode as RC
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer
from tests.support import ProcessRunner
from tests.support.net import free_port
from tests.support.process import ManagedProcess

C, B = "DefaultCluster", "broker-a"
READY = "The Controller boot success"


@dataclass
class Group:
    runner: ProcessRunner
    store: Path
    raft_ports: list[int]
    remoting_ports: list[int]
    extra: tuple[str, ...] = ()
    nodes: dict[int, ManagedProcess] = field(default_factory=dict)

    @property
    def peers(self) -> str:
        return ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(self.raft_ports))

    def addr(self, i: int) -> str:
        return f"127.0.0.1:{self.remoting_ports[i]}"

    @property
    def addrs(self) -> list[str]:
        return [self.addr(i) for i in range(len(self.raft_ports))]

    def args(self, i: int) -> list[str]:
        return ["controllerDLegerGroup=g1", f"controllerDLegerPeers={self.peers}", f"controllerDLegerSelfId=n{i}",
                f"listenPort={self.remoting_ports[i]}", "bindAddress=127.0.0.1",
                f"controllerStorePath={self.store / f'n{i}'}", f"configStorePath={self.store / f'n{i}.properties'}",
                "scanNotActiveBrokerInterval=200", *self.extra]

    async def start(self, i: int) -> ManagedProcess:
        proc = self.runner.spawn("controller", self.args(i), name=f"controller-n{i}")
        self.nodes[i] = proc
        await proc.async_wait_ready(("127.0.0.1", self.remoting_ports[i]), READY)
        return proc

    async def start_all(self) -> None:
        await asyncio.gather(*(self.start(i) for i in range(len(self.raft_ports))))


def make_group(procs: ProcessRunner, tmp_path: Path, *extra: str) -> Group:
    return Group(procs, tmp_path / "store", [free_port() for _ in range(3)], [free_port() for _ in range(3)],
                 extra)


async def call(client: RemotingClient, addr: str, code: int, fields: dict | None = None, body: bytes = b"",
               timeout: float = 6.0) -> RemotingCommand:  # noqa: ASYNC109
    return await client.invoke(addr, RemotingCommand.request(code, fields or {}, body), timeout)


async def metadata(client: RemotingClient, addr: str) -> dict[str, str] | None:
    try:
        return (await call(client, addr, Q.CONTROLLER_GET_METADATA_INFO, timeout=2.0)).ext_fields
    except RemotingError:
        return None


async def wait_leader(client: RemotingClient, addrs: list[str], timeout: float = 20.0) -> str:  # noqa: ASYNC109
    """The leader's Remoting address once every node in ``addrs`` names the same, ready leader."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        metas = [await metadata(client, a) for a in addrs]
        leaders = {m.get("controllerLeaderAddress") for m in metas if m}
        if all(metas) and len(leaders) == 1 and None not in leaders:
            (leader,) = leaders
            if any(m.get("isLeader") == "true" for m in metas):
                return leader
        assert loop.time() < deadline, f"no agreed leader: {metas}"
        await asyncio.sleep(0.1)


async def eventually(check, timeout: float = 15.0, what: str = "condition"):  # noqa: ASYNC109
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert loop.time() < deadline, f"{what} not reached"
        await asyncio.sleep(0.1)


class FakeBroker:
    """A small Remoting server in the test playing a broker: records NOTIFY_BROKER_ROLE_CHANGED."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0)
        self.notified: list[RemotingCommand] = []

    async def start(self) -> str:
        async def on_notify(request: RemotingCommand, channel) -> None:
            self.notified.append(request)

        self.server.register(Q.NOTIFY_BROKER_ROLE_CHANGED, on_notify)
        await self.server.start()
        return f"127.0.0.1:{self.server.port}"


def heartbeat(bid: int, addr: str, timeout_ms: int = 60000, epoch: int = 1, max_offset: int = 0) -> RemotingCommand:
    return RemotingCommand.request(Q.BROKER_HEARTBEAT, {
        "clusterName": C, "brokerName": B, "brokerAddr": addr, "brokerId": str(bid), "epoch": str(epoch),
        "maxOffset": str(max_offset), "confirmOffset": str(max_offset), "heartbeatTimeoutMills": str(timeout_ms)})


async def beat_all(client: RemotingClient, group: Group, bid: int, addr: str, nodes=None, **kw) -> None:
    for i in nodes if nodes is not None else range(3):
        try:
            await client.invoke_oneway(group.addr(i), heartbeat(bid, addr, **kw))
        except RemotingError:
            pass  # a killed node


async def register(client: RemotingClient, leader: str, bid: int, addr: str) -> None:
    """The broker's 5.1.1 sequence: 1012 -> 1013 -> 1003."""
    r = await call(client, leader, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
    assert r.code == RC.SUCCESS and r.ext_fields["nextBrokerId"] == str(bid)
    r = await call(client, leader, Q.CONTROLLER_APPLY_BROKER_ID, {
        "clusterName": C, "brokerName": B, "appliedBrokerId": str(bid), "registerCheckCode": f"{addr};1700000000000"})
    assert r.code == RC.SUCCESS, r.remark
    r = await call(client, leader, Q.CONTROLLER_REGISTER_BROKER, {
        "clusterName": C, "brokerName": B, "brokerId": str(bid), "brokerAddress": addr})
    assert r.code == RC.SUCCESS, r.remark


async def replica_info(client: RemotingClient, leader: str) -> tuple[dict[str, str], dict]:
    r = await call(client, leader, Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": B})
    assert r.code == RC.SUCCESS, r.remark
    return r.ext_fields, json.loads(r.body)


def index_of(group: Group, addr: str) -> int:
    return group.addrs.index(addr)


async def test_group_election_writes_failover_and_master_death(procs, tmp_path):
    group = make_group(procs, tmp_path)
    await group.start_all()
    client = RemotingClient()
    broker_client = RemotingClient()  # the "broker 1" connections, closed to simulate its death
    broker1, broker2 = FakeBroker(), FakeBroker()
    addr1, addr2 = await broker1.start(), await broker2.start()
    try:
        leader = await wait_leader(client, group.addrs)
        meta = await metadata(client, leader)
        assert meta["group"] == "g1" and meta["isLeader"] == "true"
        assert meta["peers"] == "".join(f"n{i}:127.0.0.1:{p};" for i, p in enumerate(group.raft_ports))
        assert meta["controllerLeaderId"] == f"n{index_of(group, leader)}"
        follower = next(a for a in group.addrs if a != leader)
        for code, fields in ((Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B}),
                             (Q.CONTROLLER_APPLY_BROKER_ID, {"clusterName": C, "brokerName": B,
                                                             "appliedBrokerId": "1", "registerCheckCode": "a;1"}),
                             (Q.CONTROLLER_REGISTER_BROKER, {"clusterName": C, "brokerName": B, "brokerId": "1",
                                                             "brokerAddress": "a"})):
            assert (await call(client, follower, code, fields)).code == RC.CONTROLLER_NOT_LEADER

        await register(client, leader, 1, addr1)
        await register(client, leader, 2, addr2)
        await beat_all(broker_client, group, 1, addr1, max_offset=100)
        await beat_all(client, group, 2, addr2, max_offset=100)
        r = await call(client, leader, Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": B, "brokerId": "1"})
        assert r.code == RC.SUCCESS and r.ext_fields["masterBrokerId"] == "1", r.remark
        r = await call(client, leader, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                       {"brokerName": B, "masterBrokerId": "1", "masterEpoch": "1"},
                       b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
        assert r.code == RC.SUCCESS and r.ext_fields["newSyncStateSetEpoch"] == "2", r.remark
        before = await replica_info(client, leader)
        assert before == ({"masterEpoch": "1", "masterBrokerId": "1", "masterAddress": addr1},
                          {"syncStateSet": [1, 2], "syncStateSetEpoch": 2})

        # kill -9 the leader: another node leads with the same state
        old = index_of(group, leader)
        group.nodes[old].kill()
        survivors = [a for a in group.addrs if a != leader]
        new_leader = await wait_leader(client, survivors)
        assert new_leader != leader
        assert await replica_info(client, new_leader) == before
        r = await call(client, new_leader, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
        assert r.ext_fields["nextBrokerId"] == "3"

        # the killed node comes back from its disk state and follows the new leader
        await group.start(old)
        assert await wait_leader(client, group.addrs) == new_leader

        # broker 1 (the master) dies: its connections close, the leader elects broker 2 and tells it
        await beat_all(broker_client, group, 1, addr1, max_offset=100)
        await beat_all(client, group, 2, addr2, max_offset=100)
        await broker_client.close()

        async def notified():
            return [n for n in broker2.notified if n.ext_fields.get("masterEpoch") == "2"]

        (notify,) = await eventually(notified, what="1008 to broker 2")
        assert notify.ext_fields == {"masterAddress": addr2, "masterEpoch": "2", "syncStateSetEpoch": "3",
                                     "masterBrokerId": "2"}
        assert json.loads(notify.body) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
        assert await replica_info(client, new_leader) == (
            {"masterEpoch": "2", "masterBrokerId": "2", "masterAddress": addr2},
            {"syncStateSet": [2], "syncStateSetEpoch": 3})
        # the old master asking to be master again is told who is
        r = await call(client, new_leader, Q.CONTROLLER_ELECT_MASTER,
                       {"clusterName": C, "brokerName": B, "brokerId": "1"})
        assert r.code == RC.CONTROLLER_MASTER_STILL_EXIST and r.ext_fields["masterBrokerId"] == "2"
    finally:
        await client.close()
        await broker_client.close()
        await broker1.server.close()
        await broker2.server.close()


async def test_heartbeat_timeout_elects_and_whole_group_restart_recovers(procs, tmp_path):
    # a tiny compaction threshold: the restart goes through snapshot + journal
    group = make_group(procs, tmp_path, "controllerLogCompactionMinEntries=2", "scanInactiveMasterInterval=500")
    await group.start_all()
    client = RemotingClient()
    broker2 = FakeBroker()
    addr2 = await broker2.start()
    addr1 = "127.0.0.1:1"  # never answers: broker 1 only heartbeats
    try:
        leader = await wait_leader(client, group.addrs)
        await register(client, leader, 1, addr1)
        await register(client, leader, 2, addr2)
        await beat_all(client, group, 1, addr1, timeout_ms=60000)
        await beat_all(client, group, 2, addr2, timeout_ms=60000)
        assert (await call(client, leader, Q.CONTROLLER_ELECT_MASTER,
                           {"clusterName": C, "brokerName": B, "brokerId": "1"})).code == RC.SUCCESS
        r = await call(client, leader, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                       {"brokerName": B, "masterBrokerId": "1", "masterEpoch": "1"},
                       b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
        assert r.code == RC.SUCCESS
        # broker 1's last heartbeat says 300 ms: the scan drops it and the master moves to 2
        await beat_all(client, group, 1, addr1, timeout_ms=300)

        async def moved():
            fields, _ = await replica_info(client, leader)
            return fields.get("masterBrokerId") == "2"

        await eventually(moved, what="election after heartbeat timeout")
        await eventually(lambda: _async([n for n in broker2.notified if n.ext_fields["masterBrokerId"] == "2"]),
                         what="1008 to broker 2")
        before = await replica_info(client, leader)

        for proc in group.nodes.values():
            proc.kill()
        await group.start_all()
        leader = await wait_leader(client, group.addrs)
        assert await replica_info(client, leader) == before
        r = await call(client, leader, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
        assert r.ext_fields["nextBrokerId"] == "3"
        snapshots = [p for p in group.store.rglob("raft.snapshot")]
        assert snapshots, "log compaction wrote no snapshot"
    finally:
        await client.close()
        await broker2.server.close()


async def _async(value):
    return value


async def test_leader_cut_off_from_majority_answers_not_leader(procs, tmp_path):
    group = make_group(procs, tmp_path)
    await group.start_all()
    client = RemotingClient()
    stopped: list[ManagedProcess] = []
    try:
        leader = await wait_leader(client, group.addrs)
        others = [group.nodes[i] for i in range(3) if group.addr(i) != leader]
        for proc in others:
            proc.signal(signal.SIGSTOP)
            stopped.append(proc)

        async def not_leader():
            r = await call(client, leader, Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": B})
            return r.code == RC.CONTROLLER_NOT_LEADER

        await eventually(not_leader, what="2007 from the isolated leader")
        meta = await metadata(client, leader)
        assert meta["isLeader"] == "false"
        r = await call(client, leader, Q.CONTROLLER_APPLY_BROKER_ID, {
            "clusterName": C, "brokerName": B, "appliedBrokerId": "1", "registerCheckCode": "a:1;1"})
        assert r.code == RC.CONTROLLER_NOT_LEADER
    finally:
        for proc in stopped:
            proc.signal(signal.SIGCONT)
        await client.close()


# ---- mqadmin -------------------------------------------------------------------------------------

def admin(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_admin_controller_commands(procs, tmp_path, capsys):
    group = make_group(procs, tmp_path)
    await group.start_all()
    client = RemotingClient()  # also carries the brokers' heartbeats: it stays open while the commands run
    try:
        leader = await wait_leader(client, group.addrs)
        await register(client, leader, 1, "127.0.0.1:20911")
        await register(client, leader, 2, "127.0.0.1:20912")
        await beat_all(client, group, 1, "127.0.0.1:20911")
        await beat_all(client, group, 2, "127.0.0.1:20912")
        r = await call(client, leader, Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": B, "brokerId": "1"})
        assert r.code == RC.SUCCESS
        r = await call(client, leader, Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                       {"brokerName": B, "masterBrokerId": "1", "masterEpoch": "1"},
                       b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
        assert r.code == RC.SUCCESS
        await asyncio.to_thread(_admin_checks, group, leader, capsys)
    finally:
        await client.close()


def _admin_checks(group: Group, leader: str, capsys) -> None:
    a = group.addrs[0]
    all_addrs = ";".join(group.addrs)

    code, out, err = admin(capsys, "getControllerMetaData", "-a", a, "--json")
    assert code == 0, err
    meta = json.loads(out)
    assert meta["controllerLeaderAddress"] == leader and meta["group"] == "g1" and len(meta["peers"]) == 3
    code, out, _ = admin(capsys, "getControllerMetaData", "-a", a)
    assert f"#ControllerLeaderAddress\t{leader}" in out and "#ControllerGroup\tg1" in out
    assert out.count("#Peer:\t") == 3

    code, out, err = admin(capsys, "getSyncStateSet", "-a", a, "-b", B, "--json")
    assert code == 0, err
    entry = json.loads(out)[B]
    assert entry["masterBrokerId"] == 1 and entry["syncStateSetEpoch"] == 2
    assert sorted(m["brokerId"] for m in entry["inSyncReplicas"]) == [1, 2]
    code, out, _ = admin(capsys, "getSyncStateSet", "-a", a, "-b", B)
    assert "#MasterBrokerId\t1" in out and "#SyncStateSetNums\t2" in out
    assert f"InSyncReplica:\tReplicaIdentity{{brokerName='{B}', brokerId=2, brokerAddress='127.0.0.1:20912', " \
           "alive=true}" in out

    code, out, err = admin(capsys, "getControllerConfig", "-a", all_addrs, "--json")
    assert code == 0, err
    configs = json.loads(out)
    assert set(configs) == set(group.addrs) and configs[a]["scanNotActiveBrokerInterval"] == "200"

    code, out, err = admin(capsys, "updateControllerConfig", "-a", all_addrs, "-k", "electMasterMaxRetryCount",
                           "-v", "5")
    assert code == 0, err
    assert out.startswith(f"update controller config success![{', '.join(group.addrs)}]")
    assert "electMasterMaxRetryCount : 5" in out
    code, out, _ = admin(capsys, "getControllerConfig", "-a", all_addrs, "--json")
    assert {cfg["electMasterMaxRetryCount"] for cfg in json.loads(out).values()} == {"5"}
    code, out, err = admin(capsys, "updateControllerConfig", "-a", a, "-k", "configStorePath", "-v", "/x")
    assert code == 1 and "[code 16]" in err

    code, out, err = admin(capsys, "electMaster", "-a", a, "-c", C, "-bn", B, "-b", "2", "--json")
    assert code == 0, err
    elected = json.loads(out)
    assert elected["masterBrokerId"] == 2 and elected["masterEpoch"] == 2
    assert elected["brokerAddrs"] == {"1": "127.0.0.1:20911", "2": "127.0.0.1:20912"}
    code, out, err = admin(capsys, "electMaster", "-a", a, "-c", C, "-bn", B, "-b", "7")
    assert code == 1 and "[code 2012]" in err  # not in the SyncStateSet

    code, out, err = admin(capsys, "cleanBrokerMetadata", "-a", a, "-bn", B, "-b", "1")
    assert code == 1 and "clusterName option can not be empty" in err  # mqadmin: -c unless -l
    code, out, err = admin(capsys, "cleanBrokerMetadata", "-a", a, "-bn", B, "-b", "1", "-c", C)
    assert code == 1 and "[code 2009]" in err and "is still alive" in err  # broker 1 is alive
    code, out, err = admin(capsys, "cleanBrokerMetadata", "-a", a, "-bn", B, "-b", "1", "-c", C, "-l")
    assert code == 0, err
    assert f"clear broker {B} metadata from controller success!" in out
    code, out, _ = admin(capsys, "getSyncStateSet", "-a", a, "-b", B, "--json")
    assert [m["brokerId"] for m in json.loads(out)[B]["inSyncReplicas"]] == [2]
    assert json.loads(out)[B]["notInSyncReplicas"] == []

    code, out, err = admin(capsys, "electMaster", "-a", "127.0.0.1:1", "-c", C, "-bn", B, "-b", "2")
    assert code == 1 and "no controller leader" in err
