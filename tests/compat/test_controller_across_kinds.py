"""Controller mode across kinds (issue 24, item 2): a broker set of one kind under the other
kind's controller.

(a) Two Apache RocketMQ 5.5.0 brokers (tests/support/apache.py; enableControllerMode, one
brokerName, brokerId -1 / SLAVE as upstream's quick start) under a group of one or three OrbitMQ
controllers; (b) two OrbitMQ brokers under one or three Apache controllers (DLedger). With three
peers each broker is given every address and finds the leader by GET_METADATA_INFO. Each kind's
brokers speak AutoSwitchHA among themselves; what crosses kinds is the controller protocol:
GetNextBrokerId/ApplyBrokerId/RegisterBroker, heartbeats, GetReplicaInfo, AlterSyncStateSet, the
controller's election of a new master and its NOTIFY_BROKER_ROLE_CHANGED.

In each: the set elects a master and both replicas enter the SyncStateSet; messages sent to the
master (allAckInSyncStateSet: SEND_OK means the slave acked them) survive a kill -9 of the master,
after which the controller elects the slave (the only other member of the SyncStateSet), the
master epoch and the SyncStateSet epoch grow by one, and GET_REPLICA_INFO, `orbitmq admin
getSyncStateSet`, Apache's mqadmin getSyncStateSet, the NameServer's route and the new master's
epoch cache and HA status all say the same; every message is then pulled from the new master.
The old master, restarted on its store, comes back into the SyncStateSet under its brokerId.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.client.results import SendStatus
from orbitmq.common.fastjson import loads
from orbitmq.common.message import Message
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode
from tests.interop.java.mqadmin.tools import mqadmin, orbit, tabbed
from tests.support import ManagedProcess, ProcessRunner, running, start_namesrv
from tests.support.apache import Apache, ApacheBroker
from tests.support.net import free_port, free_port_pair
from tests.support.pulling import pull_queue
from tests.support.services import aboot_broker, astart_broker, write_properties
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

CLUSTER = "CtlAcross"
TOPIC = "CtlAcrossTopic"
GROUP = "CtlAcrossReader"
MESSAGES = 30
CONTROLLER_BOOT_TEXT = "The Controller boot success"  # OrbitMQ's (tests/support/ha_cluster.py)
# Short timings, RocketMQ's keys on both kinds (ControllerConfig, BrokerConfig, MessageStoreConfig):
# a dead master is seen in ~3 s, replica info is polled every second.
CONTROLLER_TIMINGS = {"scanNotActiveBrokerInterval": 1000, "scanInactiveMasterInterval": 1000}
BROKER_KEYS: dict[str, object] = {
    "brokerClusterName": CLUSTER, "brokerId": -1, "brokerRole": "SLAVE", "enableControllerMode": "true",
    "allAckInSyncStateSet": "true", "controllerHeartBeatTimeoutMills": 3000, "brokerHeartbeatInterval": 500,
    "syncBrokerMetadataPeriod": 1000, "checkSyncStateSetPeriod": 1000, "syncControllerMetadataPeriod": 2000,
    "registerNameServerPeriod": 2000, "haMaxTimeSlaveNotCatchup": 3000, "haSendHeartbeatInterval": 1000,
    "haHousekeepingInterval": 6000, "mappedFileSizeCommitLog": 16 * 1024 * 1024, "autoCreateTopicEnable": "false",
}
TIMEOUT = 90.0  # two busy cores, JVMs starting


@dataclass
class Replica:
    addr: str
    proc: ManagedProcess
    restart: Callable[[], Awaitable[ManagedProcess]]  # the same broker again, on its store and port


async def _replicas_info(api: MQClientAPI, controller: str, broker_name: str) -> dict[str, Any]:
    """CONTROLLER_GET_SYNC_STATE_DATA (1006): BrokerReplicasInfo's entry of ``broker_name``."""
    response = await api.call(controller, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                              body=json.dumps([broker_name]).encode())
    return loads(response.body.decode("utf-8")).get("replicasInfoTable", {}).get(broker_name, {})


async def _route_members(api: MQClientAPI, namesrv: str, broker_name: str) -> dict[int, str]:
    info = await api.get_cluster_info(namesrv)
    data = info.broker_addr_table.get(broker_name)
    return dict(data.broker_addrs) if data else {}


