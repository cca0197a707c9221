"""Apache's mqadmin (org.apache.rocketmq:rocketmq-tools:5.5.0, MQAdminStartup) against OrbitMQ.

Every command `orbitmq admin` implements that Apache's tool has too, run by Apache's tool with
`-n <namesrv>`: each must succeed and print the facts `orbitmq admin --json` prints for the same
cluster (topic lists, routes, cluster rows, offsets, group configs, stats), or, for a command that
changes something, `orbitmq admin` must see the change. A NameServer and a broker of this module's
own: the commands change cluster-wide state (write permission, broker and NameServer config, KV
config, expired files) that the session cluster's other tests must not see. The controller
commands are in test_apache_mqadmin_controller.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.interop.harness import Cluster, start_cluster
from tests.interop.java.mqadmin.tools import (
    fastjson_text,
    live_clients,
    mqadmin,
    orbit,
    pairs,
    sections,
    tabbed,
    table,
)

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
COUNT = 8


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("mqadmin-cluster"), proxies=0,
                            broker_extra={"traceTopicEnable": "true"})
    try:
        yield cluster
    finally:
        cluster.runner.stop_all()


def by_queue(rows: list[dict[str, Any]], *fields: str) -> dict[tuple[str, int], tuple]:
    return {(r["brokerName"], int(r["queueId"])): tuple(int(r[f]) for f in fields) for r in rows}


def test_read_only_commands_print_what_orbitmq_admin_prints(plain: Cluster, tmp_path: Path) -> None:
    ns, broker = plain.namesrv, plain.broker
    topic = plain.create_topic("MqaRead", queues=2)
    group, producer_group, idle_group = "MqaReadCG", "MqaReadPG", plain.create_group("MqaIdle")
    plain.create_group(group)
    with live_clients(tmp_path / "clients", ns, topic, producer_group, group, COUNT) as clients:
        msg_id = clients["sent"]["key-3"]
        consumer_id = clients["consumerClientId"]
        apache_commands = {
            # First: their pull consumer (group TOOLS_CONSUMER) makes %RETRY%TOOLS_CONSUMER, which
            # the lists below then show on both sides.
            "printMsg": ["printMsg", "-t", topic, "-d", "true"],
            "printMsgByQueue": ["printMsgByQueue", "-t", topic, "-a", BROKER, "-i", "1", "-p", "true", "-d", "true"],
            "clusterList": ["clusterList"],
            "clusterList -m": ["clusterList", "-m"],
            "topicList": ["topicList"],
            "topicList -c": ["topicList", "-c"],
            "topicRoute": ["topicRoute", "-t", topic],
            "topicRoute -l": ["topicRoute", "-t", topic, "-l"],
            "topicStatus": ["topicStatus", "-t", topic],
            "topicClusterList": ["topicClusterList", "-t", topic],
            "brokerStatus": ["brokerStatus", "-b", broker],
            "consumerProgress": ["consumerProgress", "-g", group],
            "consumerProgress all": ["consumerProgress"],
            "consumerConnection": ["consumerConnection", "-g", group],
            "producerConnection": ["producerConnection", "-g", producer_group, "-t", topic],
            "producer": ["producer", "-b", broker],
            "consumerStatus": ["consumerStatus", "-g", group, "-i", consumer_id],
            "getConsumerConfig": ["getConsumerConfig", "-g", group],
            "getBrokerConfig": ["getBrokerConfig", "-b", broker],
            "getNamesrvConfig": ["getNamesrvConfig"],
            "statsAll": ["statsAll", "-t", topic],
            "brokerConsumeStats": ["brokerConsumeStats", "-b", broker],
            "queryMsgById": ["queryMsgById", "-t", topic, "-i", msg_id],
            "queryMsgByKey": ["queryMsgByKey", "-t", topic, "-k", "key-3"],
            "queryMsgById -g -d": ["queryMsgById", "-t", topic, "-i", msg_id, "-g", group, "-d", consumer_id],
            "queryMsgByUniqueKey": ["queryMsgByUniqueKey", "-t", topic, "-i", msg_id],
            "queryMsgByOffset": ["queryMsgByOffset", "-t", topic, "-b", BROKER, "-i", "0", "-o", "0"],
            "queryCq": ["queryCq", "-t", topic, "-q", "0", "-i", "0", "-c", "10", "-b", broker],
            "allocateMQ": ["allocateMQ", "-t", topic, "-i", "10.0.0.1,10.0.0.2"],
            "haStatus": ["haStatus", "-b", broker],
            "exportMetadata": ["exportMetadata", "-c", CLUSTER, "-f", str(tmp_path / "apache")],
            "exportConfigs": ["exportConfigs", "-c", CLUSTER, "-f", str(tmp_path / "apache")],
        }
        runs = dict(zip(apache_commands, mqadmin(tmp_path / "jvm", [
            [args[0], "-n", ns, *args[1:]] for args in apache_commands.values()]), strict=True))
        # `orbitmq admin` prints the same commands (the same flags) while the same clients run.
        same = ("clusterList", "topicList", "topicList -c", "topicRoute", "topicStatus", "brokerStatus",
                "consumerProgress", "consumerConnection", "producerConnection", "producer", "consumerStatus",
                "getConsumerConfig", "getBrokerConfig", "getNamesrvConfig", "statsAll", "brokerConsumeStats",
                "queryMsgById", "queryMsgById -g -d", "queryMsgByKey", "queryMsgByOffset", "printMsg", "queryCq", "allocateMQ",
                "haStatus")
        orbit_of = {name: orbit(ns, *apache_commands[name]) for name in same}
        for name in ("exportMetadata", "exportConfigs"):
            orbit(ns, name, "-c", CLUSTER, "-f", str(tmp_path / "orbit"))

    # clusterList: the same rows; every runtime key the tool reads is answered (no "null"), and
    # a master's special services run (#ACTIVATED).
    out = runs["clusterList"].ok()
    assert "null" not in out, out
    rows = table(out)
    assert [r[:6] for r in rows] == [[r["clusterName"], r["brokerName"], str(r["brokerId"]), r["brokerAddr"],
                                      *r["version"].split()] for r in orbit_of["clusterList"]], rows
    assert all(r[-1] == "true" for r in rows), rows

    # clusterList -m: yesterday's and today's totals (brokerStatus' msgPutTotal*/msgGetTotal*)
    more = table(runs["clusterList -m"].ok())
    assert [r[:2] for r in more] == [[r["clusterName"], r["brokerName"]] for r in orbit_of["clusterList"]], more
    assert [[int(v) for v in r[2:5]] for r in more] == [
        [r["inTotalYest"], r["outTotalYest"], r["inTotalToday"]] for r in orbit_of["clusterList"]]
    # (messages read today grow as later commands of the batch pull: queryMsgByOffset, ...)
    assert all(int(r[5]) <= o["outTotalToday"] for r, o in zip(more, orbit_of["clusterList"], strict=True))

    # topicList, -c
    assert set(runs["topicList"].ok().split()) == set(orbit_of["topicList"])
    assert {(r[0], r[1]) for r in table(runs["topicList -c"].ok())} == {
        (r["clusterName"], r["topic"]) for r in orbit_of["topicList -c"]}

    # topicRoute (fastjson) and -l
    route = fastjson_text(runs["topicRoute"].ok())
    assert route["queueDatas"] == orbit_of["topicRoute"]["queueDatas"]
    assert [{**b, "brokerAddrs": dict(b["brokerAddrs"])} for b in route["brokerDatas"]] == \
        orbit_of["topicRoute"]["brokerDatas"]
    listed = table(runs["topicRoute -l"].ok())[0]
    assert listed[:2] == [CLUSTER, BROKER] and listed[-3:] == ["2", "2", "6"]

    # topicStatus: min/max offset of each queue
    status = {(r[0], int(r[1])): (int(r[2]), int(r[3])) for r in table(runs["topicStatus"].ok(), 4)}
    assert status == by_queue(orbit_of["topicStatus"], "minOffset", "maxOffset")
    assert sum(hi for _lo, hi in status.values()) == COUNT
    assert runs["topicClusterList"].ok().split() == [CLUSTER]

    # brokerStatus: the same runtime table (the figures that move between the two reads aside)
    apache_status = pairs(runs["brokerStatus"].ok(), ":")
    moving = {"runtime", "commitLogDiskRatio", "consumeQueueDiskRatio", "getMissTps", "getTotalTps",
              "getFoundTps", "getTransferredTps", "getTransferedTps", "putTps", "pageCacheLockTimeMills",
              "msgGetTotalTodayNow", "timerReadBehind", "timerCongestNum", "sendThreadPoolQueueHeadWaitTimeMills",
              "commitLogFlushedOffset", "pullRequestHoldCount"}
    assert set(apache_status) == set(orbit_of["brokerStatus"])
    assert {k: v for k, v in apache_status.items() if k not in moving} == {
        k: v for k, v in orbit_of["brokerStatus"].items() if k not in moving}
    assert apache_status["brokerActive"] == "true" and apache_status["msgPutTotalTodayNow"] == str(COUNT)

    # consumerProgress -g: every queue's broker and consumer offset; all consumed
    progress = {(r[1], int(r[2])): (int(r[3]), int(r[4])) for r in table(runs["consumerProgress"].ok(), 5)}
    assert progress == by_queue(orbit_of["consumerProgress"]["offsets"], "brokerOffset", "consumerOffset")
    assert all(b == c for b, c in progress.values()), progress
    # without -g: every group with a retry topic, the live one with its client count
    groups = {r[0]: r for r in table(runs["consumerProgress all"].ok())}
    assert groups[group][1] == "1" and groups[group][3:5] == ["PUSH", "CLUSTERING"], groups

    # consumerConnection / producerConnection / producer: the live clients
    connection = runs["consumerConnection"].ok()
    orbit_connection = orbit_of["consumerConnection"]
    assert consumer_id in connection and topic in connection
    assert consumer_id in json.dumps(orbit_connection)
    assert "CONSUME_PASSIVELY" in connection and "CLUSTERING" in connection
    assert clients["producerClientId"] in runs["producerConnection"].ok()
    assert clients["producerClientId"] in json.dumps(orbit_of["producerConnection"])
    assert producer_group in runs["producer"].ok() and producer_group in json.dumps(orbit_of["producer"])
    # consumerStatus -i: the client's running info, relayed by the broker
    running = runs["consumerStatus"].ok()
    assert f"Topic: {topic}" in running and "#Consumer MQ Detail#" in running
    assert topic in json.dumps(orbit_of["consumerStatus"])

    # getConsumerConfig: the group's settings
    config = pairs(runs["getConsumerConfig"].ok(), "  =  ")
    orbit_config = orbit_of["getConsumerConfig"][0]["subscriptionGroupConfig"]
    for key in ("groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable",
                "consumeMessageOrderly", "retryQueueNums", "retryMaxTimes", "brokerId",
                "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable", "groupSysFlag",
                "consumeTimeoutMinute"):
        assert config[key] == str(orbit_config[key]).lower() if isinstance(orbit_config[key], bool) \
            else config[key] == str(orbit_config[key]), key

    # getBrokerConfig / getNamesrvConfig: the same key = value lists
    assert sections(runs["getBrokerConfig"].ok()) == orbit_of["getBrokerConfig"]
    assert sections(runs["getNamesrvConfig"].ok()) == orbit_of["getNamesrvConfig"]

    # statsAll -t: the group's accumulation and 24 h counts
    stats = [r for r in table(runs["statsAll"].ok()) if r[0] == topic]
    orbit_stats = {(r["topic"], r["consumerGroup"]): r for r in orbit_of["statsAll"]}
    assert stats and all(r[1] == group for r in stats), stats
    for row in stats:
        theirs = orbit_stats[(row[0], row[1])]
        assert [int(row[2]), int(row[5]), int(row[6])] == [theirs["accumulation"], theirs["inMsg24Hour"],
                                                           theirs["outMsg24Hour"]]
    # brokerConsumeStats: per group and queue offsets
    consume = {(r[0], r[1], r[2], int(r[3])): (int(r[4]), int(r[5])) for r in
               table(runs["brokerConsumeStats"].ok(), 6)}
    assert consume == {(r["topic"], r["group"], r["brokerName"], r["queueId"]): (r["brokerOffset"], r["consumerOffset"])
                       for r in orbit_of["brokerConsumeStats"]["offsets"]}

    # queryMsgById / ByUniqueKey / ByKey / ByOffset: one message's facts
    msg = orbit_of["queryMsgById"]
    for name in ("queryMsgById", "queryMsgByUniqueKey"):
        fields = pairs(runs[name].ok(), ": ")
        assert (fields["Topic"], fields["Tags"], fields["Keys"], int(fields["Queue ID"]), int(fields["Queue Offset"]),
                int(fields["CommitLog Offset"])) == (topic, f"[{msg['tags']}]", f"[{' '.join(msg['keys'])}]",
                                                     msg["queueId"], msg["queueOffset"], msg["commitLogOffset"])
    # -g -d: the broker has the live client consume it again (CONSUME_MESSAGE_DIRECTLY)
    direct = runs["queryMsgById -g -d"].ok()
    assert "consumeResult=CR_SUCCESS" in direct, direct
    assert "CR_SUCCESS" in json.dumps(orbit_of["queryMsgById -g -d"])
    by_key = table(runs["queryMsgByKey"].ok(), 3)
    assert [(r[0], int(r[1]), int(r[2])) for r in by_key] == [
        (m["msgId"], m["queueId"], m["queueOffset"]) for m in orbit_of["queryMsgByKey"]]
    at_offset = pairs(runs["queryMsgByOffset"].ok(), ": ")
    assert (at_offset["OffsetID"], at_offset["Keys"]) == (orbit_of["queryMsgByOffset"]["offsetMsgId"],
                                                          f"[{' '.join(orbit_of['queryMsgByOffset']['keys'])}]")

    # printMsg / printMsgByQueue: every message of the topic, with its body
    printed = runs["printMsg"].ok()
    for m in orbit_of["printMsg"]:
        assert f"MSGID: {m['msgId']}" in printed and f"BODY: {m['body']}" in printed, m
    assert printed.count("MSGID: ") == COUNT == len(orbit_of["printMsg"])
    queue1 = [m for m in orbit_of["printMsg"] if m["queueId"] == 1]
    assert runs["printMsgByQueue"].ok().count("MSGID: ") == len(queue1)

    # queryCq: the ConsumeQueue entries
    cq = runs["queryCq"].ok()
    assert f"max: {orbit_of['queryCq']['maxQueueIndex']}, min: {orbit_of['queryCq']['minQueueIndex']}" in cq
    for entry in orbit_of["queryCq"]["queueData"]:
        assert f"physicOffset={entry['physicOffset']}, physicSize={entry['physicSize']}" in cq

    # allocateMQ: the same assignment
    assert json.loads(runs["allocateMQ"].ok()) == orbit_of["allocateMQ"]

    # haStatus of a master without slaves
    ha = tabbed(runs["haStatus"].ok())[0]
    assert (ha["MasterAddr"], ha["SlaveNum"], ha["InSyncSlaveNum"]) == (
        broker, str(len(orbit_of["haStatus"][0]["haConnectionInfo"])), str(orbit_of["haStatus"][0]["inSyncSlaveNums"]))

    # exportMetadata / exportConfigs: the same topics, groups and broker configs in the files
    apache_meta = json.loads((tmp_path / "apache" / "metadata.json").read_text())
    orbit_meta = json.loads((tmp_path / "orbit" / "metadata.json").read_text())
    assert set(apache_meta["topicConfigTable"]) == set(orbit_meta["topicConfigTable"]) >= {topic}
    assert set(apache_meta["subscriptionGroupTable"]) == set(orbit_meta["subscriptionGroupTable"]) >= {group, idle_group}
    apache_configs = json.loads((tmp_path / "apache" / "configs.json").read_text())
    orbit_configs = json.loads((tmp_path / "orbit" / "configs.json").read_text())
    assert apache_configs["brokerConfigs"] == orbit_configs["brokerConfigs"]
    assert apache_configs["clusterScale"] == orbit_configs["clusterScale"]


def kv_value(cluster: Cluster, namespace: str, key: str) -> str | None:
    async def get(api):
        response = await api.call(cluster.namesrv, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key},
                                  ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return response.ext_fields.get("value") if response.code == ResponseCode.SUCCESS else None
    return cluster.api_call(get)


def test_mutating_commands_take_effect_as_orbitmq_admin_sees(plain: Cluster, tmp_path: Path) -> None:
    ns, broker = plain.namesrv, plain.broker
    fifo, readonly, normal = "MqaFifo", "MqaReadOnly", "MqaNormal"
    offsets_group, clone_group, doomed_group, listed_group = "MqaOffsets", "MqaClone", "MqaDoomed", "MqaListed"
    (tmp_path / "topics.json").write_text(json.dumps([
        {"topicName": normal, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]))
    (tmp_path / "groups.json").write_text(json.dumps([{"groupName": listed_group, "retryMaxTimes": 3}]))

    # ---- topics and groups, created and changed by Apache's tool ----
    created = mqadmin(tmp_path / "jvm", [
        ["updateTopic", "-n", ns, "-c", CLUSTER, "-t", fifo, "-r", "3", "-w", "3", "-a", "+message.type=FIFO"],
        ["updateTopic", "-n", ns, "-b", broker, "-t", readonly, "-r", "2", "-w", "2", "-p", "6"],
        ["updateTopicPerm", "-n", ns, "-c", CLUSTER, "-t", readonly, "-p", "4"],
        ["updateTopicList", "-n", ns, "-c", CLUSTER, "-f", str(tmp_path / "topics.json")],
        ["updateSubGroup", "-n", ns, "-c", CLUSTER, "-g", offsets_group, "-r", "5", "-o", "true", "-q", "1"],
        ["updateSubGroup", "-n", ns, "-b", broker, "-g", clone_group],
        ["updateSubGroup", "-n", ns, "-c", CLUSTER, "-g", doomed_group],
        ["updateSubGroupList", "-n", ns, "-c", CLUSTER, "-f", str(tmp_path / "groups.json")],
        # cloneGroupOffset finds the source group's brokers by its retry topic, which a consumer's
        # heartbeat would create (DefaultMQAdminExtImpl#examineConsumeStats).
        ["updateTopic", "-n", ns, "-c", CLUSTER, "-t", f"%RETRY%{offsets_group}", "-r", "1", "-w", "1"],
    ])
    for run in created:
        run.ok()
    assert f"create topic to {broker} success." in created[0].out
    assert "update topic perm from 6 to 4" in created[2].out
    for topic, queues, perm in ((fifo, 3, 6), (readonly, 2, 4), (normal, 2, 6)):
        (queue,) = orbit(ns, "topicRoute", "-t", topic)["queueDatas"]
        assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (queues, queues, perm), topic
    fifo_config = plain.api_call(lambda api: api.get_topic_config(broker, fifo))
    assert fifo_config is not None and fifo_config.attributes == {"message.type": "FIFO"}
    configs = {g: orbit(ns, "getConsumerConfig", "-g", g)[0]["subscriptionGroupConfig"]
               for g in (offsets_group, clone_group, doomed_group, listed_group)}
    assert (configs[offsets_group]["retryMaxTimes"], configs[offsets_group]["consumeMessageOrderly"]) == (5, True)
    assert configs[listed_group]["retryMaxTimes"] == 3

    # ---- messages, offsets, NameServer and broker settings ----
    changed = {name: run for name, run in zip(CHANGES, mqadmin(tmp_path / "jvm", [
        line(ns, broker, normal, offsets_group, clone_group, listed_group) for line in CHANGES.values()]),
        strict=True)}
    for name, run in changed.items():
        if name != "clusterRT":
            run.ok()
    sent = table(changed["sendMessage"].ok(), 4)
    traced = table(changed["sendMessage trace"].ok(), 4)
    to_queue = table(changed["sendMessage queue"].ok(), 4)
    assert [r[:3] for r in sent + traced + to_queue] == [[BROKER, sent[0][1], "SEND_OK"], [BROKER, traced[0][1],
                                                         "SEND_OK"], [BROKER, "1", "SEND_OK"]]
    rt_rows = [r for r in table(changed["checkMsgSendRT"].ok(), 3) if r[0] == BROKER]
    assert len(rt_rows) == 3 and all(r[2] == "true" for r in rt_rows), rt_rows
    assert changed["sendMsgStatus"].ok().count("sendStatus=SEND_OK") == 3
    cluster_rt = changed["clusterRT"]
    assert cluster_rt.stopped and "InterruptedException" in cluster_rt.err  # the loop ends when stopped
    first_round = table(cluster_rt.out)[0]
    assert first_round[:2] + first_round[3:5] == [CLUSTER, BROKER, "2", "0"], cluster_rt.out  # successes, failures

    by_key = orbit(ns, "queryMsgByKey", "-t", normal, "-k", "MqaKey1")
    assert [(m["msgId"], m["body"], m["tags"]) for m in by_key] == [(sent[0][3], "apache-body", "MqaTag")]
    every = orbit(ns, "printMsg", "-t", normal, "-d", "true")
    assert len(every) == 3 + 3  # sendMessage x3, checkMsgSendRT x3
    consumed = changed["consumeMessage"].ok()
    for m in every:
        assert f"MSGID: {m['msgId']}" in consumed, m

    assert changed["updateOrderConf get"].ok().strip() == (
        f"get orderConf success. topic=[{normal}], orderConf=[{BROKER}:2]")
    assert orbit(ns, "updateOrderConf", "-t", normal, "-m", "get")["orderConf"] == f"{BROKER}:2"
    assert kv_value(plain, "MQA_NS", "mqaKey") == "mqaValue"
    assert orbit(ns, "getNamesrvConfig")[ns]["scanNotActiveBrokerInterval"] == "4000"
    assert orbit(ns, "getBrokerConfig", "-b", broker)[broker]["flushIntervalCommitLog"] == "600"
    for name in ("deleteExpiredCommitLog", "cleanExpiredCQ", "cleanUnusedTopic"):
        assert changed[name].ok().strip() == "success", name

    maxima = by_queue(orbit(ns, "topicStatus", "-t", normal), "maxOffset")
    reset = {(r[0], int(r[1])): (int(r[2]),) for r in table(changed["resetOffsetByTime"].ok(), 3)}
    assert reset == maxima
    for group in (offsets_group, clone_group):  # reset by Apache, cloned by Apache
        offsets = orbit(ns, "consumerProgress", "-g", group, "-t", normal)["offsets"]
        assert by_queue(offsets, "consumerOffset") == maxima, group
    assert {(r[0], int(r[1])): (int(r[2]),) for r in table(changed["skipAccumulatedMessage"].ok(), 3)} == maxima
    assert by_queue(orbit(ns, "consumerProgress", "-g", listed_group, "-t", normal)["offsets"],
                    "consumerOffset") == maxima

    # wipeWritePerm: the route's queues lose W until addWritePerm
    assert f"wipe write perm of broker[{BROKER}] in name server[{ns}] OK" in changed["wipeWritePerm"].ok()
    assert orbit(ns, "topicRoute", "-t", normal)["queueDatas"][0]["perm"] == 4

    # ---- the way back; the trace of the traced send ----
    trace_id = traced[0][3]
    back = dict(zip(("addWritePerm", "queryMsgTraceById", "updateOrderConf", "deleteKvConfig", "deleteSubGroup",
                     "deleteTopic"), mqadmin(tmp_path / "jvm", [
        ["addWritePerm", "-n", ns, "-b", BROKER],
        ["queryMsgTraceById", "-n", ns, "-i", trace_id],
        ["updateOrderConf", "-n", ns, "-t", normal, "-m", "delete"],
        ["deleteKvConfig", "-n", ns, "-s", "MQA_NS", "-k", "mqaKey"],
        ["deleteSubGroup", "-n", ns, "-c", CLUSTER, "-g", doomed_group],
        ["deleteTopic", "-n", ns, "-c", CLUSTER, "-t", readonly],
    ]), strict=True))
    for run in back.values():
        run.ok()
    assert orbit(ns, "topicRoute", "-t", normal)["queueDatas"][0]["perm"] == 6
    trace = back["queryMsgTraceById"].out
    orbit_trace = orbit(ns, "queryMsgTraceById", "-i", trace_id)
    assert [r[:2] + r[-1:] for r in table(trace)] == [[t["type"], t["group"], "success"] for t in orbit_trace] \
        == [["Pub", orbit_trace[0]["group"], "success"]], (trace, orbit_trace)
    assert kv_value(plain, "MQA_NS", "mqaKey") is None
    assert kv_value(plain, "ORDER_TOPIC_CONFIG", normal) is None  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
    assert doomed_group not in json.dumps(orbit(ns, "exportMetadata", "-c", CLUSTER, "-f", str(tmp_path / "o")))
    assert readonly not in orbit(ns, "topicList")


# The second batch of test_mutating_commands_take_effect_as_orbitmq_admin_sees: name -> line of
# (namesrv, broker, topic, group to reset, group to clone into, group to skip).
CHANGES: dict[str, Any] = {
    "sendMessage": lambda ns, b, t, g, c, s: ["sendMessage", "-n", ns, "-t", t, "-p", "apache-body", "-k", "MqaKey1",
                                              "-c", "MqaTag"],
    "sendMessage trace": lambda ns, b, t, g, c, s: ["sendMessage", "-n", ns, "-t", t, "-p", "traced", "-k", "MqaKey2",
                                                    "-m", "true"],
    "sendMessage queue": lambda ns, b, t, g, c, s: ["sendMessage", "-n", ns, "-t", t, "-p", "to-queue-1", "-b", BROKER,
                                                    "-i", "1"],
    "checkMsgSendRT": lambda ns, b, t, g, c, s: ["checkMsgSendRT", "-n", ns, "-t", t, "-a", "3", "-s", "64"],
    "sendMsgStatus": lambda ns, b, t, g, c, s: ["sendMsgStatus", "-n", ns, "-b", BROKER, "-c", "3"],
    "clusterRT": lambda ns, b, t, g, c, s: (["clusterRT", "-n", ns, "-a", "2", "-i", "1"], 2500),
    "consumeMessage": lambda ns, b, t, g, c, s: ["consumeMessage", "-n", ns, "-t", t, "-g", s, "-c", "20"],
    "updateOrderConf put": lambda ns, b, t, g, c, s: ["updateOrderConf", "-n", ns, "-t", t, "-m", "put",
                                                      "-v", f"{BROKER}:2"],
    "updateOrderConf get": lambda ns, b, t, g, c, s: ["updateOrderConf", "-n", ns, "-t", t, "-m", "get"],
    "updateKvConfig": lambda ns, b, t, g, c, s: ["updateKvConfig", "-n", ns, "-s", "MQA_NS", "-k", "mqaKey",
                                                 "-v", "mqaValue"],
    "updateNamesrvConfig": lambda ns, b, t, g, c, s: ["updateNamesrvConfig", "-n", ns, "-k",
                                                      "scanNotActiveBrokerInterval", "-v", "4000"],
    "updateBrokerConfig": lambda ns, b, t, g, c, s: ["updateBrokerConfig", "-n", ns, "-b", b, "-k",
                                                     "flushIntervalCommitLog", "-v", "600"],
    "deleteExpiredCommitLog": lambda ns, b, t, g, c, s: ["deleteExpiredCommitLog", "-n", ns, "-b", b],
    "cleanExpiredCQ": lambda ns, b, t, g, c, s: ["cleanExpiredCQ", "-n", ns, "-b", b],
    "cleanUnusedTopic": lambda ns, b, t, g, c, s: ["cleanUnusedTopic", "-n", ns, "-b", b],
    "resetOffsetByTime": lambda ns, b, t, g, c, s: ["resetOffsetByTime", "-n", ns, "-g", g, "-t", t, "-s", "now"],
    "cloneGroupOffset": lambda ns, b, t, g, c, s: ["cloneGroupOffset", "-n", ns, "-s", g, "-d", c, "-t", t],
    "skipAccumulatedMessage": lambda ns, b, t, g, c, s: ["skipAccumulatedMessage", "-n", ns, "-g", s, "-t", t],
    "wipeWritePerm": lambda ns, b, t, g, c, s: ["wipeWritePerm", "-n", ns, "-b", BROKER],
}


def test_acl_commands_manage_what_orbitmq_admin_shows(plain: Cluster, tmp_path: Path) -> None:
    """ACL 2.0's users and ACLs, created, changed and copied by Apache's tool (on a broker without
    authentication on: signing with AclClientRPCHook is the Remoting client tests' part)."""
    ns, broker = plain.namesrv, plain.broker
    user, subject = "mqauser", "User:mqauser"
    runs = mqadmin(tmp_path / "jvm", [
        ["createUser", "-n", ns, "-c", CLUSTER, "-u", user, "-p", "first-pw", "-t", "Normal"],
        ["updateUser", "-n", ns, "-c", CLUSTER, "-u", user, "-p", "second-pw"],
        ["updateUser", "-n", ns, "-b", broker, "-u", user, "-s", "disable"],
        ["createAcl", "-n", ns, "-c", CLUSTER, "-s", subject, "-r", "Topic:MqaAcl,Group:MqaAclG", "-a", "Pub,Sub",
         "-d", "Allow", "-i", "127.0.0.1"],
        ["updateAcl", "-n", ns, "-c", CLUSTER, "-s", subject, "-r", "Topic:MqaAcl", "-a", "Pub", "-d", "Deny"],
        ["copyUser", "-n", ns, "-f", broker, "-t", broker, "-u", user],
        ["copyAcl", "-n", ns, "-f", broker, "-t", broker, "-s", subject],
        ["getUser", "-n", ns, "-b", broker, "-u", user],
        ["listUser", "-n", ns, "-c", CLUSTER],
        ["getAcl", "-n", ns, "-b", broker, "-s", subject],
        ["listAcl", "-n", ns, "-c", CLUSTER],
    ])
    outs = [run.ok() for run in runs]
    assert outs[0].strip() == f"create user to {broker} success."
    orbit_user = orbit(ns, "getUser", "-b", broker, "-u", user)
    expected_user = [user, "second-pw", "Normal", "disable"]
    assert [orbit_user[k] for k in ("username", "password", "userType", "userStatus")] == expected_user
    assert table(outs[7]) == [expected_user]
    assert [expected_user] == [r for r in table(outs[8]) if r[0] == user]
    # getAcl / listAcl: one row per entry (#Subject #PolicyType #Resource #Actions #SourceIp #Decision)
    orbit_acl = orbit(ns, "getAcl", "-b", broker, "-s", subject)
    entries = {e["resource"]: e for p in orbit_acl["policies"] for e in p["entries"]}
    assert entries["Topic:MqaAcl"]["actions"] == ["Pub"] and entries["Topic:MqaAcl"]["decision"] == "Deny"
    assert entries["Group:MqaAclG"]["sourceIps"] == ["127.0.0.1"]
    for text in (outs[9], outs[10]):
        rows = {r[2]: r for r in table(text) if r[0] == subject}
        assert set(rows) == set(entries), text
        for resource, entry in entries.items():
            assert rows[resource][1] == "Custom" and rows[resource][-1] == entry["decision"], rows[resource]
            assert " ".join(rows[resource][3:-2]) == "[" + ", ".join(entry["actions"]) + "]", rows[resource]

    gone = mqadmin(tmp_path / "jvm", [
        ["deleteAcl", "-n", ns, "-c", CLUSTER, "-s", subject, "-r", "Topic:MqaAcl"],
        ["getAcl", "-n", ns, "-b", broker, "-s", subject],
        ["deleteAcl", "-n", ns, "-c", CLUSTER, "-s", subject],
        ["deleteUser", "-n", ns, "-c", CLUSTER, "-u", user],
        ["listUser", "-n", ns, "-c", CLUSTER],
        ["listAcl", "-n", ns, "-c", CLUSTER],
    ])
    outs = [run.ok() for run in gone]
    assert [r[2] for r in table(outs[1])] == ["Group:MqaAclG"]
    assert user not in outs[4] and subject not in outs[5]
    assert user not in json.dumps(orbit(ns, "listUser", "-c", CLUSTER))
    assert subject not in json.dumps(orbit(ns, "listAcl", "-c", CLUSTER))
