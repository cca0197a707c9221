"""MQClientInstance without servers: its broker-initiated request processors (ClientRemotingProcessor),
address lookups and heartbeat data, against fake producers and consumers."""

from __future__ import annotations

import asyncio
from typing import Any

from orbitmq.client.api import ConsumerData, MessageQueueRef
from orbitmq.common import fastjson
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import encode_record
from orbitmq.common.route import parse_json
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.instance import CLIENT_INNER_PRODUCER_GROUP, MQClientInstance


class Channel:
    remote_address = "127.0.0.1:10911"


class FakeProducer:
    group_name = "PG"

    def __init__(self) -> None:
        self.checks: list[tuple[str, MessageExt, Any]] = []

    def publish_topics(self) -> set[str]:
        return set()

    def is_publish_topic_need_update(self, topic: str) -> bool:
        return False

    def update_topic_publish_info(self, topic: str, info: object) -> None:
        return None

    async def check_transaction_state(self, addr: str, msg: MessageExt, header: Any) -> None:
        self.checks.append((addr, msg, header))


class FakeConsumer:
    group_name = "CG"

    def __init__(self) -> None:
        self.resets: list[tuple[str, dict[MessageQueueRef, int]]] = []

    def consumer_data(self) -> ConsumerData:
        return ConsumerData("CG", [])

    async def reset_offset(self, topic: str, offsets: dict[MessageQueueRef, int]) -> None:
        self.resets.append((topic, offsets))

    def consumer_running_info(self) -> dict[str, Any]:
        return {"properties": {"consumeType": "CONSUME_PASSIVELY"}}

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        return {"consumeResult": "CR_SUCCESS", "order": False, "remark": f"{broker_name}:{msg.body.decode()}"}

    def offset_table(self, topic: str) -> dict[MessageQueueRef, int]:
        return {MessageQueueRef(topic, "b", 0): 7}


def instance() -> MQClientInstance:
    return MQClientInstance(RemotingClientConfig(namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1",
                                                 instance_name="unit"))


def record(**props: str) -> bytes:
    return encode_record(topic="T", queue_id=1, body=b"half", properties=props)


async def test_check_transaction_state_goes_to_the_group_in_the_message() -> None:
    inst = instance()
    producer = FakeProducer()
    inst.register_producer("PG", producer)
    request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {
        "tranStateTableOffset": "3", "commitLogOffset": "99", "msgId": "U1", "transactionId": "TX1"},
        record(**{MessageConst.PRODUCER_GROUP: "PG", MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"}))
    assert await inst._on_check_transaction_state(request, Channel()) is None  # no response, as upstream
    other = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {
        "tranStateTableOffset": "3", "commitLogOffset": "99"}, record(**{MessageConst.PRODUCER_GROUP: "OTHER"}))
    assert await inst._on_check_transaction_state(other, Channel()) is None
    await asyncio.sleep(0)
    await asyncio.gather(*inst._pending)
    assert len(producer.checks) == 1
    addr, msg, header = producer.checks[0]
    assert addr == "127.0.0.1:10911" and msg.body == b"half" and msg.topic == "T"
    assert msg.properties[MessageConst.TRANSACTION_ID] == "U1"
    assert (header.commit_log_offset, header.tran_state_table_offset, header.transaction_id) == (99, 3, "TX1")


async def test_consumer_requests() -> None:
    inst = instance()
    consumer = FakeConsumer()
    assert inst.register_consumer("CG", consumer) and not inst.register_consumer("CG", consumer)

    unknown = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "NOPE"})
    response = await inst._on_get_consumer_running_info(unknown, Channel())
    assert response.code == ResponseCode.SYSTEM_ERROR and "NOPE" in response.remark

    info = await inst._on_get_consumer_running_info(
        RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG"}), Channel())
    assert info.code == ResponseCode.SUCCESS
    assert parse_json(info.body)["properties"]["consumeType"] == "CONSUME_PASSIVELY"

    direct = await inst._on_consume_message_directly(RemotingCommand.request(
        RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "CG", "brokerName": "b"}, record()), Channel())
    assert parse_json(direct.body) == {"consumeResult": "CR_SUCCESS", "order": False, "remark": "b:half"}

    status = await inst._on_get_consumer_status(RemotingCommand.request(
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "T", "group": "CG"}), Channel())
    table = fastjson.loads(status.body)["messageQueueTable"]
    assert table == {fastjson.message_queue_key("T", "b", 0): 7}

    body = fastjson.dumps({"offsetTable": {fastjson.message_queue_key("T", "b", 1): 42}}).encode()
    reset = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                    {"topic": "T", "group": "CG", "timestamp": "0", "isForce": "true"}, body)
    assert await inst._on_reset_offset(reset, Channel()) is None
    assert consumer.resets == [("T", {MessageQueueRef("T", "b", 1): 42})]

    assert not inst._rebalance_wakeup.is_set()
    await inst._on_notify_consumer_ids_changed(
        RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "CG"}), Channel())
    assert inst._rebalance_wakeup.is_set()


def test_addresses_and_heartbeat_data() -> None:
    inst = instance()
    inst.broker_addr_table = {"a": {0: "m:1", 1: "s:1"}, "b": {1: "s:2"}}
    assert inst.find_broker_address_in_publish("a") == "m:1"
    assert inst.find_broker_address_in_publish("b") is None
    assert inst.find_broker_address_in_subscribe("a", 1, True) == ("s:1", 1, True)
    assert inst.find_broker_address_in_subscribe("b", 0, True) is None
    assert inst.find_broker_address_in_subscribe("b", 0, False) == ("s:2", 1, True)
    assert inst.broker_name_of_addr("s:2") == "b"
    assert inst._heartbeat_data() == ([], [])
    inst.register_producer("PG", FakeProducer())
    producers, consumers = inst._heartbeat_data()
    assert [p.group_name for p in producers] == ["PG", CLIENT_INNER_PRODUCER_GROUP] and consumers == []
    assert inst.client_id == "10.0.0.1@unit"
