"""Controller mode with real processes: one controller (a Raft group of one), a NameServer and
two brokers of one broker set (brokerId -1 / SLAVE, as RocketMQ's quick start).

One broker is elected master and routed as brokerId 0, the other registers with its controller
id and replicates; after ``kill -9`` of the master the slave is elected and routed as brokerId
0; the old master, restarted on the same store, rejoins as a slave with its old id.
Local helpers live in this file on purpose.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from orbitmq.common.fastjson import loads
from orbitmq.common.message import properties_to_string
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import aboot_broker, free_port, write_broker_conf, write_properties

CLUSTER = "CtlCluster"
BROKER_NAME = "broker-ctl"
TOPIC = "CtlTopic"
GROUP = "CG_CTL"
BROKER_TIMINGS = {"controllerHeartBeatTimeoutMills": "3000", "brokerHeartbeatInterval": "500",
                  "syncBrokerMetadataPeriod": "1000", "checkSyncStateSetPeriod": "1000",
                  "syncControllerMetadataPeriod": "2000", "registerNameServerPeriod": "2000"}


async def eventually(check, what: str, timeout: float = 40.0):  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = await check()
        except (OSError, TimeoutError, ConnectionError) as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.2)


async def route_members(client: RemotingClient, namesrv: str) -> dict[int, str]:
    response = await client.invoke(namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
    if response.code != ResponseCode.SUCCESS:
        return {}
    table = loads(response.body).get("brokerAddrTable", {})
    entry = table.get(BROKER_NAME) or {}
    return {int(k): v for k, v in (entry.get("brokerAddrs") or {}).items()}


async def epoch_cache(client: RemotingClient, addr: str) -> dict[str, Any]:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE), 3)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return loads(response.body)


async def query_offset(client: RemotingClient, addr: str) -> int:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "setZeroIfNotFound": "false"}), 3)
    return int(response.ext_fields["offset"]) if response.code == ResponseCode.SUCCESS else -1


async def send(client: RemotingClient, addr: str, body: bytes) -> RemotingCommand:
    props = properties_to_string({"UNIQ_KEY": f"{time.time_ns():032X}"})
    return await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_CTL", "b": TOPIC, "c": "TBW102", "d": "2", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}, body), 5)


async def test_master_election_failover_and_rejoin(procs, tmp_path: Path) -> None:
    raft_port, ctl_port, ns_port = free_port(), free_port(), free_port()
    ctl_conf = write_properties(tmp_path / "controller.conf", {
        "controllerDLegerGroup": "G", "controllerDLegerPeers": f"n0-127.0.0.1:{raft_port}",
        "controllerDLegerSelfId": "n0", "listenPort": ctl_port, "controllerStorePath": tmp_path / "ctl-store",
        "scanNotActiveBrokerInterval": 1000, "scanInactiveMasterInterval": 1000})
    await procs.astart("controller", ["-c", str(ctl_conf)], ready_port=ctl_port, timeout=30, name="controller")
    await procs.astart("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}",
                                   f"configStorePath={tmp_path / 'ns.properties'}"], ready_port=ns_port)
    namesrv = f"127.0.0.1:{ns_port}"
    brokers: dict[str, tuple[int, Path]] = {}
    for name in ("b0", "b1"):
        port = free_port()
        conf = write_broker_conf(tmp_path / f"{name}.conf", port, tmp_path / f"store-{name}",
                                 brokerClusterName=CLUSTER, brokerName=BROKER_NAME, brokerId=-1, brokerRole="SLAVE",
                                 haListenPort=free_port(), namesrvAddr=namesrv, enableControllerMode="true",
                                 controllerAddr=f"127.0.0.1:{ctl_port}", autoCreateTopicEnable="true",
                                 **BROKER_TIMINGS)
        brokers[f"127.0.0.1:{port}"] = (port, conf)
    procs_by_addr = {}
    for addr, (port, conf) in brokers.items():
        procs_by_addr[addr] = await aboot_broker(procs, conf, port, name=f"broker-{port}")

    async with RemotingClient() as client:
        # -- one master routed as brokerId 0, the other a slave with its controller id -----------
        async def two_members() -> dict[int, str] | None:
            members = await route_members(client, namesrv)
            return members if len(members) == 2 and 0 in members else None
        members = await eventually(two_members, "a master and a slave in the route")
        master = members[0]
        slave = next(a for i, a in members.items() if i != 0)
        slave_id = next(i for i, a in members.items() if i != 0)
        assert slave_id >= 1
        master_cache = await epoch_cache(client, master)
        assert master_cache["brokerId"] == 0 and master_cache["epochList"][-1]["epoch"] >= 1
        assert (await epoch_cache(client, slave))["brokerId"] == slave_id

        # -- writes go to the master and reach the slave's CommitLog; the slave refuses them ----
        for i in range(10):
            response = await send(client, master, f"m{i}".encode())
            assert response.code == ResponseCode.SUCCESS, response.remark
        refused = await send(client, slave, b"nope")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE

        master_max = (await epoch_cache(client, master))["maxOffset"]

        async def slave_caught_up() -> bool:
            return (await epoch_cache(client, slave))["maxOffset"] >= master_max
        await eventually(slave_caught_up, "slave CommitLog caught up with the master")

        # -- SlaveSynchronize: the topic and a committed consumer offset reach the slave ---------
        response = await client.invoke(master, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "7"}), 5)
        assert response.code == ResponseCode.SUCCESS, response.remark

        async def metadata_on_slave() -> bool:
            topics = loads((await client.invoke(slave, RemotingCommand.request(
                RequestCode.GET_ALL_TOPIC_CONFIG), 3)).body)
            return TOPIC in topics["topicConfigTable"] and await query_offset(client, slave) == 7
        await eventually(metadata_on_slave, "topic and consumer offset copied to the slave")

        # -- kill -9 the master: the slave is elected and registers as brokerId 0 ----------------
        old_master_proc = procs_by_addr[master]
        await asyncio.to_thread(old_master_proc.kill)
        await client.close_channel(master)

        async def new_master() -> bool:
            return (await route_members(client, namesrv)).get(0) == slave
        await eventually(new_master, "the slave routed as the new master", timeout=60)
        promoted = await epoch_cache(client, slave)
        assert promoted["brokerId"] == 0
        assert promoted["epochList"][-1]["epoch"] > master_cache["epochList"][-1]["epoch"]
        response = await send(client, slave, b"after-failover")
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert await query_offset(client, slave) == 7  # the group resumes where it was

        async def topic_routed_to_new_master() -> bool:
            response = await client.invoke(namesrv, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 3)
            if response.code != ResponseCode.SUCCESS:
                return False
            return loads(response.body)["brokerDatas"][0]["brokerAddrs"].get("0") == slave
        await eventually(topic_routed_to_new_master, "the topic routed to the new master")

        # -- the old master restarts on its store and rejoins as a slave with its old id ---------
        port, conf = brokers[master]
        await aboot_broker(procs, conf, port, name=f"broker-{port}-restarted")

        async def rejoined() -> dict[int, str] | None:
            members = await route_members(client, namesrv)
            return members if members.get(0) == slave and master in members.values() else None
        members = await eventually(rejoined, "the old master back as a slave", timeout=60)
        old_id = next(i for i, a in members.items() if a == master)
        assert old_id not in (0, slave_id)
        identity = (tmp_path / "store-b0" / "brokerIdentity", tmp_path / "store-b1" / "brokerIdentity")
        ids = sorted(int(p.read_text().rsplit("#", 1)[1]) for p in identity)
        assert ids == sorted([old_id, slave_id])
        assert (await send(client, master, b"nope")).code == ResponseCode.SERVICE_NOT_AVAILABLE
        promoted_max = (await epoch_cache(client, slave))["maxOffset"]

        async def old_master_caught_up() -> bool:
            return (await epoch_cache(client, master))["maxOffset"] >= promoted_max
        await eventually(old_master_caught_up, "the old master replicating from the new one", timeout=60)
