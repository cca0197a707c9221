"""Issue 22's smaller broker deviations, on a BrokerController in this process over real Remoting
connections: brokerVersion in GET_BROKER_RUNTIME_INFO is the broker's own, a corrected pull
offset writes an OffsetMovedEvent to OFFSET_MOVED_EVENT (a slave sends the consumer back to the
master instead), and a send to a V1 pop retry topic counts against its real group.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.common.constants import RMQ_SYS_OFFSET_MOVED_EVENT
from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import DEFAULT_VERSION
from tests.support.broker import in_process_broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    async with in_process_broker(tmp_path / "store", "SmallCluster", "broker-small",
                                 autoCreateSubscriptionGroup="false") as controller:
        yield controller


def addr_of(broker: BrokerController) -> str:
    return f"127.0.0.1:{broker.config.listen_port}"


def send_request(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}"}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_SMALL", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
        "k": "false", "m": "false"}, body)


def pull_request(group: str, topic: str, offset: int) -> RemotingCommand:
    sys_flag = build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": str(offset), "maxMsgNums": "32",
        "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
        "subVersion": "0", "expressionType": "TAG"})


async def dispatched(broker: BrokerController, topic: str, count: int) -> None:
    """Wait (up to 5 s) until ``count`` messages of queue 0 of ``topic`` are in its ConsumeQueue."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if broker.message_store.get_max_offset_in_queue(topic, 0) >= count:
            return
        await asyncio.sleep(0.02)


async def offset_moved_events(broker: BrokerController, at_least: int) -> list[dict]:
    """The OffsetMovedEvent bodies stored so far, once ``at_least`` are dispatched (or 5 s passed)."""
    await dispatched(broker, RMQ_SYS_OFFSET_MOVED_EVENT, at_least)
    result = await broker.get_message("CG_READER", RMQ_SYS_OFFSET_MOVED_EVENT, 0, 0, 32, None, None)
    if result is None or not result.message_buffer_list:
        return []
    records = decode_records(b"".join(bytes(b) for b in result.message_buffer_list), check_crc=False)
    return [{"tags": m.tags, "keys": m.keys, **json.loads(m.body)} for m in records]


async def test_runtime_info_reports_the_brokers_version_not_the_callers(broker: BrokerController) -> None:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    request.version = 317  # an old client (V4_9_x): its own version must not come back
    async with RemotingClient() as client:
        response = await client.invoke(addr_of(broker), request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert json.loads(response.body)["table"]["brokerVersion"] == str(DEFAULT_VERSION) != "317"


async def test_corrected_pull_offset_writes_an_offset_moved_event(broker: BrokerController) -> None:
    broker.topic_config_manager.put(TopicConfig("MovedT", 1, 1))
    broker.subscription_group_manager.put(SubscriptionGroupConfig("CG_MOVED"))
    async with RemotingClient() as client:
        for i in range(3):
            sent = await client.invoke(addr_of(broker), send_request("MovedT", b"m%d" % i), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        await dispatched(broker, "MovedT", 3)
        pulled = await client.invoke(addr_of(broker), pull_request("CG_MOVED", "MovedT", 100), 5)
        assert pulled.code == ResponseCode.PULL_OFFSET_MOVED, pulled.remark
        corrected = int(pulled.ext_fields["nextBeginOffset"])
        assert corrected == 3  # the max offset, though the queue starts at 0 (upstream ISSUE #4215)
        # An offset the queue has is no correction: nothing is recorded for it.
        found = await client.invoke(addr_of(broker), pull_request("CG_MOVED", "MovedT", 1), 5)
        assert found.code == ResponseCode.SUCCESS
    events = await offset_moved_events(broker, 1)
    assert events == [{"tags": "CG_MOVED", "keys": ["CG_MOVED"], "consumerGroup": "CG_MOVED",
                       "messageQueue": {"brokerName": "broker-small", "queueId": 0, "topic": "MovedT"},
                       "offsetNew": corrected, "offsetRequest": 100}]


async def test_slave_sends_a_moved_offset_to_the_master_unless_offset_check_in_slave(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path / "slave", "SmallCluster", "broker-small", brokerRole="SLAVE", brokerId=1,
                                 slaveReadEnable="true", haMasterAddress="127.0.0.1:1") as slave:
        slave.topic_config_manager.put(TopicConfig("MovedT", 1, 1))
        async with RemotingClient() as client:
            pulled = await client.invoke(addr_of(slave), pull_request("CG_MOVED", "MovedT", 100), 5)
        assert pulled.code == ResponseCode.PULL_RETRY_IMMEDIATELY, pulled.remark
        assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
        assert slave.message_store.get_max_offset_in_queue(RMQ_SYS_OFFSET_MOVED_EVENT, 0) == 0


async def test_send_to_a_v1_pop_retry_topic_counts_against_its_group(broker: BrokerController) -> None:
    """%RETRY%<group>_<topic> (what resendMsgById writes for POP consumers) is the group's, even
    though the name alone would make "<group>_<topic>" the group."""
    broker.topic_config_manager.put(TopicConfig("Pop_T", 1, 1))
    broker.subscription_group_manager.put(SubscriptionGroupConfig("CG_POP"))
    async with RemotingClient() as client:
        sent = await client.invoke(addr_of(broker), send_request("%RETRY%CG_POP_Pop_T", b"again"), 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        unknown = await client.invoke(addr_of(broker), send_request("%RETRY%CG_NONE_Pop_T", b"x"), 5)
        assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, unknown.remark
    assert broker.subscription_group_manager.get("CG_POP_Pop_T") is None
    assert broker.message_store.get_max_offset_in_queue("%RETRY%CG_POP_Pop_T", 0) == 1


async def test_query_consumer_offset_starts_at_zero_only_while_the_first_message_is_in_memory(
        broker: BrokerController) -> None:
    """ConsumerManageProcessor#queryConsumerOffset: a group without an offset starts at 0 when the
    queue's first message is in memory (checkInMemByConsumeOffset); otherwise QUERY_NOT_FOUND and
    the client's consumeFromWhere decides; setZeroIfNotFound=false never answers 0."""
    topic = "QueryOffsetTopic"
    broker.topic_config_manager.put(TopicConfig(topic, 1, 1))
    broker.subscription_group_manager.put(SubscriptionGroupConfig("CG_QUERY"))

    def query(set_zero: bool = True) -> RemotingCommand:
        return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": "CG_QUERY", "topic": topic, "queueId": "0", "setZeroIfNotFound": str(set_zero).lower()})

    async with RemotingClient() as client:
        empty = await client.invoke(addr_of(broker), query(), 5)
        assert empty.code == ResponseCode.QUERY_NOT_FOUND  # no first message at all
        assert (await client.invoke(addr_of(broker), send_request(topic, b"first"), 5)).code == ResponseCode.SUCCESS
        await dispatched(broker, topic, 1)
        in_memory = await client.invoke(addr_of(broker), query(), 5)
        assert in_memory.code == ResponseCode.SUCCESS and in_memory.ext_fields["offset"] == "0"
        refused = await client.invoke(addr_of(broker), query(set_zero=False), 5)
        assert refused.code == ResponseCode.QUERY_NOT_FOUND and "do not set to zero" in (refused.remark or "")
        broker.message_store.total_physical_memory = 1  # the whole CommitLog now lies beyond what memory holds
        cold = await client.invoke(addr_of(broker), query(), 5)
        assert cold.code == ResponseCode.QUERY_NOT_FOUND