async def _epoch_cache(api: MQClientAPI, addr: str) -> dict[str, Any]:
    """GET_BROKER_EPOCH_CACHE (1007 as a broker code): the replica's EpochEntryCache."""
    response = await api.call(addr, RequestCode.GET_BROKER_EPOCH_CACHE, timeout=5)
    return loads(response.body.decode("utf-8"))


async def _ha_status(api: MQClientAPI, addr: str) -> dict[str, Any]:
    """GET_BROKER_HA_STATUS (907): the broker's HARuntimeInfo (AutoSwitchHAService#getRuntimeInfo)."""
    response = await api.call(addr, RequestCode.GET_BROKER_HA_STATUS, timeout=5)
    return loads(response.body.decode("utf-8"))


async def _check_replica_info(api: MQClientAPI, controller: str, broker_name: str, info: dict[str, Any],
                              dead: tuple[int, str]) -> None:
    """What a broker reads of the controller after the failover, in upstream's field names:
    CONTROLLER_GET_REPLICA_INFO (1004) answers GetReplicaInfoResponseHeader and a SyncStateSet
    body; GET_SYNC_STATE_DATA's ReplicasInfo lists the dead master as not in sync, not alive
    (ReplicasInfoManager#getSyncStateData)."""
    response = await api.call(controller, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": broker_name})
    fields = response.ext_fields or {}
    assert {k: fields.get(k) for k in ("masterBrokerId", "masterAddress", "masterEpoch")} == {
        "masterBrokerId": str(info["masterBrokerId"]), "masterAddress": info["masterAddress"],
        "masterEpoch": str(info["masterEpoch"])}, fields
    body = loads(response.body.decode("utf-8"))
    assert body == {"syncStateSet": [int(info["masterBrokerId"])],
                    "syncStateSetEpoch": int(info["syncStateSetEpoch"])}, body
    assert set(info) == {"masterBrokerId", "masterAddress", "masterEpoch", "syncStateSetEpoch", "inSyncReplicas",
                         "notInSyncReplicas"}, info
    assert info["notInSyncReplicas"] == [{"brokerName": broker_name, "brokerId": dead[0], "brokerAddress": dead[1],
                                          "alive": False}], info
    assert info["inSyncReplicas"] == [{"brokerName": broker_name, "brokerId": int(info["masterBrokerId"]),
                                       "brokerAddress": info["masterAddress"], "alive": True}], info


def _in_sync(text: str) -> set[str]:
    """mqadmin getSyncStateSet's "InSyncReplica: ReplicaIdentity{..., brokerAddress='a', ...}"."""
    return {line.split("brokerAddress='")[1].split("'")[0] for line in text.splitlines()
            if line.startswith("InSyncReplica:")}


async def _elect_kill_elect(tmp: Path, namesrv: str, controller: str, broker_name: str,
                            replicas: list[Replica], seen: Callable[[], str]) -> None:
    """The scenario of the module docstring on a started broker set."""
    api = MQClientAPI(timeout=10)
    everyone = {r.addr for r in replicas}
    info: dict[str, Any] = {}
    try:
        async def all_in_sync() -> bool:
            nonlocal info
            info = await _replicas_info(api, controller, broker_name)
            in_sync = {m["brokerAddress"] for m in info.get("inSyncReplicas", [])}
            members = await _route_members(api, namesrv, broker_name)
            master = info.get("masterAddress")
            return in_sync == everyone and master in everyone and members.get(0) == master

        await wait_until(all_in_sync, "a master and both replicas in the SyncStateSet", TIMEOUT,
                         seen=lambda: (info, seen()))
        master = info["masterAddress"]
        dead_id = int(info["masterBrokerId"])
        ha = await _ha_status(api, master)  # the master's own SyncStateSet: itself and one slave
        assert ha["master"] is True and int(ha["inSyncSlaveNums"]) == 1, ha
        before = (int(info["masterEpoch"]), int(info["syncStateSetEpoch"]))
        config = TopicConfig(topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2)
        for r in replicas:  # a new master must have the topic at once (slaves copy it later)
            await api.create_topic(r.addr, config)
        sent: dict[int, list[bytes]] = {0: [], 1: []}
        for i in range(MESSAGES):
            body = b"%03d:" % i + bytes([65 + i % 26]) * (100 + 997 * i)
            result = await api.send_message(master, broker_name, Message(topic=TOPIC, body=body), "CtlPG", i % 2)
            assert result.status == SendStatus.SEND_OK, f"message {i}: {result.status} (every in-sync replica acks)"
            sent[i % 2].append(body)

        killed = next(r for r in replicas if r.addr == master)
        await asyncio.to_thread(killed.proc.kill)  # kill -9 by PID
        await api.remoting.close_channel(master)
        survivor = next(iter(everyone - {master}))

        async def reelected() -> bool:
            nonlocal info
            info = await _replicas_info(api, controller, broker_name)
            return info.get("masterAddress") == survivor

        await wait_until(reelected, "the slave in the SyncStateSet elected", TIMEOUT, seen=lambda: (info, seen()))
        # ReplicasInfoManager#electMaster: a new master epoch, and a SyncStateSet of the new master
        # alone under the next SyncStateSet epoch.
        assert (int(info["masterEpoch"]), int(info["syncStateSetEpoch"])) == (before[0] + 1, before[1] + 1), info
        assert {m["brokerAddress"] for m in info["inSyncReplicas"]} == {survivor}, info
        master_id = int(info["masterBrokerId"])
        await _check_replica_info(api, controller, broker_name, info, (dead_id, master))

        async def broker_agrees() -> bool:
            cache = await _epoch_cache(api, survivor)
            members = await _route_members(api, namesrv, broker_name)
            # brokerId 0: ReplicasManager#changeToMaster sets MixAll.MASTER_ID
            return (members == {0: survivor} and cache["epochList"]
                    and int(cache["epochList"][-1]["epoch"]) == before[0] + 1 and int(cache["brokerId"]) == 0)

        await wait_until(broker_agrees, "the new master's epoch cache and the route", TIMEOUT, seen=seen)
        ha = await _ha_status(api, survivor)
        assert ha["master"] is True and int(ha["inSyncSlaveNums"]) == 0, ha

        # Both admin tools read the controller's view as the test did.
        orbit_sss = (await asyncio.to_thread(orbit, namesrv, "getSyncStateSet", "-a", controller, "-b",
                                             broker_name))[broker_name]
        assert (orbit_sss["masterAddress"], int(orbit_sss["masterEpoch"]), int(orbit_sss["syncStateSetEpoch"]),
                int(orbit_sss["masterBrokerId"])) == (survivor, before[0] + 1, before[1] + 1, master_id), orbit_sss
        (run,) = await asyncio.to_thread(mqadmin, tmp / "mqadmin", [
            ["getSyncStateSet", "-n", namesrv, "-a", controller, "-b", broker_name]])
        head = tabbed(run.ok())[0]
        assert (head["brokerName"], head["MasterBrokerId"], head["MasterAddr"], head["MasterEpoch"],
                head["SyncStateSetEpoch"], head["SyncStateSetNums"]) == (
            broker_name, str(master_id), survivor, str(before[0] + 1), str(before[1] + 1), "1"), run.out
        assert _in_sync(run.out) == {survivor}, run.out

        for queue in (0, 1):
            got = [m.body for m in await pull_queue(api, survivor, GROUP, TOPIC, queue)]
            assert got == sent[queue], f"queue {queue} on the new master: {len(got)} of {len(sent[queue])}"

        # The old master again, on its store: it registers under its brokerId (its identity file),
        # follows the new master, catches up, and the new master adds it back to the SyncStateSet
        # (AlterSyncStateSet) under the next SyncStateSet epoch, the master epoch unchanged.
        killed.proc = await killed.restart()

        async def rejoined() -> bool:
            nonlocal info
            info = await _replicas_info(api, controller, broker_name)
            return {m["brokerAddress"] for m in info.get("inSyncReplicas", [])} == everyone

        await wait_until(rejoined, "the old master back in the SyncStateSet", TIMEOUT, seen=lambda: (info, seen()))
        assert (info["masterAddress"], int(info["masterEpoch"]), int(info["syncStateSetEpoch"])) == (
            survivor, before[0] + 1, before[1] + 2), info
        assert {m["brokerAddress"]: m["brokerId"] for m in info["inSyncReplicas"]}[master] == dead_id, info
        cache = await _epoch_cache(api, master)  # the slave's epochs: the master's, truncated to its own
        assert [int(e["epoch"]) for e in cache["epochList"]] == [
            int(e["epoch"]) for e in (await _epoch_cache(api, survivor))["epochList"]], cache
    finally:
        await api.close()


def _logs(runner: ProcessRunner) -> Callable[[], str]:
    return lambda: "\n".join(f"== {p.name}\n{p.log_tail(15)}" for p in runner.processes)


async def _controller_leader(api: MQClientAPI, controllers: list[str]) -> str:
    """The leader's address, as a broker's ReplicasManager#updateControllerMetadata finds it: any
    peer answers CONTROLLER_GET_METADATA_INFO (1005) with GetMetaDataResponseHeader."""
    leader = ""

    async def elected() -> str:
        nonlocal leader
        for addr in controllers:
            fields = (await api.call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)).ext_fields or {}
            if fields.get("isLeader") == "true":
                leader = addr
                return addr
        return ""

    await wait_until(elected, "a controller leader", TIMEOUT)
    return leader


