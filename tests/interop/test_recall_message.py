"""RecallMessage (5.3) through the proxy with the official Python client, and RECALL_MESSAGE (370)
over Remoting.

A timer message answers a recall handle in its SendReceipt; recalled before its time it is never
delivered, while a timer message sent beside it is. Recall is off unless the broker's
``recallMessageEnable`` is set (toggled here with UPDATE_BROKER_CONFIG on the shared cluster).
Bad input gets RocketMQ's codes and stores nothing: the ConsumeQueue of rmq_sys_wheel_timer (where
a delete marker would go) does not grow.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from orbitmq.client import MQBrokerError
from orbitmq.common.message import Message as RemotingMessage
from orbitmq.common.message import MessageConst
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.recall_handle import decode_recall_handle, encode_recall_handle
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code
TIMER_TOPIC = "rmq_sys_wheel_timer"


def _set_recall(cluster: Cluster, enabled: bool) -> None:
    value = "true" if enabled else "false"
    cluster.api_call(lambda api: api.update_broker_config(cluster.broker, {"recallMessageEnable": value}))


@pytest.fixture
def recall_enabled(cluster: Cluster) -> Iterator[None]:
    _set_recall(cluster, True)
    try:
        yield
    finally:
        _set_recall(cluster, False)


@pytest.fixture
def stub(cluster: Cluster):
    channel, s = cluster.stub()
    yield s
    channel.close()


def _timer_offset(cluster: Cluster) -> int:
    return cluster.api_call(lambda api: api.get_max_offset(cluster.broker, TIMER_TOPIC, 0))


def _clients(cluster: Cluster, topic: str, group: str) -> tuple[Producer, SimpleConsumer]:
    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    return producer, consumer


def _timer_message(topic: str, body: bytes, deliver_at_s: int) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    msg.delivery_timestamp = deliver_at_s  # the Python client sends this field in seconds
    return msg


def _recall_raw(stub, topic: str, handle: str) -> spb.RecallMessageResponse:
    request = spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle=handle)
    return stub.RecallMessage(request, metadata=rawgrpc.metadata(), timeout=10)


def _receive_all(consumer: SimpleConsumer, until: float) -> list:
    got = []
    while time.time() < until:
        for m in consumer.receive(16, 10):
            got.append(m)
            consumer.ack(m)
    return got


def test_recall_before_delivery_is_never_delivered(cluster: Cluster, recall_enabled: None, stub) -> None:
    topic = cluster.create_topic(unique("RecallT"), queues=1, message_type="DELAY")
    group = cluster.create_group(unique("RecallG"))
    producer, consumer = _clients(cluster, topic, group)
    try:
        deliver_at = int(time.time()) + 5
        recalled = producer.send(_timer_message(topic, b"recalled", deliver_at))
        kept = producer.send(_timer_message(topic, b"kept", deliver_at))
        assert recalled.recall_handle and kept.recall_handle
        handle = decode_recall_handle(recalled.recall_handle)
        assert (handle.topic, handle.broker_name, handle.message_id) == (topic, "broker-a", recalled.message_id)
        # TIMER_OUT_MS + 1: the Python client's whole-second time is a precision multiple, so the
        # slot is one precision earlier (it fires exactly at deliver_at).
        assert handle.timestamp_ms == deliver_at * 1000 - 1000 + 1
        assert producer.recall_message(topic, recalled.recall_handle) == recalled.message_id

        got = _receive_all(consumer, deliver_at + 6)
        assert [m.message_id for m in got] == [kept.message_id]
        assert time.time() >= deliver_at

        # After the slot fired, the handle is too late (ILLEGAL_OPERATION on the broker).
        before = _timer_offset(cluster)
        response = _recall_raw(stub, topic, recalled.recall_handle)
        assert response.status.code == Code.INTERNAL_SERVER_ERROR, response
        assert "timestamp invalid" in response.status.message
        assert _timer_offset(cluster) == before
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_bad_recall_handles_are_refused_and_store_nothing(cluster: Cluster, recall_enabled: None, stub) -> None:
    topic = cluster.create_topic(unique("RecallBad"), queues=1, message_type="DELAY")
    normal = cluster.create_topic(unique("RecallNormal"), queues=1, message_type="NORMAL")
    ahead_ms = int(time.time() * 1000) + 60_000
    good_shape = encode_recall_handle(topic, "broker-a", ahead_ms, "7F0000010001" + "0" * 20)
    before = _timer_offset(cluster)

    # A non-timer message has no handle: its send answers none, and an empty handle is refused.
    response = rawgrpc.send(stub, rawgrpc.message(normal, body=b"plain"))
    assert response.status.code == Code.OK and response.entries[0].recall_handle == ""
    cases = {
        "empty": (topic, ""),
        "garbled": (topic, "%%% not base64 %%%"),
        "standard alphabet": (topic, base64.b64encode(b"v1 a/b? c 1 d").decode()),
        "wrong version": (topic, base64.urlsafe_b64encode(f"v2 {topic} broker-a {ahead_ms} X".encode()).decode()),
        "too few tokens": (topic, base64.urlsafe_b64encode(f"v1 {topic} broker-a {ahead_ms}".encode()).decode()),
        "other topic": (topic, encode_recall_handle(normal, "broker-a", ahead_ms, "X")),
        "unknown broker": (topic, encode_recall_handle(topic, "broker-zz", ahead_ms, "X")),
        "time in the past": (topic, encode_recall_handle(topic, "broker-a", ahead_ms - 120_000, "X")),
        "time not a number": (topic, encode_recall_handle(topic, "broker-a", "soon", "X")),
        "time beyond timerMaxDelaySec": (topic, encode_recall_handle(topic, "broker-a", ahead_ms + 4 * 86_400_000,
                                                                     "X")),
    }
    for name, (t, handle) in cases.items():
        response = _recall_raw(stub, t, handle)
        assert response.status.code == Code.INTERNAL_SERVER_ERROR, (name, response)
        assert not response.message_id, name
    # Well-formed, for this broker and topic, ahead in time, but naming no timer message here.
    response = _recall_raw(stub, topic, good_shape)
    assert response.status.code == Code.INTERNAL_SERVER_ERROR, response
    assert "no timer message matches" in response.status.message
    # The topic must take DELAY messages; a topic that does not exist is not found.
    assert _recall_raw(stub, normal, good_shape).status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert _recall_raw(stub, unique("NoSuchTopic"), good_shape).status.code == Code.TOPIC_NOT_FOUND
    # The official client raises with the code.
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        with pytest.raises(Exception) as info:
            producer.recall_message(topic, "garbled!")
        assert getattr(info.value, "code", None) == Code.INTERNAL_SERVER_ERROR, info.value
    finally:
        producer.shutdown()
    assert _timer_offset(cluster) == before


def test_recall_over_remoting(cluster: Cluster, recall_enabled: None) -> None:
    topic = cluster.create_topic(unique("RecallRemoting"), queues=1, message_type="DELAY")
    ahead_ms = int(time.time() * 1000) + 60_000

    def recall(fields: dict[str, str]):
        return cluster.api_call(lambda api: api.invoke(cluster.broker, RequestCode.RECALL_MESSAGE, fields))

    # A timer message sent over Remoting: SEND_MESSAGE_V2's response carries its recallHandle.
    deliver_ms = int(time.time() * 1000) + 3000
    msg = RemotingMessage(topic, b"remoting timer", 0, {
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id(), MessageConst.TIMER_DELIVER_MS: str(deliver_ms)})
    sent = cluster.api_call(lambda api: api.send_message(cluster.broker, "broker-a", msg, "PG", 0))
    assert sent.recall_handle and decode_recall_handle(sent.recall_handle).message_id == msg.uniq_key
    before = _timer_offset(cluster)

    cases = [
        ({"topic": unique("Missing"), "recallHandle": sent.recall_handle}, ResponseCode.TOPIC_NOT_EXIST),
        ({"topic": topic, "recallHandle": "@@"}, ResponseCode.ILLEGAL_OPERATION),
        ({"topic": topic, "recallHandle": encode_recall_handle(topic, "broker-b", ahead_ms, msg.uniq_key)},
         ResponseCode.ILLEGAL_OPERATION),
        # Well-formed, this broker, ahead in time, but no such timer message (or not in that slot).
        ({"topic": topic, "recallHandle": encode_recall_handle(topic, "broker-a", ahead_ms, "ID1")},
         ResponseCode.ILLEGAL_OPERATION),
        ({"topic": topic, "recallHandle": encode_recall_handle(topic, "broker-a", ahead_ms, msg.uniq_key)},
         ResponseCode.ILLEGAL_OPERATION),
        ({"topic": topic}, ResponseCode.SYSTEM_ERROR),  # recallHandle is a required header field
    ]
    for fields, code in cases:
        response = recall(fields)
        assert response.code == code, (fields, response.code, response.remark)
        assert response.ext_fields.get("MSG_REGION") or code == ResponseCode.SYSTEM_ERROR
    assert _timer_offset(cluster) == before
    with pytest.raises(MQBrokerError) as info:
        cluster.api_call(lambda api: api.recall_message(cluster.broker, topic, "garbled"))
    assert info.value.code == ResponseCode.ILLEGAL_OPERATION

    # The real handle: the marker goes into the wheel, msgId is the message's id, and the message
    # never reaches its topic.
    assert cluster.api_call(lambda api: api.recall_message(cluster.broker, topic, sent.recall_handle, "PG")) \
        == msg.uniq_key
    assert _timer_offset(cluster) == before + 1
    time.sleep(max(deliver_ms / 1000 - time.time(), 0) + 2.0)
    assert cluster.api_call(lambda api: api.get_max_offset(cluster.broker, topic, 0)) == 0


def test_recall_is_off_unless_enabled(cluster: Cluster, stub) -> None:
    topic = cluster.create_topic(unique("RecallOff"), queues=1, message_type="DELAY")
    group = cluster.create_group(unique("RecallOffG"))
    producer, consumer = _clients(cluster, topic, group)
    try:
        deliver_at = int(time.time()) + 3
        receipt = producer.send(_timer_message(topic, b"stays", deliver_at))
        before = _timer_offset(cluster)
        with pytest.raises(Exception) as info:
            producer.recall_message(topic, receipt.recall_handle)
        assert getattr(info.value, "code", None) == Code.FORBIDDEN, info.value  # NO_PERMISSION
        response = cluster.api_call(lambda api: api.invoke(cluster.broker, RequestCode.RECALL_MESSAGE, {
            "topic": topic, "recallHandle": receipt.recall_handle}))
        assert response.code == ResponseCode.NO_PERMISSION, response.remark
        assert _timer_offset(cluster) == before
        got = _receive_all(consumer, deliver_at + 4)
        assert [m.message_id for m in got] == [receipt.message_id]
    finally:
        producer.shutdown()
        consumer.shutdown()
