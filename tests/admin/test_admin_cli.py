"""`orbitmq admin` run as a subprocess against a real NameServer and broker.

Each command is checked on its effect (read back through the broker or the NameServer) and on
its output: readable tables by default, JSON with --json; failures exit non-zero with one line.
One cluster serves the whole module to keep the runtime small.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from orbitmq.client import MQClientAPI, SendResult
from orbitmq.common.message import Message
from orbitmq.common.message_codec import decode_records
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import free_port
from tests.support.process import running
from tests.support.services import boot_broker, write_broker_conf

CLUSTER = "AdminCluster"
BROKER_NAME = "broker-admin"


@dataclass
class Cluster:
    namesrv: str
    addr: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp_path = tmp_path_factory.mktemp("admin-cli")
    with running(tmp_path / "procs") as runner:
        namesrv_port, port = free_port(), free_port()
        runner.start("namesrv", [f"listenPort={namesrv_port}"], ready_port=namesrv_port)
        namesrv = f"127.0.0.1:{namesrv_port}"
        conf = write_broker_conf(tmp_path / "broker.conf", port, tmp_path / "store", brokerClusterName=CLUSTER,
                                 brokerName=BROKER_NAME, namesrvAddr=namesrv)
        boot_broker(runner, conf, port, timeout=20)
        yield Cluster(namesrv, f"127.0.0.1:{port}")


def admin(cluster: Cluster | None, *args: str, namesrv: str | None = None,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "orbitmq", "admin", *args]
    if namesrv is not None:
        argv += ["-n", namesrv]
    elif cluster is not None:
        argv += ["-n", cluster.namesrv]
    full_env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    full_env.update(env or {})
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=full_env)


def ok(cluster: Cluster, *args: str) -> str:
    done = admin(cluster, *args)
    assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
    return done.stdout


def ok_json(cluster: Cluster, *args: str):
    return json.loads(ok(cluster, *args, "--json"))


def failed(cluster: Cluster | None, *args: str, code: int = 1, **kwargs) -> str:
    done = admin(cluster, *args, **kwargs)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"orbitmq admin {args[0]}: ")
    return lines[0]


def run(coro):
    return asyncio.run(coro)


async def _with_api(fn):
    api = MQClientAPI(timeout=5.0)
    try:
        return await fn(api)
    finally:
        await api.close()


def send_messages(cluster: Cluster, topic: str, count: int, queue_id: int = 0) -> list[SendResult]:
    async def go(api: MQClientAPI) -> list[SendResult]:
        results = []
        for i in range(count):
            msg = Message(topic, f"{topic}-body-{i}".encode(),
                          properties={"KEYS": f"{topic}-key-{i}", "TAGS": "admin",
                                      "UNIQ_KEY": f"{time.time_ns():032X}"})
            results.append(await api.send_message(cluster.addr, BROKER_NAME, msg, "PG_ADMIN", queue_id))
        return results
    return run(_with_api(go))


def test_update_topic_with_fifo_type_and_route(cluster: Cluster) -> None:
    out = ok(cluster, "updateTopic", "-c", CLUSTER, "-t", "AdminFifo", "-r", "3", "-w", "3",
             "-a", "+message.type=FIFO")
    assert f"create topic to {cluster.addr} success." in out
    config: TopicConfig | None = run(_with_api(lambda api: api.get_topic_config(cluster.addr, "AdminFifo")))
    assert config is not None and config.read_queue_nums == 3 and config.write_queue_nums == 3
    assert config.attributes == {"message.type": "FIFO"}

    ok(cluster, "updateTopic", "-b", cluster.addr, "-t", "AdminPlain", "-w", "2", "-r", "2", "-p", "6")
    table = ok(cluster, "topicRoute", "-t", "AdminFifo")
    assert table.splitlines()[0].split() == ["#ClusterName", "#BrokerName", "#BrokerAddr", "#ReadQueueNums",
                                             "#WriteQueueNums", "#Perm"]
    assert table.splitlines()[1].split() == [CLUSTER, BROKER_NAME, cluster.addr, "3", "3", "6"]
    route = ok_json(cluster, "topicRoute", "-t", "AdminPlain")
    assert route["queueDatas"] == [{"brokerName": BROKER_NAME, "readQueueNums": 2, "writeQueueNums": 2,
                                    "perm": 6, "topicSysFlag": 0}]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.addr}
    topics = ok_json(cluster, "topicList")
    assert {"AdminFifo", "AdminPlain"} <= set(topics)
    assert "AdminFifo" in ok(cluster, "topicList").splitlines()


def test_topic_status_and_delete_topic(cluster: Cluster) -> None:
    ok(cluster, "updateTopic", "-c", CLUSTER, "-t", "AdminStatus", "-r", "2", "-w", "2")
    send_messages(cluster, "AdminStatus", 3, queue_id=1)
    rows = ok_json(cluster, "topicStatus", "-t", "AdminStatus")
    by_queue = {r["queueId"]: r for r in rows}
    assert by_queue[1]["maxOffset"] == 3 and by_queue[1]["brokerName"] == BROKER_NAME
    assert by_queue[1]["lastUpdateTimestamp"] > 0 and by_queue[0]["maxOffset"] == 0
    # A queue never written starts at offset 0, as RocketMQ shows it, not -1.
    assert (by_queue[0]["minOffset"], by_queue[1]["minOffset"]) == (0, 0)
    assert ok(cluster, "topicStatus", "-t", "AdminStatus").splitlines()[0].split() == [
        "#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated"]

    out = ok(cluster, "deleteTopic", "-c", CLUSTER, "-t", "AdminStatus")
    assert "delete topic [AdminStatus] from NameServer success." in out
    assert "AdminStatus" not in ok_json(cluster, "topicList")
    assert "does not exist" in failed(cluster, "topicRoute", "-t", "AdminStatus")


def test_subscription_groups(cluster: Cluster) -> None:
    out = ok(cluster, "updateSubGroup", "-c", CLUSTER, "-g", "CG_ADMIN", "-r", "5", "-q", "2", "-o", "true",
             "-d", "false")
    assert f"create subscription group to {cluster.addr} success." in out
    config = run(_with_api(lambda api: api.get_subscription_group_config(cluster.addr, "CG_ADMIN")))
    assert (config.retry_max_times, config.retry_queue_nums) == (5, 2)
    assert config.consume_message_orderly is True and config.consume_broadcast_enable is False
    # Flags not given keep what the group already has.
    ok(cluster, "updateSubGroup", "-b", cluster.addr, "-g", "CG_ADMIN", "-s", "false")
    config = run(_with_api(lambda api: api.get_subscription_group_config(cluster.addr, "CG_ADMIN")))
    assert config.consume_enable is False and config.retry_max_times == 5

    out = ok(cluster, "deleteSubGroup", "-b", cluster.addr, "-g", "CG_ADMIN")
    assert f"delete subscription group [CG_ADMIN] from broker [{cluster.addr}]" in out
    assert run(_with_api(lambda api: api.get_subscription_group_config(cluster.addr, "CG_ADMIN"))) is None


def test_consumer_progress_and_reset_offset_by_time(cluster: Cluster) -> None:
    ok(cluster, "updateTopic", "-c", CLUSTER, "-t", "AdminProgress", "-r", "1", "-w", "1")
    ok(cluster, "updateSubGroup", "-c", CLUSTER, "-g", "CG_PROGRESS")
    send_messages(cluster, "AdminProgress", 5)
    run(_with_api(lambda api: api.update_consumer_offset(cluster.addr, "CG_PROGRESS", "AdminProgress", 0, 2)))

    progress = ok_json(cluster, "consumerProgress", "-g", "CG_PROGRESS")
    (row,) = [r for r in progress["offsets"] if r["topic"] == "AdminProgress"]
    assert (row["brokerOffset"], row["consumerOffset"], row["diff"]) == (5, 2, 3)
    assert progress["diffTotal"] == 3
    text = ok(cluster, "consumerProgress", "-g", "CG_PROGRESS", "-t", "AdminProgress")
    assert text.splitlines()[0].split()[:3] == ["#Topic", "#Broker", "Name"]
    assert "Diff Total: 3" in text
    groups = ok_json(cluster, "consumerProgress")
    assert {"group": "CG_PROGRESS", "consumeTps": 0.0, "diffTotal": 3} in [
        {**g, "consumeTps": 0.0} for g in groups]

    reset = ok_json(cluster, "resetOffsetByTime", "-g", "CG_PROGRESS", "-t", "AdminProgress", "-s", "now")
    assert reset["offsets"] == [{"brokerName": BROKER_NAME, "queueId": 0, "offset": 5}]
    out = ok(cluster, "resetOffsetByTime", "-g", "CG_PROGRESS", "-t", "AdminProgress", "-s", "0")
    assert out.splitlines()[1].split() == ["#brokerName", "#queueId", "#offset"]
    assert out.splitlines()[2].split() == [BROKER_NAME, "0", "0"]
    offset = run(_with_api(lambda api: api.query_consumer_offset(cluster.addr, "CG_PROGRESS", "AdminProgress", 0)))
    assert offset == 0


def test_query_messages_by_id_key_and_offset(cluster: Cluster) -> None:
    ok(cluster, "updateTopic", "-c", CLUSTER, "-t", "AdminQuery", "-r", "1", "-w", "1")
    results = send_messages(cluster, "AdminQuery", 3)

    by_id = ok_json(cluster, "queryMsgById", "-i", results[1].offset_msg_id)
    assert (by_id["topic"], by_id["body"], by_id["keys"]) == ("AdminQuery", "AdminQuery-body-1", ["AdminQuery-key-1"])
    assert by_id["queueOffset"] == 1 and by_id["offsetMsgId"] == results[1].offset_msg_id
    text = ok(cluster, "queryMsgById", "-i", results[1].offset_msg_id)
    assert "Topic:               AdminQuery" in text and "AdminQuery-body-1" in text
    by_uniq = ok_json(cluster, "queryMsgById", "-i", results[2].msg_id, "-t", "AdminQuery")
    assert by_uniq["body"] == "AdminQuery-body-2"

    found = ok_json(cluster, "queryMsgByKey", "-t", "AdminQuery", "-k", "AdminQuery-key-2")
    assert [m["body"] for m in found] == ["AdminQuery-body-2"]
    table = ok(cluster, "queryMsgByKey", "-t", "AdminQuery", "-k", "AdminQuery-key-0").splitlines()
    assert table[0].split() == ["#Message", "ID", "#QID", "#Offset"]
    assert table[1].split() == [results[0].msg_id, "0", "0"]

    at = ok_json(cluster, "queryMsgByOffset", "-t", "AdminQuery", "-b", BROKER_NAME, "-i", "0", "-o", "2")
    assert at["body"] == "AdminQuery-body-2" and at["queueOffset"] == 2
    assert "no message" in failed(cluster, "queryMsgByOffset", "-t", "AdminQuery", "-b", BROKER_NAME,
                                  "-i", "0", "-o", "9")


def test_cluster_list_and_broker_status(cluster: Cluster) -> None:
    rows = ok_json(cluster, "clusterList")
    (row,) = [r for r in rows if r["clusterName"] == CLUSTER]
    assert (row["brokerName"], row["brokerId"], row["brokerAddr"], row["reachable"]) == (
        BROKER_NAME, 0, cluster.addr, True)
    table = ok(cluster, "clusterList").splitlines()
    assert table[0].split()[:5] == ["#Cluster", "Name", "#Broker", "Name", "#BID"]
    assert any(line.split()[:4] == [CLUSTER, BROKER_NAME, "0", cluster.addr] for line in table[1:])

    status = ok_json(cluster, "brokerStatus", "-b", cluster.addr)
    assert status["brokerName"] == BROKER_NAME and status["clusterName"] == CLUSTER
    text = ok(cluster, "brokerStatus", "-b", cluster.addr)
    assert any(line.split(":", 1)[0].strip() == "brokerName" and line.endswith(BROKER_NAME)
               for line in text.splitlines())


def pull_all(cluster: Cluster, topic: str, group: str) -> int:
    async def go() -> int:
        sys_flag = build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False)
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
            "subVersion": "0", "expressionType": "TAG"})
        async with RemotingClient() as client:
            response = await client.invoke(cluster.addr, request, 5)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return len(decode_records(response.body, check_crc=False))
    return run(go())


def test_cluster_list_and_broker_status_show_traffic(cluster: Cluster) -> None:
    ok(cluster, "updateTopic", "-c", CLUSTER, "-t", "AdminTraffic", "-r", "1", "-w", "1")
    before = ok_json(cluster, "brokerStatus", "-b", cluster.addr)
    send_messages(cluster, "AdminTraffic", 8)
    assert pull_all(cluster, "AdminTraffic", "CG_TRAFFIC") == 8

    (row,) = [r for r in ok_json(cluster, "clusterList") if r["clusterName"] == CLUSTER]
    assert row["inTps"] > 0 and row["outTps"] > 0, row
    assert float(row["putTps"].split(" ")[0]) == row["inTps"] and len(row["putTps"].split(" ")) == 3
    assert row["inTotalToday"] >= 8 and row["outTotalToday"] >= 8, row
    table = ok(cluster, "clusterList").splitlines()
    (line,) = [line for line in table[1:] if line.split()[:2] == [CLUSTER, BROKER_NAME]]
    # Cells may hold spaces (the version): cut the columns where their headers start.
    in_at, out_at, wait_at = (table[0].index(h) for h in ("#InTPS", "#OutTPS", "#PCWait"))
    in_tps, out_tps = line[in_at:out_at].strip(), line[out_at:wait_at].strip()
    assert float(in_tps) > 0 and float(out_tps) > 0, table
    more = ok(cluster, "clusterList", "-m").splitlines()
    assert more[0].split()[-4:] == ["#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"]

    status = ok_json(cluster, "brokerStatus", "-b", cluster.addr)
    assert int(status["msgPutTotalTodayNow"]) - int(before["msgPutTotalTodayNow"]) == 8
    assert int(status["msgGetTotalTodayNow"]) - int(before["msgGetTotalTodayNow"]) == 8
    for key in ("putTps", "getTransferedTps", "getFoundTps", "getMissTps", "getTotalTps"):
        assert len(status[key].split(" ")) == 3, (key, status[key])
    assert float(status["getTransferedTps"].split(" ")[0]) > 0


def test_namesrv_from_environment(cluster: Cluster) -> None:
    done = admin(None, "topicList", "--json", env={"NAMESRV_ADDR": cluster.namesrv})
    assert done.returncode == 0, done.stderr
    assert "TBW102" in json.loads(done.stdout)


def test_failures_exit_non_zero_with_one_line(cluster: Cluster) -> None:
    dead = f"127.0.0.1:{free_port()}"
    assert "no NameServer reachable" in failed(None, "clusterList", namesrv=dead)
    assert "no NameServer address" in failed(None, "topicList")
    assert "NoSuchTopic" in failed(cluster, "topicStatus", "-t", "NoSuchTopic")
    assert "cluster NoSuchCluster does not exist" in failed(cluster, "updateTopic", "-c", "NoSuchCluster",
                                                              "-t", "AdminX")
    assert "message.type" in failed(cluster, "updateTopic", "-c", CLUSTER, "-t", "AdminBad",
                                    "-a", "+message.type=NOPE")
    assert "-t" in failed(cluster, "updateTopic", "-c", CLUSTER, code=2)
    assert "invalid choice" in failed(cluster, "noSuchCommand", code=2)
    assert "bad timestamp" in failed(cluster, "resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday",
                                     code=2)
    refused = failed(cluster, "updateTopic", "-b", cluster.addr, "-t", "bad topic!")
    assert "code" in refused