@pytest.mark.parametrize("peers", [1, 3])
async def test_apache_brokers_under_orbitmq_controller(tmp_path: Path, peers: int) -> None:
    """(a) Apache brokers, an OrbitMQ NameServer and a group of ``peers`` OrbitMQ controllers
    (Raft): with three, each Apache broker is given every address and finds the leader itself."""
    with running(tmp_path / "procs") as runner:
        _, namesrv = start_namesrv(runner)
        nodes = [(free_port(), free_port()) for _ in range(peers)]  # (raft, Remoting)
        raft_peers = ";".join(f"n{i}-127.0.0.1:{raft}" for i, (raft, _) in enumerate(nodes))
        procs = []
        for i, (_, port) in enumerate(nodes):
            conf = write_properties(tmp_path / f"controller-{i}.conf", {
                "controllerDLegerGroup": "OrbitCtl", "controllerDLegerPeers": raft_peers,
                "controllerDLegerSelfId": f"n{i}", "listenPort": port, "bindAddress": "127.0.0.1",
                "controllerStorePath": tmp_path / f"controller-{i}-store", **CONTROLLER_TIMINGS})
            procs.append(runner.spawn("controller", ["-c", str(conf)], name=f"orbit-controller-{i}"))
        for proc, (_, port) in zip(procs, nodes, strict=True):
            await proc.async_wait_ready(("127.0.0.1", port), CONTROLLER_BOOT_TEXT, 60)
        addrs = [f"127.0.0.1:{port}" for _, port in nodes]
        apache = Apache(runner)
        brokers = [apache.broker(namesrv, f"apache-{i}", broker_name="ctl-apache", cluster=CLUSTER, wait=False,
                                 **{**BROKER_KEYS, "controllerAddr": ";".join(addrs)}) for i in range(2)]
        for b in brokers:  # the boot line only: the NameServer lists a replica once it has a role
            b.process.wait_ready(("127.0.0.1", int(b.addr.rsplit(":", 1)[1])), "boot success", TIMEOUT)
        api = MQClientAPI(timeout=10)
        try:
            controller = await _controller_leader(api, addrs)
        finally:
            await api.close()

        def restart(b: ApacheBroker) -> Callable[[], Awaitable[ManagedProcess]]:
            return lambda: asyncio.to_thread(apache.start_broker_conf, b.conf, b.process.name, TIMEOUT)

        await _elect_kill_elect(tmp_path, namesrv, controller, "ctl-apache",
                                [Replica(b.addr, b.process, restart(b)) for b in brokers], _logs(runner))


