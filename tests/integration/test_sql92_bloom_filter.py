"""SQL92 bloom filters over the ConsumeQueue extension against a real broker process (issue 28).

The broker runs with enableConsumeQueueExt, enableCalcFilterBitMap and filterSupportRetry. A
consumer group registers SQL92 subscriptions by heartbeat, for its topic and for its retry
topic, and pulls without FLAG_SUBSCRIPTION (as DefaultMQPushConsumer does), so the broker uses
the registered filter with its bloom positions. The ConsumeQueue files on disk hold extension
addresses; pulls return exactly the matching messages; on the retry topic the group's
expression of the real topic decides (filterSupportRetry); after a clean restart the extension
and consumerFilter.json are recovered and pulls give the same answers.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.client.api import ConsumerData
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.message import Message
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode

TOPIC = "SqlBloomTopic"
GROUP = "CG_SQL_BLOOM"
RETRY = f"%RETRY%{GROUP}"
BROKER_NAME = "broker-bloom"
EXPR = "a = 3"
MAX_ADDR = -(2**31) - 1


@pytest.fixture
async def broker(broker_cluster, mq_api: MQClientAPI):
    c = await broker_cluster(brokerClusterName="BloomCluster", brokerName=BROKER_NAME,
                             enableConsumeQueueExt="true", enableCalcFilterBitMap="true",
                             filterSupportRetry="true", messageDelayLevel=" ".join(["1s"] * 18))
    await mq_api.create_topic(c.addr, TopicConfig(TOPIC, 1, 1))
    await mq_api.create_subscription_group(c.addr, SubscriptionGroupConfig(GROUP))
    return c, mq_api


def subscriptions(version: int) -> list[SubscriptionData]:
    return [SubscriptionData(topic=TOPIC, sub_string=EXPR, expression_type="SQL92", sub_version=version),
            SubscriptionData(topic=RETRY, sub_string="TRUE", expression_type="SQL92", sub_version=version)]


# A second group on the topic (other bloom positions), on the TAGS and MSG_REGION the
# producer and the broker stamp: the bit maps are computed from exactly what is stored.
GROUP2 = "CG_SQL_BLOOM_2"
EXPR2 = "TAGS = 't' AND MSG_REGION IS NOT NULL AND i >= 95"


async def heartbeat(api: MQClientAPI, addr: str, version: int) -> None:
    second = SubscriptionData(topic=TOPIC, sub_string=EXPR2, expression_type="SQL92", sub_version=version)
    await api.heartbeat(addr, "bloom-client@1", consumers=[ConsumerData(GROUP, subscriptions(version)),
                                                          ConsumerData(GROUP2, [second])])


async def send(api: MQClientAPI, addr: str, start: int, count: int) -> None:
    for i in range(start, start + count):
        msg = Message(TOPIC, b"m%d" % i, properties={"a": str(i % 10), "i": str(i), "TAGS": "t"})
        await api.send_message(addr, BROKER_NAME, msg, "PG_BLOOM", 0)


async def drain(api: MQClientAPI, addr: str, topic: str, version: int, group: str = GROUP) -> list:
    """Every message pulled from queue 0 with the heartbeat's subscription (no FLAG_SUBSCRIPTION)."""
    got, offset = [], 0
    for _ in range(1000):
        header = h.PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=0, queue_offset=offset,
                                            max_msg_nums=32, sys_flag=0, commit_offset=0, suspend_timeout_millis=0,
                                            subscription=None, sub_version=version)
        result = await api.pull_message(addr, header)
        got.extend(result.messages)
        if result.next_begin_offset == offset:
            return got
        offset = result.next_begin_offset
    raise AssertionError("drain did not end")


def cq_tags(store: Path, topic: str) -> list[int]:
    data = (store / "consumequeue" / topic / "0" / ("0" * 20)).read_bytes()
    tags = []
    for pos in range(0, len(data), 20):
        offset, size, code = struct.unpack_from(">qiq", data, pos)
        if size <= 0:
            break
        tags.append(code)
    return tags


