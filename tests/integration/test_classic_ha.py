"""Classic master/slave (brokerRole, no controller) with real processes on loopback.

A master (ASYNC_MASTER) and a slave (SLAVE, brokerId 1) of one broker set: the slave learns the
master's HA address from its NameServer registration, replicates the CommitLog (read back from
the slave with slaveReadEnable), and SlaveSynchronize copies topics, groups and consumer offsets.
Local helpers live in this file on purpose.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.route import TopicRouteData, parse_json
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import astart_broker, free_port

TOPIC = "HaTopic"
GROUP = "CG_HA"
MESSAGES = 20


async def invoke_ok(client: RemotingClient, addr: str, code: int, fields: dict[str, str] | None = None,
                    body: bytes = b"") -> RemotingCommand:
    response = await client.invoke(addr, RemotingCommand.request(code, fields or {}, body), 5)
    assert response.code == ResponseCode.SUCCESS, (code, response.code, response.remark)
    return response


async def eventually(check, what: str, timeout: float = 30.0):  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def pull(client: RemotingClient, addr: str, queue_id: int, offset: int) -> RemotingCommand:
    sys_flag = build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False)
    return await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"}), 5)


async def query_offset(client: RemotingClient, addr: str, queue_id: int) -> int:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "setZeroIfNotFound": "false"}), 5)
    return int(response.ext_fields["offset"]) if response.code == ResponseCode.SUCCESS else -1


async def test_master_slave_replicate_commitlog_and_metadata(procs, tmp_path: Path) -> None:
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    await procs.astart("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}",
                                   f"configStorePath={tmp_path / 'namesrv.properties'}"], ready_port=ns_port)
    ports = {"master": free_port(), "slave": free_port()}
    ha_ports = {"master": free_port(), "slave": free_port()}
    roles = {"slave": {"brokerId": 1, "brokerRole": "SLAVE", "slaveReadEnable": "true"},
             "master": {"brokerId": 0, "brokerRole": "ASYNC_MASTER"}}
    # The slave starts first: it must wait for its master's registration (1 s re-registration).
    for name in ("slave", "master"):
        await astart_broker(procs, tmp_path, namesrv, name, port=ports[name], store=tmp_path / f"store-{name}",
                            brokerClusterName="HaCluster", brokerName="broker-ha", registerNameServerPeriod=30000,
                            haListenPort=ha_ports[name], **roles[name])
    master, slave = f"127.0.0.1:{ports['master']}", f"127.0.0.1:{ports['slave']}"

    async with RemotingClient() as client:
        await invoke_ok(client, master, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        await invoke_ok(client, master, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                        body=json.dumps({"groupName": GROUP, "retryMaxTimes": 7}).encode())
        # The slave refuses writes (SERVICE_NOT_AVAILABLE).
        props = properties_to_string({"UNIQ_KEY": "0" * 32})
        send_fields = {"a": "PG_HA", "b": TOPIC, "c": "TBW102", "d": "2", "e": "0", "f": "0",
                       "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
        refused = await client.invoke(slave, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_fields, b"x"))
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        bodies = []
        for i in range(MESSAGES):
            body = f"ha-{i}".encode()
            bodies.append(body)
            await invoke_ok(client, master, RequestCode.SEND_MESSAGE_V2, {**send_fields, "e": "0"}, body)
        await invoke_ok(client, master, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "11"})

        # The route lists both replicas of the set: master as 0, slave as 1.
        async def both_in_route() -> bool:
            response = await client.invoke(namesrv, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)
            if response.code != ResponseCode.SUCCESS:
                return False
            data = TopicRouteData.decode(response.body)
            return data.broker_datas[0].broker_addrs == {0: master, 1: slave}
        await eventually(both_in_route, "route with master 0 and slave 1")

        # The CommitLog reached the slave: the messages read back from it, in order.
        async def replicated() -> list[bytes] | None:
            response = await pull(client, slave, 0, 0)
            if response.code != ResponseCode.SUCCESS:
                return None
            got = [m.body for m in decode_records(response.body)]
            return got if len(got) == MESSAGES else None
        assert await eventually(replicated, "messages on the slave") == bodies

        # GET_BROKER_HA_STATUS (907, mqadmin haStatus): the master sees one slave caught up.
        async def ha_status_caught_up() -> bool:
            status = parse_json((await invoke_ok(client, master, RequestCode.GET_BROKER_HA_STATUS)).body)
            conns = status["haConnectionInfo"]
            return (status["master"] is True and len(conns) == 1 and conns[0]["diff"] == 0
                    and conns[0]["slaveAckOffset"] == status["masterCommitLogMaxOffset"] and conns[0]["inSync"])
        await eventually(ha_status_caught_up, "haStatus of the master with its slave caught up")
        slave_status = parse_json((await invoke_ok(client, slave, RequestCode.GET_BROKER_HA_STATUS)).body)
        assert slave_status["master"] is False and slave_status["haClientRuntimeInfo"]["activated"] is True

        # SlaveSynchronize: topic config, subscription group and consumer offset on the slave.
        async def metadata_copied() -> bool:
            topics = parse_json((await invoke_ok(client, slave, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
            groups = parse_json((await invoke_ok(client, slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
            return (TOPIC in topics["topicConfigTable"] and GROUP in groups["subscriptionGroupTable"]
                    and await query_offset(client, slave, 0) == 11)
        await eventually(metadata_copied, "topics, groups and offsets on the slave", timeout=40)