@pytest.mark.parametrize("peers", [1, 3])
async def test_orbitmq_brokers_under_apache_controller(tmp_path: Path, peers: int) -> None:
    """(b) OrbitMQ brokers and NameServer, a group of ``peers`` Apache controllers (DLedger): with
    three, each OrbitMQ broker is given every address and finds the leader itself."""
    with running(tmp_path / "procs") as runner:
        _, namesrv = start_namesrv(runner)
        addrs = [addr for _, addr in Apache(runner).controllers(peers, group="ApacheCtl", **CONTROLLER_TIMINGS)]
        api = MQClientAPI(timeout=10)
        try:
            controller = await _controller_leader(api, addrs)
        finally:
            await api.close()
        replicas = []
        for i in range(2):
            port = free_port_pair()
            proc, addr = await astart_broker(runner, tmp_path / f"orbit-{i}", namesrv, f"orbit-{i}",
                                             port=port, haListenPort=port + 1, brokerName="ctl-orbit",
                                             **{**BROKER_KEYS, "controllerAddr": ";".join(addrs)})
            conf, name = tmp_path / f"orbit-{i}" / f"orbit-{i}.conf", f"orbit-{i}"
            replicas.append(Replica(addr, proc, lambda conf=conf, port=port, name=name: aboot_broker(
                runner, conf, port, name=name)))
        await _elect_kill_elect(tmp_path, namesrv, controller, "ctl-orbit", replicas, _logs(runner))
