"""A store with the ConsumeQueue extension and SQL92 bit maps, read by either broker (issue 28).

OrbitMQ's broker and Apache RocketMQ 5.5.0's take turns on one store directory, both with
enableConsumeQueueExt and enableCalcFilterBitMap: OrbitMQ writes (clean stop), Apache reads and
writes (clean stop), OrbitMQ reads again. Each broker serves every message so far: by offset with
a TAG subscription (the tag code read through the other kind's extension units, a tag that is not
there matching nothing), and by the SQL92 filter a consumer registered by heartbeat, pulled
without FLAG_SUBSCRIPTION so the bloom check of the other kind's bit maps (and the other kind's
consumerFilter.json, reloaded) decides before the CommitLog is read; QUERY_CONSUME_QUEUE's
``eval`` of every unit shows each kind's bloom verdict on the bit maps the other kind wrote.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from orbitmq.client import MQClientAPI
from orbitmq.client.api import ConsumerData
from orbitmq.client.results import PullStatus
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.message import Message
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode
from tests.support import running, start_broker
from tests.support.apache import Apache

BROKER_NAME = "broker-cq-ext"
SEGMENT = 4 * 1024 * 1024
TOPIC = "CqExtTopic"
GROUP = "CG_CQ_EXT"
EXPR = "a = 3"
KEYS = {"enableConsumeQueueExt": "true", "enableCalcFilterBitMap": "true", "enablePropertyFilter": "true",
        "mappedFileSizeCommitLog": SEGMENT}


async def _heartbeat(api: MQClientAPI, addr: str, version: int) -> None:
    sub = SubscriptionData(topic=TOPIC, sub_string=EXPR, expression_type="SQL92", sub_version=version)
    await api.heartbeat(addr, "cq-ext-client@1", consumers=[ConsumerData(GROUP, [sub])])


async def _pull(api: MQClientAPI, addr: str, offset: int, sys_flag: int, subscription: str | None,
                expression_type: str | None, version: int):
    header = h.PullMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=offset,
                                        max_msg_nums=32, sys_flag=sys_flag, commit_offset=0,
                                        suspend_timeout_millis=0, subscription=subscription,
                                        sub_version=version, expression_type=expression_type)
    return await api.pull_message(addr, header)


async def _drain(api: MQClientAPI, addr: str, version: int, tag: str | None = None) -> list[int]:
    """``i`` of every message of queue 0: by the heartbeat's SQL92 filter, or by TAG ``tag``."""
    got, offset = [], 0
    for _ in range(200):
        if tag is None:
            result = await _pull(api, addr, offset, 0, None, None, version)
        else:
            result = await _pull(api, addr, offset, 0x4, tag, "TAG", version)
        got.extend(int(m.properties["i"]) for m in result.messages)
        if result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL) or result.next_begin_offset == offset:
            return got
        offset = result.next_begin_offset
    raise AssertionError("drain did not end")


async def _write(addr: str, start: int, count: int, version: int, first: bool) -> None:
    api = MQClientAPI(timeout=5.0)
    try:
        if first:
            await api.create_topic(addr, TopicConfig(TOPIC, 1, 1))
            await api.create_subscription_group(addr, SubscriptionGroupConfig(GROUP))
        await _heartbeat(api, addr, version)
        # ConsumerFilterData#isMsgInLive counts a message stored in the filter's own millisecond
        # (its bornTime) as older than the filter: its bit map is not trusted and `eval` is True.
        await asyncio.sleep(0.01)
        for i in range(start, start + count):
            msg = Message(TOPIC, b"m%d" % i, properties={"a": str(i % 10), "i": str(i), "TAGS": "t"})
            await api.send_message(addr, BROKER_NAME, msg, "PG_CQ_EXT", 0)
        deadline = time.monotonic() + 10
        while await api.get_max_offset(addr, TOPIC, 0) < start + count:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        await api.close()


async def _check(addr: str, total: int, version: int) -> None:
    api = MQClientAPI(timeout=5.0)
    try:
        await _heartbeat(api, addr, version)  # the same client: its reloaded filter lives again
        assert await _drain(api, addr, version, tag="t") == list(range(total))
        assert await _drain(api, addr, version, tag="other") == []
        assert sorted(await _drain(api, addr, version)) == [i for i in range(total) if i % 10 == 3]
        # queryCq -g: each unit's bit map judged by the group's bloom positions, on either kind
        response = await api.call(addr, RequestCode.QUERY_CONSUME_QUEUE, {
            "topic": TOPIC, "queueId": "0", "index": "0", "count": str(total), "consumerGroup": GROUP})
        rows = json.loads(response.body)["queueData"]
        assert [row["eval"] for row in rows] == [i % 10 == 3 for i in range(total)]
        assert all(row.get("bitMap") for row in rows)
    finally:
        await api.close()


def test_extension_store_read_by_either_kind(tmp_path: Path) -> None:
    root = tmp_path / "store"
    version = int(time.time() * 1000)
    with running(tmp_path) as runner:
        broker, addr = start_broker(runner, runner.workdir, "", "orbitmq-0", store=root, brokerName=BROKER_NAME,
                                    **KEYS)
        asyncio.run(_write(addr, 0, 60, version, True))
        asyncio.run(_check(addr, 60, version))
        assert broker.stop(timeout=60) == 0, broker.log_tail()
        assert len(list((root / "consumequeue_ext" / TOPIC / "0").iterdir())) == 1

        apache = Apache(runner).broker("", "apache-1", broker_name=BROKER_NAME, store=root, **KEYS)
        asyncio.run(_check(apache.addr, 60, version))
        asyncio.run(_write(apache.addr, 60, 40, version, False))
        asyncio.run(_check(apache.addr, 100, version))
        assert apache.process.stop(timeout=60) in (0, 143), apache.process.log_tail()

        broker, addr = start_broker(runner, runner.workdir, "", "orbitmq-2", store=root, brokerName=BROKER_NAME,
                                    **KEYS)
        asyncio.run(_check(addr, 100, version))
        asyncio.run(_write(addr, 100, 20, version, False))
        asyncio.run(_check(addr, 120, version))
        assert broker.stop(timeout=60) == 0, broker.log_tail()
