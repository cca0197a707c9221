"""CONSUMER_SEND_MSG_BACK against a real NameServer and broker: retry topic, delay levels, DLQ.

The broker runs with a shortened ``messageDelayLevel`` (every level one second) so that a
message sent back again and again visibly climbs the levels (3, 4, … through
SCHEDULE_TOPIC_XXXX queues 2, 3, …) and lands in the write-only ``%DLQ%<group>`` once its
reconsume count reaches the group's retryMaxTimes (set small with updateSubGroup).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from orbitmq.client import MQBrokerError, MQClientAPI
from orbitmq.common.constants import PERM_WRITE, RMQ_SYS_SCHEDULE_TOPIC
from orbitmq.common.message import Message, MessageExt
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode

TOPIC = "RetryTopic"
GROUP = "CG_RETRY"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"
RETRY_MAX_TIMES = 3
BROKER_NAME = "broker-retry"


@pytest.fixture
async def broker(broker_cluster, mq_api: MQClientAPI):
    c = await broker_cluster(brokerClusterName="RetryCluster", brokerName=BROKER_NAME,
                             autoCreateSubscriptionGroup="false", messageDelayLevel=" ".join(["1s"] * 8))
    await mq_api.create_topic(c.addr, TopicConfig(TOPIC, 2, 2))
    await mq_api.create_subscription_group(c.addr, SubscriptionGroupConfig(GROUP, retry_max_times=RETRY_MAX_TIMES))
    return c.addr, mq_api


async def pull_at(api: MQClientAPI, addr: str, topic: str, offset: int, queue_id: int = 0) -> MessageExt | None:
    header = h.PullMessageRequestHeader(consumer_group=GROUP, topic=topic, queue_id=queue_id, queue_offset=offset,
                                        max_msg_nums=1, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                                        subscription="*", sub_version=0)
    result = await api.pull_message(addr, header)
    return result.messages[0] if result.messages else None


async def wait_max_offset(api: MQClientAPI, addr: str, topic: str, expected: int, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while (current := await api.get_max_offset(addr, topic, 0)) < expected:
        assert time.monotonic() < deadline, f"{topic} max offset {current}, expected {expected}"
        await asyncio.sleep(0.05)


async def send_original(api: MQClientAPI, addr: str, key: str) -> MessageExt:
    msg = Message(TOPIC, b"payload-" + key.encode(), properties={"KEYS": key, "TAGS": "t1"})
    await api.send_message(addr, BROKER_NAME, msg, "PG_RETRY", 0)
    original = await pull_at(api, addr, TOPIC, await api.get_max_offset(addr, TOPIC, 0) - 1)
    assert original is not None and original.keys == [key]
    return original


async def send_back(api: MQClientAPI, addr: str, msg: MessageExt, delay_level: int = 0,
                    max_reconsume_times: int | None = None) -> None:
    await api.consumer_send_msg_back(addr, GROUP, msg.commit_log_offset, delay_level, msg.msg_id, TOPIC,
                                     max_reconsume_times)


async def query_by_key(api: MQClientAPI, addr: str, topic: str, key: str) -> list[MessageExt]:
    return await api.query_message(addr, topic, key, 32, 0, 2**63 - 1)


async def test_send_back_climbs_delay_levels_then_lands_in_dlq(broker) -> None:
    addr, api = broker
    original = await send_original(api, addr, "k-climb")
    current = original
    for attempt in range(RETRY_MAX_TIMES):
        level = 3 + attempt  # delayLevel 0 means "3 + reconsumeTimes"
        schedule_queue = level - 1
        parked_before = await api.get_max_offset(addr, RMQ_SYS_SCHEDULE_TOPIC, schedule_queue)
        sent_at = time.time()
        await send_back(api, addr, current)
        assert await api.get_max_offset(addr, RMQ_SYS_SCHEDULE_TOPIC, schedule_queue) == parked_before + 1
        await wait_max_offset(api, addr, RETRY, attempt + 1)
        retried = await pull_at(api, addr, RETRY, attempt)
        assert retried is not None
        print(f"send-back {attempt + 1}: level {level}, back in {RETRY} after {time.time() - sent_at:.2f}s")
        assert retried.store_timestamp - retried.born_timestamp >= 1000 * (attempt + 1)
        assert retried.reconsume_times == attempt + 1
        assert retried.body == original.body and retried.tags == "t1"
        assert retried.properties["RETRY_TOPIC"] == TOPIC
        assert retried.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
        assert retried.properties["REAL_TOPIC"] == RETRY
        assert "DELAY" not in retried.properties
        current = retried

    # reconsumeTimes == retryMaxTimes: the next send-back goes to the dead-letter queue at once.
    await send_back(api, addr, current)
    await wait_max_offset(api, addr, DLQ, 1, timeout=3.0)
    assert await api.get_max_offset(addr, RETRY, 0) == RETRY_MAX_TIMES
    dead = await query_by_key(api, addr, DLQ, "k-climb")
    assert len(dead) == 1
    assert dead[0].reconsume_times == RETRY_MAX_TIMES + 1
    assert dead[0].properties["RETRY_TOPIC"] == TOPIC
    assert dead[0].properties["ORIGIN_MESSAGE_ID"] == original.msg_id
    assert "DELAY" not in dead[0].properties
    dlq_config = await api.get_topic_config(addr, DLQ)
    assert dlq_config is not None and dlq_config.perm == PERM_WRITE  # write-only: never redelivered
    with pytest.raises(MQBrokerError) as refused:
        await pull_at(api, addr, DLQ, 0)
    assert refused.value.code == ResponseCode.NO_PERMISSION


async def test_negative_level_and_client_limit_go_straight_to_dlq(broker) -> None:
    addr, api = broker
    first = await send_original(api, addr, "k-negative")
    await send_back(api, addr, first, delay_level=-1)
    second = await send_original(api, addr, "k-limit")
    await send_back(api, addr, second, max_reconsume_times=0)  # the client's own limit wins
    await wait_max_offset(api, addr, DLQ, 2, timeout=3.0)
    assert await api.get_max_offset(addr, RETRY, 0) == 0
    for key in ("k-negative", "k-limit"):
        (dead,) = await query_by_key(api, addr, DLQ, key)
        assert dead.reconsume_times == 1 and dead.properties["RETRY_TOPIC"] == TOPIC


async def test_explicit_delay_level_and_refusals(broker) -> None:
    addr, api = broker
    original = await send_original(api, addr, "k-explicit")
    await send_back(api, addr, original, delay_level=6)
    assert await api.get_max_offset(addr, RMQ_SYS_SCHEDULE_TOPIC, 5) == 1
    await wait_max_offset(api, addr, RETRY, 1)

    async def refused(fields: dict[str, str]) -> tuple[int, str]:
        response = await api.invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        return response.code, response.remark or ""

    code, remark = await refused({"offset": str(original.commit_log_offset), "group": "CG_UNKNOWN",
                                  "delayLevel": "0"})
    assert code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "CG_UNKNOWN" in remark
    code, remark = await refused({"offset": str(10**12), "group": GROUP, "delayLevel": "0"})
    assert code == ResponseCode.SYSTEM_ERROR and "look message by offset failed" in remark
    code, remark = await refused({"offset": "not-a-number", "group": GROUP, "delayLevel": "0"})
    assert code == ResponseCode.SYSTEM_ERROR and "offset" in remark
    code, remark = await refused({"group": GROUP, "delayLevel": "0"})
    assert code == ResponseCode.SYSTEM_ERROR and "offset" in remark
    # The broker keeps serving after the refusals.
    assert await api.get_max_offset(addr, RETRY, 0) == 1
