"""A delay message (delivery_timestamp) from the official client is held until its time."""

from __future__ import annotations

import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from tests.interop.harness import Cluster, unique


def test_delay_message_is_not_delivered_early(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("DelayT"), queues=1, message_type="DELAY")
    group = cluster.create_group(unique("DelayG"))
    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic = topic
        msg.body = b"later"
        deliver_at = int(time.time()) + 2  # the Python client sends this field in seconds
        msg.delivery_timestamp = deliver_at
        sent_at = time.time()
        message_id = producer.send(msg).message_id
        assert consumer.receive(16, 10) == []  # not yet
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = consumer.receive(16, 10)
        arrived = time.time()
        assert [m.message_id for m in got] == [message_id]
        assert got[0].body == b"later"
        assert arrived >= deliver_at - 1.0  # delivered no earlier than its (whole-second) time allows
        print(f"delay message sent {sent_at:.3f}, due {deliver_at}, received {arrived:.3f}")
        consumer.ack(got[0])
    finally:
        producer.shutdown()
        consumer.shutdown()