async def wait_max_offset(api: MQClientAPI, addr: str, topic: str, expected: int, timeout: float = 15.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while (await api.get_max_offset(addr, topic, 0)) < expected:
        assert time.monotonic() < deadline, f"{topic} did not reach {expected}"
        await asyncio.sleep(0.1)


async def test_sql92_pulls_prematched_by_bloom_filter_with_retry_and_restart(broker, tmp_path: Path) -> None:
    cluster, api = broker
    addr = cluster.addr
    store = tmp_path / "store"
    version = int(time.time() * 1000)
    await heartbeat(api, addr, version)
    await send(api, addr, 0, 100)
    await wait_max_offset(api, addr, TOPIC, 100)

    got = await drain(api, addr, TOPIC, version)
    assert sorted(int(m.properties["i"]) for m in got) == [i for i in range(100) if i % 10 == 3]
    assert sorted(int(m.properties["i"]) for m in await drain(api, addr, TOPIC, version, GROUP2)) == \
        list(range(95, 100))
    # every entry of the queue file points to an extension unit (upstream's address encoding)
    tags = cq_tags(store, TOPIC)
    assert len(tags) == 100 and all(t <= MAX_ADDR for t in tags)
    assert (store / "consumequeue_ext" / TOPIC / "0" / ("0" * 20)).stat().st_size == 48 * 1024 * 1024

    # POP reads the same queue (its filter has no bloom data, as upstream's): SQL92 and TAG
    assert sorted(int(m.properties["i"]) for m in await pop_all(api, addr, "CG_POP_SQL", EXPR, "SQL92")) == \
        [i for i in range(100) if i % 10 == 3]
    assert len(await pop_all(api, addr, "CG_POP_TAG", "t", "TAG")) == 100
    assert await pop_all(api, addr, "CG_POP_NONE", "other", "TAG") == []

    # QUERY_CONSUME_QUEUE (mqadmin queryCq -g): the units, their bit maps and the bloom verdicts
    response = await api.call(addr, RequestCode.QUERY_CONSUME_QUEUE, {
        "topic": TOPIC, "queueId": "0", "index": "0", "count": "20", "consumerGroup": GROUP})
    body = json.loads(response.body)
    assert json.loads(body["filterData"])["expression"] == EXPR
    rows = body["queueData"]
    assert [row["eval"] for row in rows] == [i % 10 == 3 for i in range(20)]
    assert all(len(row["bitMap"].replace("\n", "")) == 112 and "extendDataJson" in row for row in rows)
    assert {json.loads(row["extendDataJson"])["size"] for row in rows} == {20 + 14}

    # filterSupportRetry: the retry topic's own expression is TRUE, yet the expression the group
    # gave for the real topic decides. One matching and one other message go back.
    for m in got[:1]:
        await api.consumer_send_msg_back(addr, GROUP, m.commit_log_offset, 1, m.msg_id, TOPIC)
    other = [m for m in await _all_messages(api, addr) if m.properties["a"] == "4"][0]
    await api.consumer_send_msg_back(addr, GROUP, other.commit_log_offset, 1, other.msg_id, TOPIC)
    await wait_max_offset(api, addr, RETRY, 2)
    retried = await drain(api, addr, RETRY, version)
    assert [m.properties["i"] for m in retried] == [got[0].properties["i"]]
    assert all(t <= MAX_ADDR for t in cq_tags(store, RETRY))

    # a clean restart: the extension, the queues and consumerFilter.json come back
    await cluster.stop_broker()
    persisted = json.loads((store / "config" / "consumerFilter.json").read_text())
    entry = persisted["filterDataByTopic"][TOPIC]["groupFilterData"][GROUP]
    assert entry["expression"] == EXPR and entry["bloomFilterData"]["bitNum"] == 112
    await cluster.start_broker()
    await heartbeat(api, addr, version)  # the same client again: its filter lives on, bit maps valid
    await send(api, addr, 100, 50)
    await wait_max_offset(api, addr, TOPIC, 150)
    got = await drain(api, addr, TOPIC, version)
    assert sorted(int(m.properties["i"]) for m in got) == [i for i in range(150) if i % 10 == 3]
    tags = cq_tags(store, TOPIC)
    assert len(tags) == 150 and all(t <= MAX_ADDR for t in tags)
    assert [m.properties["i"] for m in await drain(api, addr, RETRY, version)] == [retried[0].properties["i"]]

    # kill -9: recovery of an abort-marked store keeps every entry and its unit
    cluster.broker.kill()
    assert (store / "abort").exists()
    await cluster.start_broker()
    await heartbeat(api, addr, version)
    got = await drain(api, addr, TOPIC, version)
    assert sorted(int(m.properties["i"]) for m in got) == [i for i in range(150) if i % 10 == 3]
    await send(api, addr, 150, 10)
    await wait_max_offset(api, addr, TOPIC, 160)
    got = await drain(api, addr, TOPIC, version)
    assert sorted(int(m.properties["i"]) for m in got) == [i for i in range(160) if i % 10 == 3]
    assert all(t <= MAX_ADDR for t in cq_tags(store, TOPIC))


async def pop_all(api: MQClientAPI, addr: str, group: str, exp: str, exp_type: str) -> list:
    """POP queue 0 of TOPIC from the start until it answers nothing (invisible for a minute)."""
    got = []
    for _ in range(50):
        header = h.PopMessageRequestHeader(consumer_group=group, topic=TOPIC, queue_id=0, max_msg_nums=32,
                                           invisible_time=60_000, poll_time=0, born_time=int(time.time() * 1000),
                                           init_mode=0, exp_type=exp_type, exp=exp)
        result = await api.pop_message(addr, BROKER_NAME, header)
        if not result.messages:
            return got
        got.extend(result.messages)
    raise AssertionError("pop did not end")


async def _all_messages(api: MQClientAPI, addr: str) -> list:
    header = h.PullMessageRequestHeader(consumer_group="CG_ANY", topic=TOPIC, queue_id=0, queue_offset=0,
                                        max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                                        subscription="*", sub_version=0)
    return (await api.pull_message(addr, header)).messages
