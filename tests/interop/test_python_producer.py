"""The official Python client's Producer through the proxy: messages round-trip exactly.

Messages are read back through the proxy's offset-addressed PullMessage, so every byte of body,
tag, keys and user properties is compared with what the producer sent.
"""

from __future__ import annotations

import os

import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.v5.exception import IllegalArgumentException

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

SIZES = [1, 100, 1024, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024]


def _producer(cluster: Cluster, topic: str) -> Producer:
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    return producer


def test_send_and_send_async_round_trip_exactly(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("PyProd"), queues=2)
    group = cluster.create_group(unique("GPyProd"))
    producer = _producer(cluster, topic)
    sent: dict[str, tuple[bytes, str, list[str], dict[str, str]]] = {}
    try:
        futures = []
        for index, size in enumerate(SIZES):
            body = os.urandom(size)
            msg = Message()
            msg.topic = topic
            msg.body = body
            msg.tag = f"Tag{index % 2}"
            msg.keys = f"key-{index}"  # the client's setter adds one key per assignment
            msg.keys = f"other-{index}"
            msg.add_property("index", str(index))
            msg.add_property("unicode", "ünïcødé ✓")
            if index % 2:
                futures.append((msg, body, [f"key-{index}", f"other-{index}"]))
                continue
            receipt = producer.send(msg)
            sent[receipt.message_id] = (body, msg.tag, [f"key-{index}", f"other-{index}"],
                                        {"index": str(index), "unicode": "ünïcødé ✓"})
        for msg, body, keys in futures:
            receipt = producer.send_async(msg).result(timeout=30)
            sent[receipt.message_id] = (body, msg.tag, keys, {"index": msg.properties["index"],
                                                              "unicode": "ünïcødé ✓"})
    finally:
        producer.shutdown()

    assert len(sent) == len(SIZES)
    channel, stub = cluster.stub()
    with channel:
        got = rawgrpc.pull_all(stub, topic, group, queues=2, expected=len(SIZES))
    assert len(got) == len(SIZES)
    for m in got:
        body, tag, keys, props = sent[m.system_properties.message_id]
        assert m.body == body
        assert m.system_properties.tag == tag
        assert sorted(m.system_properties.keys) == sorted(keys)
        assert dict(m.user_properties) == props
        assert m.system_properties.message_type == pb.MessageType.NORMAL
        assert m.system_properties.delivery_attempt == 1


def test_official_client_refuses_empty_body_and_server_too(cluster: Cluster) -> None:
    """The client checks locally; a raw caller gets MESSAGE_BODY_EMPTY from the proxy."""
    msg = Message()
    with pytest.raises(IllegalArgumentException):
        msg.body = b""
    topic = cluster.create_topic(unique("PyEmpty"), queues=1)
    channel, stub = cluster.stub()
    with channel:
        response = rawgrpc.send(stub, rawgrpc.message(topic, body=b""))
    assert response.status.code == pb.Code.MESSAGE_BODY_EMPTY


def test_batch_of_messages_gets_one_entry_each(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("PyBatch"), queues=1)
    group = cluster.create_group(unique("GPyBatch"))
    channel, stub = cluster.stub()
    with channel:
        msgs = [rawgrpc.message(topic, body=f"b{i}".encode(), tag="T") for i in range(5)]
        response = rawgrpc.send(stub, *msgs)
        assert response.status.code == pb.Code.OK, response.status
        assert [e.message_id for e in response.entries] == [m.system_properties.message_id for m in msgs]
        assert [e.offset for e in response.entries] == list(range(5))
        got = rawgrpc.pull_all(stub, topic, group, queues=1, expected=5)
    assert [m.body for m in got] == [f"b{i}".encode() for i in range(5)]
