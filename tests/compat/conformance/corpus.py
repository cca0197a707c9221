"""The requests both systems get: every family's good request and its bad variants.

Both sides are set up alike first (``run.py``): cluster DefaultCluster, broker set ``broker-a``
(one master), topic ``ConfTopic`` of 4 queues holding 8 messages in queue 0 (keys ``conf-0`` …),
subscription group ``ConfGroup`` whose offset on queue 0 is 3, and autoCreateTopicEnable=false.
``{broker_addr}`` and ``{now}`` in a field are filled per side. Cases run in order: a later one
may read what an earlier one wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from orbitmq.remoting.codes import RequestCode as RC

CLUSTER, BROKER, TOPIC, GROUP = "DefaultCluster", "broker-a", "ConfTopic", "ConfGroup"
MESSAGES = 8  # in queue 0
COMMITTED = 3  # ConfGroup's offset of queue 0
MISSING_TOPIC, MISSING_GROUP = "ConfNoSuchTopic", "ConfNoSuchGroup"
UNKNOWN_CODE = 39999


@dataclass(frozen=True)
class Case:
    name: str
    target: str  # "namesrv" | "broker"
    code: int
    fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # How deep the body's JSON structure is compared (-1: not compared).
    body_depth: int = 2
    # Header fields whose values must be equal too.
    values: tuple[str, ...] = ()
    ignore_fields: frozenset[str] = frozenset()
    # Asked again while the answer is SYSTEM_ERROR, for up to this many seconds: a request whose
    # answer needs state a freshly started broker has not built yet.
    settle_seconds: float = 0.0


def _pull(**over: str) -> dict[str, str]:
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "4",
              "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
              "subVersion": "0", "expressionType": "TAG"}
    return {**fields, **over}


def _send_v2(**over: str) -> dict[str, str]:
    fields = {"a": "ConfProducer", "b": TOPIC, "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "{now}",
              "h": "0", "i": "KEYS\x01conf-sent\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"}
    return {**fields, **over}


def _create_topic(name: str) -> dict[str, str]:
    return {"topic": name, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


LOCK_BODY = json.dumps({"consumerGroup": GROUP, "clientId": "127.0.0.1@conf",
                        "mqSet": [{"topic": TOPIC, "brokerName": BROKER, "queueId": 0}]}).encode()

HEARTBEAT_BODY = json.dumps({
    "clientID": "127.0.0.1@conf", "producerDataSet": [{"groupName": "ConfHbProducer"}],
    "consumerDataSet": [{"groupName": "ConfHbGroup", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                         "subscriptionDataSet": [{"topic": TOPIC, "subString": "*", "tagsSet": [], "codeSet": [],
                                                  "subVersion": 1, "expressionType": "TAG"}]}]}).encode()

NAMESRV_CASES = [
    Case("route", "namesrv", RC.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, body_depth=3),
    Case("route of a missing topic", "namesrv", RC.GET_ROUTEINFO_BY_TOPIC, {"topic": MISSING_TOPIC}),
    Case("route without its topic field", "namesrv", RC.GET_ROUTEINFO_BY_TOPIC, {}),
    Case("cluster info", "namesrv", RC.GET_BROKER_CLUSTER_INFO, body_depth=1),
    Case("all topics", "namesrv", RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, body_depth=1),
    Case("topics of a cluster", "namesrv", RC.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER}, body_depth=1),
    Case("topics of a missing cluster", "namesrv", RC.GET_TOPICS_BY_CLUSTER, {"cluster": "ConfNoCluster"}),
    Case("put a KV config", "namesrv", RC.PUT_KV_CONFIG, {"namespace": "ConfNs", "key": "k1", "value": "v1"}),
    Case("put a KV config without its value", "namesrv", RC.PUT_KV_CONFIG, {"namespace": "ConfNs", "key": "k2"}),
    Case("get a KV config", "namesrv", RC.GET_KV_CONFIG, {"namespace": "ConfNs", "key": "k1"}, values=("value",)),
    Case("get a missing KV config", "namesrv", RC.GET_KV_CONFIG, {"namespace": "ConfNs", "key": "nope"}),
    Case("KV list of a namespace", "namesrv", RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ConfNs"}, body_depth=3),
    Case("KV list of a missing namespace", "namesrv", RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ConfNoNs"}),
    Case("data version of an unknown broker", "namesrv", RC.QUERY_DATA_VERSION,
         {"brokerName": "ConfNoBroker", "brokerAddr": "127.0.0.1:1", "clusterName": CLUSTER, "brokerId": "0"},
         body_depth=-1),
    Case("wipe write perm of an unknown broker", "namesrv", RC.WIPE_WRITE_PERM_OF_BROKER,
         {"brokerName": "ConfNoBroker"}, values=("wipeTopicCount",)),
    Case("get a KV config without its namespace", "namesrv", RC.GET_KV_CONFIG, {"key": "k1"}),
    Case("system topics", "namesrv", RC.GET_SYSTEM_TOPIC_LIST_FROM_NS, body_depth=1),
    Case("unit topics", "namesrv", RC.GET_UNIT_TOPIC_LIST, body_depth=1),
    Case("member group of a broker set", "namesrv", RC.GET_BROKER_MEMBER_GROUP,
         {"clusterName": CLUSTER, "brokerName": BROKER}, body_depth=2),
    Case("member group of an unknown broker set", "namesrv", RC.GET_BROKER_MEMBER_GROUP,
         {"clusterName": CLUSTER, "brokerName": "ConfNoBroker"}, body_depth=2),
    Case("add write perm of an unknown broker", "namesrv", RC.ADD_WRITE_PERM_OF_BROKER,
         {"brokerName": "ConfNoBroker"}, values=("addTopicCount",)),
    Case("delete a missing topic", "namesrv", RC.DELETE_TOPIC_IN_NAMESRV, {"topic": MISSING_TOPIC}),
    Case("update a blacklisted config key", "namesrv", RC.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n"),
    Case("update the config with no body", "namesrv", RC.UPDATE_NAMESRV_CONFIG),
    Case("unknown request code", "namesrv", UNKNOWN_CODE),
]

BROKER_CASES = [
    Case("max offset", "broker", RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}, values=("offset",)),
    Case("max offset of an empty queue", "broker", RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "2"},
         values=("offset",)),
    Case("max offset of a missing topic", "broker", RC.GET_MAX_OFFSET, {"topic": MISSING_TOPIC, "queueId": "0"},
         values=("offset",)),
    Case("max offset of a queue beyond the topic's", "broker", RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "99"},
         values=("offset",)),
    Case("max offset without queueId", "broker", RC.GET_MAX_OFFSET, {"topic": TOPIC}),
    Case("min offset", "broker", RC.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": "0"}, values=("offset",)),
    Case("earliest store time of an empty queue", "broker", RC.GET_EARLIEST_MSG_STORETIME,
         {"topic": TOPIC, "queueId": "3"}, values=("timestamp",)),
    Case("offset by timestamp 0", "broker", RC.SEARCH_OFFSET_BY_TIMESTAMP,
         {"topic": TOPIC, "queueId": "0", "timestamp": "0"}, values=("offset",)),
    Case("offset by a future timestamp", "broker", RC.SEARCH_OFFSET_BY_TIMESTAMP,
         {"topic": TOPIC, "queueId": "0", "timestamp": "4102444800000"}, values=("offset",)),
    Case("committed offset", "broker", RC.QUERY_CONSUMER_OFFSET,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}, values=("offset",)),
    Case("offset never committed", "broker", RC.QUERY_CONSUMER_OFFSET,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1"}),
    Case("offset never committed, zero if not found", "broker", RC.QUERY_CONSUMER_OFFSET,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1", "setZeroIfNotFound": "true"}, values=("offset",)),
    Case("commit an offset", "broker", RC.UPDATE_CONSUMER_OFFSET,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "2", "commitOffset": "0"}),
    Case("pull", "broker", RC.PULL_MESSAGE, _pull(), body_depth=-1,
         values=("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")),
    Case("pull from beyond the end", "broker", RC.PULL_MESSAGE, _pull(queueOffset="100"), body_depth=-1,
         values=("nextBeginOffset", "minOffset", "maxOffset")),
    Case("pull at the end", "broker", RC.PULL_MESSAGE, _pull(queueOffset=str(MESSAGES)), body_depth=-1,
         values=("nextBeginOffset", "minOffset", "maxOffset")),
    Case("pull a missing topic", "broker", RC.PULL_MESSAGE, _pull(topic=MISSING_TOPIC), body_depth=-1),
    Case("pull a queue beyond the topic's", "broker", RC.PULL_MESSAGE, _pull(queueId="99"), body_depth=-1),
    Case("pull with a bad SQL92 filter", "broker", RC.PULL_MESSAGE,
         _pull(expressionType="SQL92", subscription="a IN (", sysFlag="4"), body_depth=-1),
    Case("pull with a SQL92 filter nothing matches", "broker", RC.PULL_MESSAGE,
         _pull(consumerGroup="ConfSqlGroup", expressionType="SQL92", subscription="a > 1", sysFlag="4"),
         body_depth=-1, values=("nextBeginOffset", "minOffset", "maxOffset")),
    Case("pull with a tag filter nothing matches", "broker", RC.PULL_MESSAGE,
         _pull(consumerGroup="ConfTagGroup", subscription="nomatch", sysFlag="4"), body_depth=-1,
         values=("nextBeginOffset", "minOffset", "maxOffset")),
    Case("send", "broker", RC.SEND_MESSAGE_V2, _send_v2(), b"conformance",
         values=("queueId",), ignore_fields=frozenset({"MSG_REGION", "TRACE_ON"})),
    Case("send to a missing topic", "broker", RC.SEND_MESSAGE_V2, _send_v2(b=MISSING_TOPIC), b"x"),
    Case("send to a queue beyond the topic's", "broker", RC.SEND_MESSAGE_V2, _send_v2(e="99"), b"x"),
    Case("send an empty body", "broker", RC.SEND_MESSAGE_V2, _send_v2(), b""),
    Case("send with a bad topic name", "broker", RC.SEND_MESSAGE_V2, _send_v2(b="bad topic!"), b"x"),
    Case("send to a system topic", "broker", RC.SEND_MESSAGE_V2, _send_v2(b="SCHEDULE_TOPIC_XXXX"), b"x"),
    Case("query by key", "broker", RC.QUERY_MESSAGE,
         {"topic": TOPIC, "key": "conf-1", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "4102444800000"},
         body_depth=-1),
    Case("query by a missing key", "broker", RC.QUERY_MESSAGE,
         {"topic": TOPIC, "key": "conf-none", "maxNum": "32", "beginTimestamp": "0",
          "endTimestamp": "4102444800000"}, body_depth=-1),
    Case("view by a bad offset", "broker", RC.VIEW_MESSAGE_BY_ID, {"offset": "99999999"}),
    Case("consumers of a group nobody is in", "broker", RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}),
    Case("connections of a group nobody is in", "broker", RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}),
    Case("topic config", "broker", RC.GET_TOPIC_CONFIG, {"topic": TOPIC}, body_depth=3),
    Case("topic config of a missing topic", "broker", RC.GET_TOPIC_CONFIG, {"topic": MISSING_TOPIC}),
    Case("all topic configs", "broker", RC.GET_ALL_TOPIC_CONFIG, body_depth=1),
    Case("topic stats", "broker", RC.GET_TOPIC_STATS_INFO, {"topic": TOPIC}, body_depth=1),
    Case("topic stats of a missing topic", "broker", RC.GET_TOPIC_STATS_INFO, {"topic": MISSING_TOPIC}),
    Case("consume stats", "broker", RC.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC}, body_depth=1),
    Case("consume stats of a missing group", "broker", RC.GET_CONSUME_STATS,
         {"consumerGroup": MISSING_GROUP, "topic": TOPIC}, body_depth=1),
    Case("all subscription groups", "broker", RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, body_depth=1),
    Case("all consumer offsets", "broker", RC.GET_ALL_CONSUMER_OFFSET, body_depth=1),
    # Apache's BrokerController#getRuntimeInfo throws NoSuchElementException (LinkedList#getLast of
    # an empty StatsItem minute list) until its stats were first sampled, about 10 s after start.
    Case("runtime info", "broker", RC.GET_BROKER_RUNTIME_INFO, body_depth=1, settle_seconds=60.0),
    Case("lock a queue", "broker", RC.LOCK_BATCH_MQ, body=LOCK_BODY, body_depth=3),
    Case("lock with a body that is not JSON", "broker", RC.LOCK_BATCH_MQ, body=b"not json"),
    Case("pop", "broker", RC.POP_MESSAGE,
         {"consumerGroup": "ConfPopGroup", "topic": TOPIC, "queueId": "1", "maxMsgNums": "4",
          "invisibleTime": "60000", "pollTime": "0", "bornTime": "{now}", "initMode": "0", "expType": "TAG",
          "exp": "*"}, body_depth=-1),
    Case("pop a missing topic", "broker", RC.POP_MESSAGE,
         {"consumerGroup": "ConfPopGroup", "topic": MISSING_TOPIC, "queueId": "-1", "maxMsgNums": "4",
          "invisibleTime": "60000", "pollTime": "0", "bornTime": "{now}", "initMode": "0"}, body_depth=-1),
    Case("ack with a bad extraInfo", "broker", RC.ACK_MESSAGE,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": "garbage", "offset": "0"}),
    Case("create a topic with a bad name", "broker", RC.UPDATE_AND_CREATE_TOPIC, _create_topic("bad topic!")),
    Case("create a topic named like a system topic", "broker", RC.UPDATE_AND_CREATE_TOPIC,
         _create_topic("SCHEDULE_TOPIC_XXXX")),
    Case("delete a system topic", "broker", RC.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"}),
    Case("end a transaction that does not exist", "broker", RC.END_TRANSACTION,
         {"producerGroup": "ConfProducer", "tranStateTableOffset": "0", "commitLogOffset": "999999",
          "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "00", "transactionId": "nope"}),
    Case("send back a message that does not exist", "broker", RC.CONSUMER_SEND_MSG_BACK,
         {"offset": "99999999", "group": GROUP, "delayLevel": "0", "originMsgId": "00", "originTopic": TOPIC,
          "unitMode": "false", "maxReconsumeTimes": "16"}),
    Case("min offset of a missing topic", "broker", RC.GET_MIN_OFFSET, {"topic": MISSING_TOPIC, "queueId": "0"},
         values=("offset",)),
    Case("query by key of a missing topic", "broker", RC.QUERY_MESSAGE,
         {"topic": MISSING_TOPIC, "key": "conf-1", "maxNum": "32", "beginTimestamp": "0",
          "endTimestamp": "4102444800000"}, body_depth=-1),
    Case("consumers without the group field", "broker", RC.GET_CONSUMER_LIST_BY_GROUP, {}),
    Case("heartbeat", "broker", RC.HEART_BEAT, body=HEARTBEAT_BODY, body_depth=-1),
    Case("heartbeat with a body that is not JSON", "broker", RC.HEART_BEAT, body=b"{no"),
    Case("unregister a client", "broker", RC.UNREGISTER_CLIENT,
         {"clientID": "127.0.0.1@conf", "consumerGroup": "ConfHbGroup"}),
    Case("consume queue entries", "broker", RC.QUERY_CONSUME_QUEUE,
         {"topic": TOPIC, "queueId": "0", "index": "0", "count": "2", "consumerGroup": GROUP}, body_depth=3),
    Case("consume queue entries of a missing topic", "broker", RC.QUERY_CONSUME_QUEUE,
         {"topic": MISSING_TOPIC, "queueId": "0", "index": "0", "count": "2", "consumerGroup": GROUP}),
    Case("subscription group config", "broker", RC.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": GROUP}, body_depth=2),
    Case("config of a missing subscription group", "broker", RC.GET_SUBSCRIPTIONGROUP_CONFIG,
         {"group": MISSING_GROUP}),
    Case("create a subscription group from a body that is not JSON", "broker",
         RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"{no"),
    Case("delete a missing subscription group", "broker", RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": MISSING_GROUP}),
    Case("who consumes a topic", "broker", RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}, body_depth=2),
    Case("topics of a consumer group", "broker", RC.QUERY_TOPICS_BY_CONSUMER, {"group": GROUP}, body_depth=2),
    Case("subscription of a group to a topic", "broker", RC.QUERY_SUBSCRIPTION_BY_CONSUMER,
         {"group": GROUP, "topic": TOPIC}, body_depth=2),
    Case("system topics of the broker", "broker", RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, body_depth=1),
    Case("stats of a topic's puts", "broker", RC.VIEW_BROKER_STATS_DATA,
         {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}, body_depth=2),
    Case("stats of a missing key", "broker", RC.VIEW_BROKER_STATS_DATA,
         {"statsName": "TOPIC_PUT_NUMS", "statsKey": MISSING_TOPIC}),
    Case("broker config", "broker", RC.GET_BROKER_CONFIG, body_depth=-1),
    Case("update a blacklisted broker config key", "broker", RC.UPDATE_BROKER_CONFIG,
         body=b"brokerConfigPath=/tmp/x\n"),
    Case("consume stats of the broker", "broker", RC.GET_BROKER_CONSUME_STATS,
         {"isOrder": "false", "timeoutMillis": "3000"}, body_depth=1),
    Case("reset offsets of a group by time", "broker", RC.INVOKE_BROKER_TO_RESET_OFFSET,
         {"topic": TOPIC, "group": GROUP, "timestamp": "0", "isForce": "true"}, body_depth=2),
    Case("reset offsets of a missing topic", "broker", RC.INVOKE_BROKER_TO_RESET_OFFSET,
         {"topic": MISSING_TOPIC, "group": GROUP, "timestamp": "0", "isForce": "true"}),
    Case("change invisible time with a bad extraInfo", "broker", RC.CHANGE_MESSAGE_INVISIBLETIME,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": "garbage", "offset": "0",
          "invisibleTime": "1000"}),
    Case("notification", "broker", RC.NOTIFICATION,
         {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "pollTime": "0", "bornTime": "{now}"},
         values=("hasMsg",)),
    Case("notification of a missing topic", "broker", RC.NOTIFICATION,
         {"consumerGroup": GROUP, "topic": MISSING_TOPIC, "queueId": "-1", "pollTime": "0", "bornTime": "{now}"}),
    Case("delay offsets", "broker", RC.GET_ALL_DELAY_OFFSET, body_depth=1),
    Case("running info of a client that is not connected", "broker", RC.GET_CONSUMER_RUNNING_INFO,
         {"consumerGroup": GROUP, "clientId": "127.0.0.1@nobody", "jstackEnable": "false"}),
    Case("unknown request code", "broker", UNKNOWN_CODE),
]

CASES = NAMESRV_CASES + BROKER_CASES

# Differences that are deliberate, with the reason; each is also listed in docs/compatibility.md
# ("Differential conformance"). name -> reason.
DEVIATIONS: dict[str, str] = {
    "route without its topic field":
        "a request without its required topic is malformed: OrbitMQ answers SYSTEM_ERROR naming the missing field, "
        "as for every other required header field; Apache's NameServer looks up a topic named \"null\" "
        "(TOPIC_NOT_EXIST)",
    "put a KV config without its value":
        "Apache's NameServer stores a null value; OrbitMQ refuses the malformed request (SYSTEM_ERROR naming value)",
    "send an empty body":
        "Apache's broker fails with a NullPointerException (SYSTEM_ERROR); OrbitMQ stores the empty message, "
        "as the CommitLog's format allows (clients and the proxy refuse empty bodies before they reach a broker)",
    "pull with a bad SQL92 filter":
        "Apache's broker keeps a SQL92 subscription it cannot compile and then matches every message with it "
        "(ExpressionMessageFilter without a compiled expression): the consumer gets what it filtered out. OrbitMQ "
        "answers SUBSCRIPTION_PARSE_FAILED naming the expression",
    "get a KV config without its namespace":
        "as for the route without its topic: SYSTEM_ERROR naming the missing field; Apache's NameServer looks "
        "in a namespace named \"null\" (QUERY_NOT_FOUND)",
    "consume queue entries of a missing topic":
        "Apache's broker creates a ConsumeQueue for the missing topic as a side effect of the query and answers "
        "SUCCESS with \"Index 0 of 0@... is not exist!\"; OrbitMQ creates nothing and answers SYSTEM_ERROR "
        "\"0@... is not exist!\", the remark Apache gives when its queue lookup finds none",
    "config of a missing subscription group":
        "Apache's broker looks the group up with findSubscriptionGroupConfig, which creates it when "
        "autoCreateSubscriptionGroup is on: a read (mqadmin getConsumerConfig with a typo) creates groups. "
        "OrbitMQ only reads: SUBSCRIPTION_GROUP_NOT_EXIST \"No group in this broker\", Apache's answer when "
        "creation is off",
    "change invisible time with a bad extraInfo":
        "as for the ack: Apache lets an IllegalArgumentException out (SYSTEM_ERROR); OrbitMQ answers "
        "INVALID_PARAMETER saying what is wrong",
    "ack with a bad extraInfo":
        "Apache's broker lets an IllegalArgumentException out (SYSTEM_ERROR); OrbitMQ answers INVALID_PARAMETER "
        "saying what is wrong with the extraInfo",
}
