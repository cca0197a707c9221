"""mqadmin's operator commands (sdk/admin/commands/: topic, namesrv, broker, connection, consumer,
offset, stats, message, queue, cluster) run as `orbitmq admin` subprocesses against a real
NameServer and broker: each command's effect, read back through the broker or the NameServer,
its output layout and --json, and its error paths (missing or malformed flags print the usage
and exit 2; unknown topics, groups, brokers and config keys exit 1 and change nothing).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.admin import cli
from orbitmq.client import MQClientAPI, ProducerData, SendResult
from orbitmq.client.api import ConsumerData
from orbitmq.common import fastjson
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.message import Message, MessageExt
from orbitmq.common.message_codec import decode_records
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import free_port
from tests.support.process import running
from tests.support.services import boot_broker, write_broker_conf

CLUSTER = "OpsCluster"
BROKER_NAME = "broker-ops"
SEGMENT = 128 * 1024  # small CommitLog segments, so deleteExpiredCommitLog has files to delete


@dataclass
class Cluster:
    namesrv: str
    addr: str
    store: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp_path = tmp_path_factory.mktemp("admin-ops")
    with running(tmp_path / "procs") as runner:
        namesrv_port, port = free_port(), free_port()
        runner.start("namesrv", [f"listenPort={namesrv_port}", f"kvConfigPath={tmp_path / 'kv.json'}",
                                 f"configStorePath={tmp_path / 'namesrv.properties'}"], ready_port=namesrv_port)
        namesrv = f"127.0.0.1:{namesrv_port}"
        # Retention runs often but, until an operator asks, deletes nothing: not its hour, the disk
        # never "full", files kept for 72 hours.
        not_now = (time.localtime().tm_hour + 12) % 24
        conf = write_broker_conf(tmp_path / "broker.conf", port, tmp_path / "store", brokerClusterName=CLUSTER,
                                 brokerName=BROKER_NAME, namesrvAddr=namesrv, mappedFileSizeCommitLog=SEGMENT,
                                 cleanResourceInterval=200, deleteWhen=f"{not_now:02d}", diskMaxUsedSpaceRatio=99,
                                 fileReservedTime=72)
        boot_broker(runner, conf, port, timeout=20)
        yield Cluster(namesrv, f"127.0.0.1:{port}", tmp_path / "store")


def admin(cluster: Cluster, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "orbitmq", "admin", *args, "-n", cluster.namesrv]
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


def ok(cluster: Cluster, *args: str, cwd: Path | None = None) -> str:
    done = admin(cluster, *args, cwd=cwd)
    assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
    return done.stdout


def ok_json(cluster: Cluster, *args: str, cwd: Path | None = None):
    return json.loads(ok(cluster, *args, "--json", cwd=cwd))


def failed(cluster: Cluster, *args: str) -> str:
    """A refused command: exit 1, one line on stderr naming the command."""
    done = admin(cluster, *args)
    assert done.returncode == 1, (args, done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"orbitmq admin {args[0]}: "), done.stderr
    return lines[-1]


def usage_error(cluster: Cluster, *args: str) -> str:
    """A missing or malformed flag: the usage on stdout, the reason on stderr, exit 2."""
    done = admin(cluster, *args)
    assert done.returncode == 2, (args, done.returncode, done.stdout, done.stderr)
    assert done.stdout.startswith(f"usage: orbitmq admin {args[0]}"), done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"orbitmq admin {args[0]}: "), line
    return line


def run(coro):
    return asyncio.run(coro)


async def _with_api(fn):
    api = MQClientAPI(timeout=5.0)
    try:
        return await fn(api)
    finally:
        await api.close()


def send_messages(cluster: Cluster, topic: str, count: int, queue_id: int = 0, tags: str = "ops",
                  size: int = 0) -> list[SendResult]:
    async def go(api: MQClientAPI) -> list[SendResult]:
        results = []
        for i in range(count):
            body = f"{topic}-body-{i}".encode() + b"x" * size
            msg = Message(topic, body, properties={"KEYS": f"{topic}-key-{i}", "TAGS": tags,
                                                   "UNIQ_KEY": f"{time.time_ns():032X}"})
            results.append(await api.send_message(cluster.addr, BROKER_NAME, msg, "PG_OPS", queue_id))
        return results
    return run(_with_api(go))


def commit_offset(cluster: Cluster, group: str, topic: str, queue_id: int, offset: int) -> None:
    run(_with_api(lambda api: api.update_consumer_offset(cluster.addr, group, topic, queue_id, offset)))


def committed(cluster: Cluster, group: str, topic: str, queue_id: int) -> int:
    return run(_with_api(lambda api: api.query_consumer_offset(cluster.addr, group, topic, queue_id)))


def new_topic(cluster: Cluster, topic: str, queues: int = 1) -> None:
    ok(cluster, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", str(queues), "-w", str(queues))


def route_perm(cluster: Cluster, topic: str) -> int:
    return ok_json(cluster, "topicRoute", "-t", topic)["queueDatas"][0]["perm"]


# ---- topics ------------------------------------------------------------------------------------------

def test_topic_cluster_list_and_topic_list_cluster_model(cluster: Cluster) -> None:
    new_topic(cluster, "OpsClusterTopic")
    send_messages(cluster, "OpsClusterTopic", 1)
    commit_offset(cluster, "CG_OPS_LIST", "OpsClusterTopic", 0, 1)

    assert ok(cluster, "topicClusterList", "-t", "OpsClusterTopic").splitlines() == [CLUSTER]
    assert ok_json(cluster, "topicClusterList", "-t", "OpsClusterTopic") == [CLUSTER]
    assert "does not exist" in failed(cluster, "topicClusterList", "-t", "NoSuchOpsTopic")
    assert "-t/--topic" in usage_error(cluster, "topicClusterList")

    rows = ok_json(cluster, "topicList", "-c")
    assert {"clusterName": CLUSTER, "topic": "OpsClusterTopic", "consumerGroup": "CG_OPS_LIST"} in rows
    assert not any(r["topic"].startswith(("%RETRY%", "%DLQ%")) for r in rows)
    table = ok(cluster, "topicList", "-c").splitlines()
    assert table[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    assert [CLUSTER, "OpsClusterTopic", "CG_OPS_LIST"] in [line.split() for line in table[1:]]


def test_update_topic_perm(cluster: Cluster) -> None:
    new_topic(cluster, "OpsPerm", queues=2)
    out = ok(cluster, "updateTopicPerm", "-c", CLUSTER, "-t", "OpsPerm", "-p", "4")
    assert out.splitlines() == [f"update topic perm from 6 to 4 in {cluster.addr} success."]
    config = run(_with_api(lambda api: api.get_topic_config(cluster.addr, "OpsPerm")))
    assert (config.perm, config.read_queue_nums, config.write_queue_nums) == (4, 2, 2)
    deadline = time.monotonic() + 10
    while route_perm(cluster, "OpsPerm") != 4:  # the broker re-registers at once
        assert time.monotonic() < deadline
        time.sleep(0.2)

    assert ok(cluster, "updateTopicPerm", "-b", cluster.addr, "-t", "OpsPerm", "-p", "4").splitlines() == [
        "new perm equals to the old one!"]
    doc = ok_json(cluster, "updateTopicPerm", "-b", cluster.addr, "-t", "OpsPerm", "-p", "6")
    assert doc["brokers"] == [{"brokerAddr": cluster.addr, "oldPerm": 4, "perm": 6, "changed": True}]

    assert "not master" in failed(cluster, "updateTopicPerm", "-b", "127.0.0.1:1", "-t", "OpsPerm", "-p", "6")
    assert "does not exist" in failed(cluster, "updateTopicPerm", "-c", CLUSTER, "-t", "NoSuchOps", "-p", "6")
    assert "perm must be 2" in usage_error(cluster, "updateTopicPerm", "-c", CLUSTER, "-t", "OpsPerm", "-p", "7")
    assert "-b brokerAddr or -c clusterName" in usage_error(cluster, "updateTopicPerm", "-t", "OpsPerm", "-p", "6")


def test_wipe_and_add_write_perm(cluster: Cluster) -> None:
    new_topic(cluster, "OpsWipe")
    out = ok(cluster, "wipeWritePerm", "-b", BROKER_NAME)
    prefix = f"wipe write perm of broker[{BROKER_NAME}] in name server[{cluster.namesrv}] OK, "
    assert out.strip().startswith(prefix) and int(out.strip()[len(prefix):]) >= 1
    assert route_perm(cluster, "OpsWipe") & 2 == 0

    doc = ok_json(cluster, "addWritePerm", "-b", BROKER_NAME)
    assert doc["namesrvs"][0]["namesrvAddr"] == cluster.namesrv and doc["namesrvs"][0]["topicCount"] >= 1
    assert route_perm(cluster, "OpsWipe") & 2 == 2
    assert ok(cluster, "wipeWritePerm", "-b", "NoSuchBroker").strip().endswith("OK, 0")
    assert "-b/--brokerName" in usage_error(cluster, "addWritePerm")


# ---- configs -------------------------------------------------------------------------------------------

def test_get_and_update_broker_config(cluster: Cluster) -> None:
    text = ok(cluster, "getBrokerConfig", "-b", cluster.addr).splitlines()
    assert text[0] == f"============{cluster.addr}============"
    assert f"{'brokerName':<50}=  {BROKER_NAME}" in text
    by_cluster = ok(cluster, "getBrokerConfig", "-c", CLUSTER).splitlines()
    assert by_cluster[0] == f"============Master: {cluster.addr}============"
    config = ok_json(cluster, "getBrokerConfig", "-b", cluster.addr)[cluster.addr]
    assert config["brokerClusterName"] == CLUSTER and config["maxMessageSize"]

    out = ok(cluster, "updateBrokerConfig", "-b", cluster.addr, "-k", "maxMessageSize", "-v", "1048576")
    assert out.strip() == f"update broker config success, {cluster.addr}"
    assert ok_json(cluster, "getBrokerConfig", "-b", cluster.addr)[cluster.addr]["maxMessageSize"] == "1048576"
    # Live: a message over the new limit is refused at once.
    refused = run(_with_api(lambda api: api.invoke(cluster.addr, RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_OPS", "b": "OpsClusterTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false", "m": "false"},
        b"x" * 1_100_000)))
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL, (refused.code, refused.remark)
    ok(cluster, "updateBrokerConfig", "-c", CLUSTER, "-k", "maxMessageSize", "-v", "4194304")
    assert ok_json(cluster, "getBrokerConfig", "-b", cluster.addr)[cluster.addr]["maxMessageSize"] == "4194304"
    # Persisted into the broker's -c file (as upstream), the operator's other lines kept.
    conf_lines = (cluster.store.parent / "broker.conf").read_text(encoding="utf-8").splitlines()
    assert "maxMessageSize=4194304" in conf_lines and f"brokerName={BROKER_NAME}" in conf_lines

    # Unknown key, bad value, a key that needs a restart: refused, nothing changes.
    assert "unknown broker config key noSuchKey" in failed(cluster, "updateBrokerConfig", "-b", cluster.addr,
                                                           "-k", "noSuchKey", "-v", "1")
    assert "fileReservedTime" in failed(cluster, "updateBrokerConfig", "-b", cluster.addr, "-k", "fileReservedTime",
                                        "-v", "abc")
    assert "black list" in failed(cluster, "updateBrokerConfig", "-c", CLUSTER, "-k", "brokerName", "-v", "other")
    after = ok_json(cluster, "getBrokerConfig", "-b", cluster.addr)[cluster.addr]
    assert (after["fileReservedTime"], after["brokerName"]) == ("72", BROKER_NAME)
    assert "noSuchKey" not in after

    assert "-v/--value" in usage_error(cluster, "updateBrokerConfig", "-b", cluster.addr, "-k", "maxMessageSize")
    assert "expected true or false" in usage_error(cluster, "updateBrokerConfig", "-c", CLUSTER, "-a", "yes",
                                                   "-k", "maxMessageSize", "-v", "1")
    assert "-b brokerAddr or -c clusterName" in usage_error(cluster, "getBrokerConfig")
    assert "NoSuchCluster does not exist" in failed(cluster, "getBrokerConfig", "-c", "NoSuchCluster")


def test_get_and_update_namesrv_config(cluster: Cluster) -> None:
    text = ok(cluster, "getNamesrvConfig").splitlines()
    assert text[0] == f"============{cluster.namesrv}============"
    assert f"{'orderMessageEnable':<50}=  false" in text
    out = ok(cluster, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert out.splitlines() == [f"update name server config success![{cluster.namesrv}]",
                                "orderMessageEnable : true"]
    assert ok_json(cluster, "getNamesrvConfig")[cluster.namesrv]["orderMessageEnable"] == "true"

    assert "unknown namesrv config keys: noSuchKey" in failed(cluster, "updateNamesrvConfig", "-k", "noSuchKey",
                                                              "-v", "1")
    assert "expected true or false" in failed(cluster, "updateNamesrvConfig", "-k", "orderMessageEnable",
                                              "-v", "maybe")
    assert "black list" in failed(cluster, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x")
    assert ok_json(cluster, "getNamesrvConfig")[cluster.namesrv]["orderMessageEnable"] == "true"
    ok(cluster, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert "-k/--key" in usage_error(cluster, "updateNamesrvConfig", "-v", "1")


def kv_value(cluster: Cluster, namespace: str, key: str) -> str | None:
    async def go(api: MQClientAPI) -> str | None:
        response = await api.invoke(cluster.namesrv, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
        return response.ext_fields.get("value") if response.code == ResponseCode.SUCCESS else None
    return run(_with_api(go))


def test_update_and_delete_kv_config(cluster: Cluster) -> None:
    out = ok(cluster, "updateKvConfig", "-s", "OPS_NS", "-k", "answer", "-v", "42")
    assert out.strip() == "create or update kv config to namespace success."
    assert kv_value(cluster, "OPS_NS", "answer") == "42"
    assert ok_json(cluster, "updateKvConfig", "-s", "OPS_NS", "-k", "answer", "-v", "43")["value"] == "43"
    assert kv_value(cluster, "OPS_NS", "answer") == "43"
    assert ok(cluster, "deleteKvConfig", "-s", "OPS_NS", "-k", "answer").strip() == \
        "delete kv config from namespace success."
    assert kv_value(cluster, "OPS_NS", "answer") is None
    assert "-v/--value" in usage_error(cluster, "updateKvConfig", "-s", "OPS_NS", "-k", "answer")
    assert "-s/--namespace" in usage_error(cluster, "deleteKvConfig", "-k", "answer")


# ---- connections and consume stats -----------------------------------------------------------------------

def test_consumer_and_producer_connection(cluster: Cluster) -> None:
    new_topic(cluster, "OpsConn")
    loop = asyncio.new_event_loop()  # kept open so the client's connection stays up meanwhile
    api = MQClientAPI(timeout=5.0)
    try:
        sub = SubscriptionData(topic="OpsConn", sub_string="TagA || TagB")
        loop.run_until_complete(api.heartbeat(
            cluster.addr, "127.0.0.1@ops-client", producers=[ProducerData("PG_OPS_CONN")],
            consumers=[ConsumerData("CG_OPS_CONN", [sub])]))

        cc = ok_json(cluster, "consumerConnection", "-g", "CG_OPS_CONN")
        assert [c["clientId"] for c in cc["connectionSet"]] == ["127.0.0.1@ops-client"]
        assert cc["messageModel"] == "CLUSTERING" and "OpsConn" in cc["subscriptionTable"]
        text = ok(cluster, "consumerConnection", "-g", "CG_OPS_CONN", "-b", cluster.addr).splitlines()
        assert text[0].split() == ["#ClientId", "#ClientAddr", "#Language", "#Version"]
        assert text[1].split()[0] == "127.0.0.1@ops-client"
        assert "Below is subscription:" in text
        assert ["OpsConn", "TagA", "||", "TagB"] in [line.split() for line in text]
        assert "ConsumeType: CONSUME_PASSIVELY" in text and "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET" in text

        lines = ok(cluster, "producerConnection", "-g", "PG_OPS_CONN", "-t", "OpsConn").splitlines()
        assert lines[0].split()[:2] == ["0001", "127.0.0.1@ops-client"]
        pc = ok_json(cluster, "producerConnection", "-g", "PG_OPS_CONN", "-t", "OpsConn")
        assert pc["connectionSet"][0]["clientId"] == "127.0.0.1@ops-client"
        # producer -b: every producer group's instances on the broker (GET_ALL_PRODUCER_INFO)
        table = ok_json(cluster, "producer", "-b", cluster.addr)
        assert [p["clientId"] for p in table["PG_OPS_CONN"]] == ["127.0.0.1@ops-client"]
        line = next(x for x in ok(cluster, "producer", "-b", cluster.addr).splitlines() if "PG_OPS_CONN" in x)
        assert line.startswith("producer group (PG_OPS_CONN) instance : clientId=127.0.0.1@ops-client,remoteIP=")
        assert "-b/--broker" in usage_error(cluster, "producer")
    finally:
        loop.run_until_complete(api.close())
        loop.close()
    assert "not online" in failed(cluster, "consumerConnection", "-g", "CG_NOBODY")
    assert "PG_NOBODY" in failed(cluster, "producerConnection", "-g", "PG_NOBODY", "-t", "OpsConn")
    assert "does not exist" in failed(cluster, "producerConnection", "-g", "PG_OPS_CONN", "-t", "NoSuchOps")
    assert "-t/--topic" in usage_error(cluster, "producerConnection", "-g", "PG_OPS_CONN")


def test_broker_consume_stats(cluster: Cluster) -> None:
    new_topic(cluster, "OpsStats", queues=2)
    ok(cluster, "updateSubGroup", "-c", CLUSTER, "-g", "CG_OPS_STATS")
    send_messages(cluster, "OpsStats", 5, queue_id=0)
    send_messages(cluster, "OpsStats", 2, queue_id=1)
    commit_offset(cluster, "CG_OPS_STATS", "OpsStats", 0, 2)
    commit_offset(cluster, "CG_OPS_STATS", "OpsStats", 1, 2)

    doc = ok_json(cluster, "brokerConsumeStats", "-b", cluster.addr)
    mine = [r for r in doc["offsets"] if r["group"] == "CG_OPS_STATS"]
    assert [(r["topic"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"]) for r in mine] == [
        ("OpsStats", 0, 5, 2, 3), ("OpsStats", 1, 2, 2, 0)]
    assert all(r["lastTimestamp"] > 0 for r in mine) and doc["totalDiff"] >= 3
    text = ok(cluster, "brokerConsumeStats", "-b", cluster.addr, "-l", "1").splitlines()
    assert text[0].split() == ["#Topic", "#Group", "#Broker", "Name", "#QID", "#Broker", "Offset", "#Consumer",
                               "Offset", "#Diff", "#LastTime"]
    rows = [line.split() for line in text[1:] if line.startswith("OpsStats")]
    assert [r[:7] for r in rows] == [["OpsStats", "CG_OPS_STATS", BROKER_NAME, "0", "5", "2", "3"]]
    assert text[-1].startswith("Diff Total: ")
    ordered = ok_json(cluster, "brokerConsumeStats", "-b", cluster.addr, "-o", "true")
    assert not [r for r in ordered["offsets"] if r["topic"] == "OpsStats"]

    assert "-b/--brokerAddr" in usage_error(cluster, "brokerConsumeStats")
    assert "expected true or false" in usage_error(cluster, "brokerConsumeStats", "-b", cluster.addr, "-o", "x")
    assert "positive integer" in usage_error(cluster, "brokerConsumeStats", "-b", cluster.addr, "-t", "0")
    assert failed(cluster, "brokerConsumeStats", "-b", f"127.0.0.1:{free_port()}")


class FakePushConsumer:
    """A Remoting consumer client on its own thread: heartbeats as a push consumer of a group and
    answers the broker's GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY, as a Java client does."""

    def __init__(self, cluster: Cluster, group: str, topic: str, client_id: str) -> None:
        self.cluster, self.group, self.topic, self.client_id = cluster, group, topic, client_id
        self.consumed: list[MessageExt] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.api = self._call(self._make_api())
        self._call(self.api.heartbeat(cluster.addr, client_id, consumers=[ConsumerData(
            group, [SubscriptionData(topic=topic, sub_string="*")])]))

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _make_api(self) -> MQClientAPI:
        api = MQClientAPI(timeout=5.0)
        api.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._running_info)
        api.remoting.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._consume)
        api.remoting.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._status)
        return api

    async def _status(self, request: RemotingCommand, channel) -> RemotingCommand:
        """The client's own offsets of the topic (GetConsumerStatusBody.messageQueueTable)."""
        assert (request.ext_fields["topic"], request.ext_fields["group"]) == (self.topic, self.group)
        table = {fastjson.message_queue_key(self.topic, BROKER_NAME, 0): 5}
        body = fastjson.dumps({"messageQueueTable": table, "consumerTable": {}}).encode()
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    async def _running_info(self, request: RemotingCommand, channel) -> RemotingCommand:
        assert request.ext_fields["consumerGroup"] == self.group
        info = {"properties": {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "1",
                               "jstackEnable": request.ext_fields.get("jstackEnable")},
                "subscriptionSet": [{"topic": self.topic, "subString": "*", "classFilterMode": False}],
                "mqTable": {fastjson.message_queue_key(self.topic, BROKER_NAME, 0): {"commitOffset": 7}},
                "statusTable": {self.topic: {"pullRT": 1.5, "pullTPS": 2.0, "consumeRT": 3.0, "consumeOKTPS": 4.0,
                                             "consumeFailedTPS": 0.0, "consumeFailedMsgs": 0}}}
        return request.response_to(ResponseCode.SUCCESS, None, None, fastjson.dumps(info).encode())

    async def _consume(self, request: RemotingCommand, channel) -> RemotingCommand:
        self.consumed += decode_records(request.body)
        result = {"order": False, "autoCommit": True, "consumeResult": "CR_SUCCESS", "remark": None,
                  "spentTimeMills": 1}
        return request.response_to(ResponseCode.SUCCESS, None, None, json.dumps(result).encode())

    def close(self) -> None:
        self._call(self.api.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_consumer_status_and_consume_message_directly(cluster: Cluster, tmp_path: Path) -> None:
    new_topic(cluster, "OpsDirect")
    (result,) = send_messages(cluster, "OpsDirect", 1)
    consumer = FakePushConsumer(cluster, "CG_OPS_PUSH", "OpsDirect", "127.0.0.1@push-1")
    try:
        text = ok(cluster, "consumerStatus", "-g", "CG_OPS_PUSH", cwd=tmp_path).splitlines()
        assert text[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
        index, client_id, version, path = text[1].split()
        assert (index, client_id, version) == ("1", "127.0.0.1@push-1", "V5_3_3")
        assert "#Consumer Subscription#" in (tmp_path / path).read_text()
        assert "Same subscription in the same group of consumer" in text

        detail = ok(cluster, "consumerStatus", "-g", "CG_OPS_PUSH", "-i", "127.0.0.1@push-1", "-s")
        lines = detail.splitlines()
        assert f"{'PROP_CONSUME_TYPE':<40}: CONSUME_PASSIVELY" in lines
        assert f"{'jstackEnable':<40}: true" in lines  # -s reached the client
        assert any(line.split() == ["OpsDirect", BROKER_NAME, "0", "7"] for line in lines)
        assert any(line.split()[:3] == ["001", "Topic:", "OpsDirect"] for line in lines)
        doc = ok_json(cluster, "consumerStatus", "-g", "CG_OPS_PUSH", "-b", cluster.addr, cwd=tmp_path)
        assert doc["sameSubscription"] is True and doc["clients"][0]["clientId"] == "127.0.0.1@push-1"
        # consumer: the same walk under its older name
        old_name = ok_json(cluster, "consumer", "-g", "CG_OPS_PUSH", "-s", cwd=tmp_path)
        assert old_name["clients"][0]["clientId"] == "127.0.0.1@push-1"
        assert old_name["runningInfo"]["127.0.0.1@push-1"]["properties"]["jstackEnable"] == "true"

        out = ok(cluster, "queryMsgById", "-i", result.offset_msg_id, "-g", "CG_OPS_PUSH", "-d", "127.0.0.1@push-1")
        assert out.strip() == ("ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, "
                               "remark=null, spentTimeMills=1]")
        assert [m.body for m in consumer.consumed] == [b"OpsDirect-body-0"]

        # getConsumerStatus: the client's own offsets, asked through the broker (223 -> 221)
        rows = ok_json(cluster, "getConsumerStatus", "-g", "CG_OPS_PUSH", "-t", "OpsDirect")
        assert rows == [{"clientId": "127.0.0.1@push-1", "brokerName": BROKER_NAME, "queueId": 0, "offset": 5}]
        text = ok(cluster, "getConsumerStatus", "-g", "CG_OPS_PUSH", "-t", "OpsDirect", "-i", "127.0.0.1@push-1")
        assert text.splitlines()[2].split() == ["127.0.0.1@push-1", BROKER_NAME, "0", "5"]
        assert ok_json(cluster, "getConsumerStatus", "-g", "CG_OPS_PUSH", "-t", "OpsDirect", "-i", "other") == []
        assert "No Any Consumer online" in failed(cluster, "getConsumerStatus", "-g", "CG_NOBODY", "-t", "OpsDirect")
        assert "not online" in failed(cluster, "consumerStatus", "-g", "CG_OPS_PUSH", "-i", "127.0.0.1@nobody")
        assert "not online" in failed(cluster, "queryMsgById", "-i", result.offset_msg_id, "-g", "CG_OPS_PUSH",
                                      "-d", "127.0.0.1@nobody")
        assert "go together" in usage_error(cluster, "queryMsgById", "-i", result.offset_msg_id, "-g", "CG_OPS_PUSH")
    finally:
        consumer.close()
    assert "not online" in failed(cluster, "consumerStatus", "-g", "CG_NOBODY")
    assert "-g/--consumerGroup" in usage_error(cluster, "consumerStatus")


def test_stats_all(cluster: Cluster) -> None:
    new_topic(cluster, "OpsStatsAll")
    new_topic(cluster, "OpsStatsIdle")
    new_topic(cluster, "OpsStatsNoConsumer")
    send_messages(cluster, "OpsStatsAll", 6)
    send_messages(cluster, "OpsStatsNoConsumer", 2)
    assert len(ok_json(cluster, "consumeMessage", "-t", "OpsStatsAll", "-g", "CG_OPS_ALL")) == 6  # hands out 6
    commit_offset(cluster, "CG_OPS_ALL", "OpsStatsAll", 0, 4)

    (row,) = ok_json(cluster, "statsAll", "-t", "OpsStatsAll")
    assert (row["consumerGroup"], row["accumulation"], row["inMsg24Hour"], row["outMsg24Hour"]) == (
        "CG_OPS_ALL", 2, 6, 6), row
    assert row["inTps"] > 0 and row["outTps"] > 0
    done = admin(cluster, "statsAll", "-a")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["#Topic", "#Consumer", "Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
                                "#OutMsg24Hour"]
    cells = {line.split()[0]: line.split() for line in lines[1:]}
    assert cells["OpsStatsAll"][1:3] == ["CG_OPS_ALL", "2"] and cells["OpsStatsAll"][-2:] == ["6", "6"]
    assert cells["OpsStatsNoConsumer"][-2:] == ["2", "NO_CONSUMER"]
    assert "OpsStatsIdle" not in cells  # -a: topics without traffic left out
    assert "] OpsStatsAll" in done.stderr  # progress, one line per topic
    idle = ok_json(cluster, "statsAll", "-t", "OpsStatsIdle")
    assert idle == [{"topic": "OpsStatsIdle", "consumerGroup": "", "accumulation": 0, "inTps": 0.0, "outTps": None,
                     "inMsg24Hour": 0, "outMsg24Hour": None}]
    assert "does not exist" in failed(cluster, "statsAll", "-t", "NoSuchOps")


# ---- offsets -------------------------------------------------------------------------------------------------

def test_clone_group_offset_and_skip_accumulated(cluster: Cluster) -> None:
    new_topic(cluster, "OpsOffsets", queues=2)
    send_messages(cluster, "OpsOffsets", 4, queue_id=0)
    send_messages(cluster, "OpsOffsets", 3, queue_id=1)
    commit_offset(cluster, "CG_OPS_SRC", "OpsOffsets", 0, 3)
    commit_offset(cluster, "CG_OPS_SRC", "OpsOffsets", 1, 1)

    out = ok(cluster, "cloneGroupOffset", "-s", "CG_OPS_SRC", "-d", "CG_OPS_DEST", "-t", "OpsOffsets")
    assert out.strip() == "clone group offset success. srcGroup[CG_OPS_SRC], destGroup=[CG_OPS_DEST], " \
                          "topic[OpsOffsets]"
    assert (committed(cluster, "CG_OPS_DEST", "OpsOffsets", 0), committed(cluster, "CG_OPS_DEST", "OpsOffsets", 1)) \
        == (3, 1)
    assert "CG_OPS_NONE has no offsets" in failed(cluster, "cloneGroupOffset", "-s", "CG_OPS_NONE", "-d", "X",
                                                  "-t", "OpsOffsets")
    assert "does not exist" in failed(cluster, "cloneGroupOffset", "-s", "CG_OPS_SRC", "-d", "X", "-t", "NoSuchOps")
    assert "-d/--destGroup" in usage_error(cluster, "cloneGroupOffset", "-s", "CG_OPS_SRC", "-t", "OpsOffsets")

    text = ok(cluster, "skipAccumulatedMessage", "-g", "CG_OPS_DEST", "-t", "OpsOffsets").splitlines()
    assert text[0].split() == ["#brokerName", "#queueId", "#offset"]
    assert [line.split() for line in text[1:]] == [[BROKER_NAME, "0", "4"], [BROKER_NAME, "1", "3"]]
    assert (committed(cluster, "CG_OPS_DEST", "OpsOffsets", 0), committed(cluster, "CG_OPS_DEST", "OpsOffsets", 1)) \
        == (4, 3)
    doc = ok_json(cluster, "skipAccumulatedMessage", "-g", "CG_OPS_SRC", "-t", "OpsOffsets", "-c", CLUSTER)
    assert doc["offsets"] == [{"brokerName": BROKER_NAME, "queueId": 0, "offset": 4},
                              {"brokerName": BROKER_NAME, "queueId": 1, "offset": 3}]
    assert "NoSuchCluster does not exist" in failed(cluster, "skipAccumulatedMessage", "-g", "G", "-t", "OpsOffsets",
                                                    "-c", "NoSuchCluster")
    assert "does not exist" in failed(cluster, "skipAccumulatedMessage", "-g", "G", "-t", "NoSuchOps")
    assert "-g/--group" in usage_error(cluster, "skipAccumulatedMessage", "-t", "OpsOffsets")


# ---- messages ----------------------------------------------------------------------------------------------------

def test_send_print_and_consume_messages(cluster: Cluster) -> None:
    new_topic(cluster, "OpsMsgs", queues=2)
    table = ok(cluster, "sendMessage", "-t", "OpsMsgs", "-p", "hello ops", "-k", "k1", "-c", "TagA",
               "-b", BROKER_NAME, "-i", "1").splitlines()
    assert table[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"]
    assert table[1].split()[:3] == [BROKER_NAME, "1", "SEND_OK"]
    sent = ok_json(cluster, "sendMessage", "-t", "OpsMsgs", "-p", "second", "-c", "TagB", "-b", BROKER_NAME,
                   "-i", "0")
    assert sent["sendStatus"] == "SEND_OK" and sent["queueId"] == 0 and sent["queueOffset"] == 0
    found = ok_json(cluster, "queryMsgByKey", "-t", "OpsMsgs", "-k", "k1")
    assert [(m["body"], m["tags"], m["queueId"]) for m in found] == [("hello ops", "TagA", 1)]

    printed = ok_json(cluster, "printMsg", "-t", "OpsMsgs")
    assert sorted(m["body"] for m in printed) == ["hello ops", "second"]
    text = ok(cluster, "printMsg", "-t", "OpsMsgs", "-s", "TagA")
    msg_lines = [line for line in text.splitlines() if line.startswith("MSGID: ")]
    assert len(msg_lines) == 1 and msg_lines[0].endswith("BODY: hello ops")
    assert f"minOffset=0, maxOffset=1, MessageQueue [topic=OpsMsgs, brokerName={BROKER_NAME}, queueId=1]" in text
    assert "NOT PRINT BODY" in ok(cluster, "printMsg", "-t", "OpsMsgs", "-d", "false")
    assert ok_json(cluster, "printMsg", "-t", "OpsMsgs", "-b", str(int(time.time() * 1000) + 60_000)) == []

    send_messages(cluster, "OpsMsgs", 5, queue_id=0)
    consumed = ok_json(cluster, "consumeMessage", "-t", "OpsMsgs", "-c", "3")
    assert len(consumed) == 3
    by_offset = ok_json(cluster, "consumeMessage", "-t", "OpsMsgs", "-b", BROKER_NAME, "-i", "1", "-o", "0")
    assert [m["body"] for m in by_offset] == ["hello ops"]
    text = ok(cluster, "consumeMessage", "-t", "OpsMsgs", "-b", BROKER_NAME, "-i", "1")
    assert "Consume ok" in text and "BODY: hello ops" in text
    anywhere = ok_json(cluster, "sendMessage", "-t", "OpsMsgs", "-p", "third")  # a queue of the producer's choice
    assert anywhere["sendStatus"] == "SEND_OK" and anywhere["queueId"] in (0, 1)

    assert "Broker name must be set" in usage_error(cluster, "sendMessage", "-t", "OpsMsgs", "-p", "x", "-i", "0")
    assert "does not exist" in failed(cluster, "sendMessage", "-t", "NoSuchOps", "-p", "x")
    assert "queue 9 does not exist" in failed(cluster, "sendMessage", "-t", "OpsMsgs", "-p", "x", "-b", BROKER_NAME,
                                              "-i", "9")
    # -m true (message trace): sent; without traceTopicEnable its trace record has nowhere to go (issue 13)
    traced = admin(cluster, "sendMessage", "-t", "OpsMsgs", "-p", "x", "-m", "true")
    assert traced.returncode == 0 and "trace not written to RMQ_SYS_TRACE_TOPIC" in traced.stderr, traced.stderr
    assert "-p/--body" in usage_error(cluster, "sendMessage", "-t", "OpsMsgs")
    assert "unknown charset" in usage_error(cluster, "printMsg", "-t", "OpsMsgs", "-c", "NOPE-8")
    assert "does not exist" in failed(cluster, "printMsg", "-t", "NoSuchOps")
    assert "brokerName before queueId" in usage_error(cluster, "consumeMessage", "-t", "OpsMsgs", "-i", "0")
    assert "positive integer" in usage_error(cluster, "consumeMessage", "-t", "OpsMsgs", "-c", "0")


def test_query_msg_by_id_body_file_and_resend(cluster: Cluster) -> None:
    new_topic(cluster, "OpsQuery")
    (result,) = send_messages(cluster, "OpsQuery", 1)
    doc = ok_json(cluster, "queryMsgById", "-i", result.offset_msg_id)
    assert Path(doc["bodyPath"]).read_bytes() == b"OpsQuery-body-0"
    assert doc["bodyPath"] == f"/tmp/rocketmq/msgbodys/{result.msg_id}"
    text = ok(cluster, "queryMsgById", "-i", result.offset_msg_id, "-f", "UTF-8").splitlines()
    assert f"{'Message Body Path:':<20} {doc['bodyPath']}" in text
    assert f"{'Message Body:':<20} OpsQuery-body-0" in text

    resent = ok_json(cluster, "queryMsgById", "-i", result.msg_id, "-t", "OpsQuery", "-s", "true")
    assert resent["sendStatus"] == "SEND_OK" and resent["topic"] == "OpsQuery"
    assert resent["msgId"] != result.msg_id and resent["queueOffset"] == 1
    assert [m["body"] for m in ok_json(cluster, "printMsg", "-t", "OpsQuery")] == ["OpsQuery-body-0"] * 2

    # A dead letter goes back to its group's retry topic.
    ok(cluster, "updateSubGroup", "-c", CLUSTER, "-g", "CG_OPS_DLQ")
    run(_with_api(lambda api: api.consumer_send_msg_back(cluster.addr, "CG_OPS_DLQ", doc["commitLogOffset"], -1,
                                                         result.msg_id, "OpsQuery")))
    # Dead-letter topics are write-only, as upstream's: an operator makes one readable to look in.
    assert ok_json(cluster, "printMsg", "-t", "%DLQ%CG_OPS_DLQ") == []
    ok(cluster, "updateTopicPerm", "-c", CLUSTER, "-t", "%DLQ%CG_OPS_DLQ", "-p", "6")
    deadline = time.monotonic() + 10
    while not (dead := ok_json(cluster, "printMsg", "-t", "%DLQ%CG_OPS_DLQ")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    back = ok_json(cluster, "queryMsgById", "-i", dead[0]["offsetMsgId"], "-s", "true")
    assert back["topic"] == "%RETRY%CG_OPS_DLQ" and back["sendStatus"] == "SEND_OK"
    again = ok(cluster, "resendMsgById", "-i", dead[0]["msgId"], "-t", "%DLQ%CG_OPS_DLQ")
    assert again.startswith(f"prepare resend msg. originalMsgId={dead[0]['msgId']}")
    retried = ok_json(cluster, "printMsg", "-t", "%RETRY%CG_OPS_DLQ")
    assert [m["body"] for m in retried] == ["OpsQuery-body-0"] * 2
    assert "-i/--msgId" in usage_error(cluster, "resendMsgById")

    assert "not found" in failed(cluster, "queryMsgById", "-i", "NOTANID", "-t", "OpsQuery")
    assert "unknown charset" in usage_error(cluster, "queryMsgById", "-i", result.msg_id, "-f", "NOPE-8")
    assert "-i/--msgId" in usage_error(cluster, "queryMsgById", "-t", "OpsQuery")


# ---- the store (last: it deletes CommitLog segments the tests above wrote) ----------------------------------------

def commit_log_files(cluster: Cluster) -> list[str]:
    return sorted(os.listdir(cluster.store / "commitlog"))


def test_delete_expired_commit_log(cluster: Cluster) -> None:
    new_topic(cluster, "OpsDelete")
    send_messages(cluster, "OpsDelete", 60, size=8 * 1024)  # ~500 KB: four segments at least
    before = commit_log_files(cluster)
    assert len(before) >= 4, before
    # Live config: keep files 0 hours. Retention passes run every 200 ms, but it is not the
    # deleteWhen hour and the disk is not full: nothing goes until an operator asks.
    ok(cluster, "updateBrokerConfig", "-b", cluster.addr, "-k", "fileReservedTime", "-v", "0")
    time.sleep(1.0)
    assert set(before) <= set(commit_log_files(cluster))  # (the next segment may be allocated meanwhile)
    done = admin(cluster, "deleteExpiredCommitLog", "-c", CLUSTER, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"brokers": [cluster.addr], "success": True}
    assert f"[1/1] deleteExpiredCommitLog {cluster.addr}" in done.stderr  # progress
    # Every full segment goes; the one being written (and any allocated ahead of it) stays.
    deadline = time.monotonic() + 20
    while set(before[:-2]) & set(commit_log_files(cluster)):
        assert time.monotonic() < deadline, commit_log_files(cluster)
        time.sleep(0.2)
    assert commit_log_files(cluster) and before[0] not in commit_log_files(cluster)
    status = ok_json(cluster, "topicStatus", "-t", "OpsDelete")
    assert status[0]["maxOffset"] == 60 and status[0]["minOffset"] > 0
    assert ok(cluster, "deleteExpiredCommitLog", "-b", cluster.addr).strip() == "success"

    assert "NoSuchCluster does not exist" in failed(cluster, "deleteExpiredCommitLog", "-c", "NoSuchCluster")
    assert failed(cluster, "deleteExpiredCommitLog", "-b", f"127.0.0.1:{free_port()}")


NEW_COMMANDS = ("topicClusterList", "updateTopicPerm", "wipeWritePerm", "addWritePerm", "getBrokerConfig",
                "updateBrokerConfig", "getNamesrvConfig", "updateNamesrvConfig", "updateKvConfig", "deleteKvConfig",
                "consumerConnection", "producerConnection", "consumerStatus", "brokerConsumeStats", "statsAll",
                "cloneGroupOffset", "skipAccumulatedMessage", "resendMsgById", "consumeMessage", "sendMessage",
                "printMsg", "deleteExpiredCommitLog", "topicList", "queryMsgById")


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_has_help(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """In process (argparse prints the help and exits 0): one subprocess per command is slow."""
    for name in NEW_COMMANDS:
        with pytest.raises(SystemExit) as exited:
            cli.main([name, flag])
        assert exited.value.code == 0, name
        out = capsys.readouterr().out
        assert out.startswith(f"usage: orbitmq admin {name}") and "--json" in out, out


# ---- lookups and planning (DecodeMessageId, allocateMQ, queryCq, sendMsgStatus, clusterRT, ...) ------------

def test_decode_message_id_and_query_by_unique_key(cluster: Cluster) -> None:
    from orbitmq.common.message_id import create_uniq_id, uniq_id_ip

    uniq = create_uniq_id()
    text = ok(cluster, "DecodeMessageId", "-i", uniq)
    assert text.splitlines()[0] == f"ip={uniq_id_ip(uniq)}" and text.splitlines()[1].startswith("date=20")
    assert "not a unique message id" in failed(cluster, "DecodeMessageId", "-i", "xyz")

    new_topic(cluster, "OpsUnique")
    first, second = send_messages(cluster, "OpsUnique", 2)
    doc = ok_json(cluster, "queryMsgByUniqueKey", "-i", first.msg_id, "-t", "OpsUnique")
    assert (doc["msgId"], doc["body"]) == (first.msg_id, "OpsUnique-body-0")
    shown = ok(cluster, "queryMsgByUniqueKey", "-i", second.msg_id, "-t", "OpsUnique")
    assert second.offset_msg_id in shown and "OpsUnique-body-1" in shown
    assert len(ok_json(cluster, "queryMsgByUniqueKey", "-i", first.msg_id, "-t", "OpsUnique", "-a")) == 1
    assert "not found" in failed(cluster, "queryMsgByUniqueKey", "-i", "0" * 32, "-t", "OpsUnique")
    assert "-t/--topic" in usage_error(cluster, "queryMsgByUniqueKey", "-i", first.msg_id)
    assert "go together" in usage_error(cluster, "queryMsgByUniqueKey", "-i", first.msg_id, "-t", "OpsUnique",
                                        "-g", "G")


def test_allocate_mq_get_consumer_config_and_order_conf(cluster: Cluster) -> None:
    new_topic(cluster, "OpsAllocate", queues=5)
    plan = ok_json(cluster, "allocateMQ", "-t", "OpsAllocate", "-i", "10.0.0.1,10.0.0.2")["result"]
    assert [q["queueId"] for q in plan["10.0.0.1"]] == [0, 1, 2]  # AllocateMessageQueueAveragely
    assert [q["queueId"] for q in plan["10.0.0.2"]] == [3, 4]
    assert {q["brokerName"] for q in plan["10.0.0.1"]} == {BROKER_NAME}
    text = ok(cluster, "allocateMQ", "-t", "OpsAllocate", "-i", "a,b,c,d,e,f")
    assert json.loads(text)["result"]["f"] == []  # more clients than queues: the last gets none
    assert failed(cluster, "allocateMQ", "-t", "NoSuchAllocate", "-i", "a")

    ok(cluster, "updateSubGroup", "-c", CLUSTER, "-g", "CG_OPS_CONFIG", "-r", "5")
    (entry,) = ok_json(cluster, "getConsumerConfig", "-g", "CG_OPS_CONFIG")
    assert (entry["clusterName"], entry["brokerName"]) == (CLUSTER, BROKER_NAME)
    assert entry["subscriptionGroupConfig"]["retryMaxTimes"] == 5
    lines = ok(cluster, "getConsumerConfig", "-g", "CG_OPS_CONFIG").splitlines()
    assert lines[0] == f"============================={CLUSTER}:{BROKER_NAME}============================="
    assert f"{'retryMaxTimes':<40}=  5" in lines and f"{'consumeEnable':<40}=  true" in lines
    assert "on no broker" in failed(cluster, "getConsumerConfig", "-g", "CG_NOBODY_HAS")

    assert "success" in ok(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "put", "-v", f"{BROKER_NAME}:4")
    assert ok_json(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "get")["orderConf"] == f"{BROKER_NAME}:4"
    assert "please set orderConf" in usage_error(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "put")
    assert "brokerName:queueNums" in usage_error(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "put",
                                                 "-v", "broker-a")
    assert "put, get or delete" in usage_error(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "list")
    ok(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "delete")
    assert "no orderConf" in failed(cluster, "updateOrderConf", "-t", "OpsOrder", "-m", "get")


def test_query_cq_and_the_store_cleanups(cluster: Cluster) -> None:
    from orbitmq.common.message_codec import tags_hash_code
    from orbitmq.common.message_id import decode_offset_message_id

    new_topic(cluster, "OpsCq", queues=2)
    results = send_messages(cluster, "OpsCq", 3, queue_id=1, tags="cqtag")
    doc = ok_json(cluster, "queryCq", "-t", "OpsCq", "-q", "1", "-i", "1", "-c", "5")
    assert (doc["maxQueueIndex"], doc["minQueueIndex"]) == (3, 0)
    assert [e["physicOffset"] for e in doc["queueData"]] == [decode_offset_message_id(r.offset_msg_id)[2]
                                                             for r in results[1:]]
    assert {e["tagsCode"] for e in doc["queueData"]} == {tags_hash_code("cqtag")}
    text = ok(cluster, "queryCq", "-t", "OpsCq", "-q", "1", "-i", "0", "-c", "1", "-g", "CG_NOT_ONLINE")
    assert "CG_NOT_ONLINE@OpsCq is not online!" in text and "idx: 0" in text and "idx: 1" not in text
    assert "Index 9 of 1@OpsCq is not exist!" in ok(cluster, "queryCq", "-t", "OpsCq", "-q", "1", "-i", "9")
    assert "7@OpsCq is not exist!" in failed(cluster, "queryCq", "-t", "OpsCq", "-q", "7", "-i", "0")
    assert "-i/--index" in usage_error(cluster, "queryCq", "-t", "OpsCq", "-q", "1")

    for command_name in ("cleanExpiredCQ", "cleanUnusedTopic"):
        assert ok(cluster, command_name, "-b", cluster.addr).strip() == "success"
        assert ok(cluster, command_name, "-c", CLUSTER).strip() == "success"
        assert ok(cluster, command_name).strip() == "success"  # every master of every cluster
        assert failed(cluster, command_name, "-c", "NoSuchCluster")
    # Nothing in use was dropped: the topic's queue still answers with its three messages.
    assert ok_json(cluster, "queryCq", "-t", "OpsCq", "-q", "1", "-i", "0")["maxQueueIndex"] == 3


def test_print_msg_by_queue_and_send_probes(cluster: Cluster) -> None:
    new_topic(cluster, "OpsByQueue", queues=2)
    send_messages(cluster, "OpsByQueue", 3, queue_id=1, tags="TagA")
    send_messages(cluster, "OpsByQueue", 1, queue_id=1, tags="TagB")
    lines = ok(cluster, "printMsgByQueue", "-t", "OpsByQueue", "-a", BROKER_NAME, "-i", "1", "-p", "true",
               "-d", "true", "-f", "true").splitlines()
    assert [line.split(" BODY: ")[1] for line in lines if line.startswith("MSGID: ")] == [
        "OpsByQueue-body-0", "OpsByQueue-body-1", "OpsByQueue-body-2", "OpsByQueue-body-0"]
    assert lines[-2:] == [f"Tag: {'TagA':<30} Count: 3", f"Tag: {'TagB':<30} Count: 1"]
    only_b = ok_json(cluster, "printMsgByQueue", "-t", "OpsByQueue", "-a", BROKER_NAME, "-i", "1", "-p", "true",
                     "-s", "TagB")
    assert [m["tags"] for m in only_b["messages"]] == ["TagB"] and only_b["messages"][0]["body"] is None
    assert ok(cluster, "printMsgByQueue", "-t", "OpsByQueue", "-a", BROKER_NAME, "-i", "0").strip() == ""
    assert "expected true or false" in usage_error(cluster, "printMsgByQueue", "-t", "OpsByQueue", "-a",
                                                   BROKER_NAME, "-i", "1", "-p", "maybe")

    rows = ok_json(cluster, "sendMsgStatus", "-b", BROKER_NAME, "-c", "3", "-s", "64")
    assert [r["sendStatus"] for r in rows] == ["SEND_OK"] * 3
    text = ok(cluster, "sendMsgStatus", "-b", BROKER_NAME, "-c", "1").splitlines()
    assert text[0].startswith("rt=") and "SendResult [sendStatus=SEND_OK" in text[0]
    rt = ok(cluster, "checkMsgSendRT", "-t", "OpsByQueue", "-a", "4", "-s", "32").splitlines()
    assert rt[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"]
    assert [line.split()[:3] for line in rt[1:5]] == [[BROKER_NAME, str(i % 2), "true"] for i in range(4)]
    assert rt[5].startswith("Avg RT: ")
    assert "at least 2" in usage_error(cluster, "checkMsgSendRT", "-t", "OpsByQueue", "-a", "1")
    assert failed(cluster, "sendMsgStatus", "-b", "no-such-broker", "-c", "1")


def test_export_metadata_and_configs_then_import_the_lists(cluster: Cluster, tmp_path: Path) -> None:
    new_topic(cluster, "OpsExport", queues=3)
    ok(cluster, "updateSubGroup", "-c", CLUSTER, "-g", "CG_OPS_EXPORT", "-r", "7")
    out = tmp_path / "export"
    assert ok(cluster, "exportMetadata", "-c", CLUSTER, "-f", str(out)).strip() == f"export {out}/metadata.json success"
    meta = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    assert meta["topicConfigTable"]["OpsExport"]["readQueueNums"] == 3
    assert meta["subscriptionGroupTable"]["CG_OPS_EXPORT"]["retryMaxTimes"] == 7
    assert BROKER_NAME not in meta["topicConfigTable"] and "TBW102" not in meta["topicConfigTable"]
    assert "SCHEDULE_TOPIC_XXXX" not in meta["topicConfigTable"] and "exportTime" in meta
    assert not [t for t in meta["topicConfigTable"] if t.startswith("%RETRY%")]  # without -s
    assert not [g for g in meta["subscriptionGroupTable"] if g.startswith("CID_RMQ_SYS_")]
    special = ok_json(cluster, "exportMetadata", "-c", CLUSTER, "-f", str(out), "-t", "-s")
    assert "subscriptionGroupTable" not in special and (out / "topic.json").exists()
    ok(cluster, "exportMetadata", "-b", cluster.addr, "-g", "-f", str(out))
    assert "CG_OPS_EXPORT" in json.loads((out / "subscriptionGroup.json").read_text(encoding="utf-8"))[
        "subscriptionGroupTable"]
    assert "give -t" in usage_error(cluster, "exportMetadata", "-b", cluster.addr)
    assert "-c clusterName or -b" in usage_error(cluster, "exportMetadata")

    configs = ok_json(cluster, "exportConfigs", "-c", CLUSTER, "-f", str(out))
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    assert configs["brokerConfigs"][BROKER_NAME]["brokerClusterName"] == CLUSTER
    assert (out / "configs.json").exists()

    # The export's tables, edited, go back in as lists (and as upstream's plain JSON list).
    topics = meta["topicConfigTable"]
    topics["OpsExport"]["writeQueueNums"] = 2
    topics["OpsImported"] = {**topics["OpsExport"], "topicName": "OpsImported"}
    (tmp_path / "topics.json").write_text(json.dumps({"topicConfigTable": topics}), encoding="utf-8")
    assert "submit batch of topic config" in ok(cluster, "updateTopicList", "-c", CLUSTER, "-f",
                                                str(tmp_path / "topics.json"))
    route = ok_json(cluster, "topicRoute", "-t", "OpsImported")
    assert (route["queueDatas"][0]["readQueueNums"], route["queueDatas"][0]["writeQueueNums"]) == (3, 2)
    group = {**meta["subscriptionGroupTable"]["CG_OPS_EXPORT"], "groupName": "CG_OPS_IMPORTED"}
    (tmp_path / "groups.json").write_text(json.dumps([group]), encoding="utf-8")
    ok(cluster, "updateSubGroupList", "-b", cluster.addr, "-f", str(tmp_path / "groups.json"))
    (entry,) = ok_json(cluster, "getConsumerConfig", "-g", "CG_OPS_IMPORTED")
    assert entry["subscriptionGroupConfig"]["retryMaxTimes"] == 7
    # A bad entry refuses the whole batch; nothing of it is stored.
    bad = [{**topics["OpsExport"], "topicName": "OpsFine"}, {**topics["OpsExport"], "topicName": "bad topic!"}]
    (tmp_path / "bad.json").write_text(json.dumps(bad), encoding="utf-8")
    assert failed(cluster, "updateTopicList", "-b", cluster.addr, "-f", str(tmp_path / "bad.json"))
    assert failed(cluster, "topicRoute", "-t", "OpsFine")
    assert "does not exists" in failed(cluster, "updateTopicList", "-b", cluster.addr, "-f", str(tmp_path / "no.json"))
    assert "-b brokerAddr or -c" in usage_error(cluster, "updateSubGroupList", "-f", str(tmp_path / "groups.json"))


def test_reset_offset_by_time_old(cluster: Cluster) -> None:
    new_topic(cluster, "OpsResetOld", queues=2)
    send_messages(cluster, "OpsResetOld", 4, queue_id=0)
    send_messages(cluster, "OpsResetOld", 2, queue_id=1)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    send_messages(cluster, "OpsResetOld", 3, queue_id=0)
    commit_offset(cluster, "CG_OPS_OLD", "OpsResetOld", 0, 2)
    commit_offset(cluster, "CG_OPS_OLD", "OpsResetOld", 1, 1)

    rows = ok_json(cluster, "resetOffsetByTimeOld", "-g", "CG_OPS_OLD", "-t", "OpsResetOld", "-s", "-1")
    assert [(r["queueId"], r["brokerOffset"], r["consumerOffset"], r["timestampOffset"], r["rollbackOffset"])
            for r in rows] == [(0, 7, 2, 7, 7), (1, 2, 1, 2, 2)]  # forced (the default): to the end
    assert committed(cluster, "CG_OPS_OLD", "OpsResetOld", 0) == 7
    # Not forced: only backwards. The middle of queue 0 is offset 4; queue 1 ends before it, so its
    # offset stays at its end (2), where the forced reset above put it.
    rows = ok_json(cluster, "resetOffsetByTimeOld", "-g", "CG_OPS_OLD", "-t", "OpsResetOld", "-s", str(middle),
                   "-f", "false")
    assert [(r["queueId"], r["timestampOffset"], r["rollbackOffset"]) for r in rows] == [(0, 4, 4), (1, 2, 2)]
    assert committed(cluster, "CG_OPS_OLD", "OpsResetOld", 0) == 4
    text = ok(cluster, "resetOffsetByTimeOld", "-g", "CG_OPS_OLD", "-t", "OpsResetOld", "-s", "-1").splitlines()
    assert text[0].startswith("reset consumer offset by specified consumerGroup[CG_OPS_OLD], topic[OpsResetOld]")
    assert text[1].split() == ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
                               "#resetOffset"]
    assert text[2].split() == [BROKER_NAME, "0", "7", "4", "7", "7"]
    assert "bad timestamp" in usage_error(cluster, "resetOffsetByTimeOld", "-g", "CG_OPS_OLD", "-t", "OpsResetOld",
                                          "-s", "yesterday")
    assert "does not exist" in failed(cluster, "resetOffsetByTimeOld", "-g", "CG_OPS_OLD", "-t", "NoSuchOld",
                                      "-s", "-1")


def test_cluster_rt_one_round(cluster: Cluster) -> None:
    lines = ok(cluster, "clusterRT", "-a", "3", "-s", "16", "-r", "1").splitlines()
    assert lines[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"]
    row = lines[1].split()
    assert (row[0], row[1], row[3], row[4]) == (CLUSTER, BROKER_NAME, "3", "0") and float(row[2]) >= 0
    (doc,) = ok_json(cluster, "clusterRT", "-a", "2", "-c", CLUSTER, "-r", "1")
    assert (doc["brokerName"], doc["successCount"], doc["failCount"]) == (BROKER_NAME, 2, 0)
    tlog = ok(cluster, "clusterRT", "-a", "2", "-p", "true", "-m", "room1", "-r", "1").strip().split("|")
    assert tlog[1:4] == ["room1", CLUSTER, BROKER_NAME]
    assert "--json needs -r" in usage_error(cluster, "clusterRT", "--json")
    assert "not exist" in failed(cluster, "clusterRT", "-c", "NoSuchCluster", "-a", "2", "-r", "1")
