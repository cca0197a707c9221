"""`orbitmq admin resendMsgById` of a dead letter reaches the group's POP consumers (issue 22).

The official Python client's SimpleConsumer pops through the proxy, so its group reads the pop
retry topic %RETRY%<group>_<topic>, not %RETRY%<group>: a re-sent dead letter must go there to be
received again, with its own topic and body, and without creating a group "<group>_<topic>".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from tests.interop.harness import Cluster, unique


def admin(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", cluster.namesrv],
                          capture_output=True, text=True, timeout=60)


def send_one(cluster: Cluster, topic: str, body: bytes) -> str:
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body, msg.keys = topic, body, "resend-key"
        return producer.send(msg).message_id
    finally:
        producer.shutdown()


def dead_letter(cluster: Cluster, consumer: SimpleConsumer, group: str, msg_id: str) -> None:
    """Receive without acking until the proxy moves the message to %DLQ%<group> (retryMaxTimes=1)."""
    deliveries = 0
    end = time.monotonic() + 40
    while deliveries < 2 and time.monotonic() < end:
        deliveries += len(consumer.receive(1, 1))  # back after 1 s, then once more from the retry topic
    assert deliveries == 2
    end = time.monotonic() + 30
    while time.monotonic() < end:  # the third attempt exceeds retryMaxTimes: dead-lettered, not delivered
        assert consumer.receive(1, 1) == []
        found = admin(cluster, "queryMsgByUniqueKey", "-i", msg_id, "-t", f"%DLQ%{group}", "--json")
        if found.returncode == 0:
            return
    raise AssertionError(f"{msg_id} never reached %DLQ%{group}")


def test_resent_dead_letter_reaches_the_official_simple_consumer(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("ResendT"), queues=1)
    group = cluster.create_group(unique("ResendG"), retry_max_times=1)
    msg_id = send_one(cluster, topic, b"dead letter, then fixed")
    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    try:
        dead_letter(cluster, consumer, group, msg_id)

        done = admin(cluster, "resendMsgById", "-i", msg_id, "-t", f"%DLQ%{group}", "--json")
        assert done.returncode == 0, done.stderr
        sent = json.loads(done.stdout)
        assert sent["sendStatus"] == "SEND_OK", sent

        got = []
        end = time.monotonic() + 30
        while not got and time.monotonic() < end:
            got = consumer.receive(1, 10)
        assert [(m.topic, m.body, m.keys) for m in got] == [(topic, b"dead letter, then fixed", {"resend-key"})], sent
        consumer.ack(got[0])
        assert sent["topic"] == f"%RETRY%{group}_{topic}"
    finally:
        consumer.shutdown()

    # The V1 pop retry topic's group is the group, not "<group>_<topic>" (SendMessageProcessor).
    groups = cluster.api_call(lambda api: api.get_all_subscription_group_config(cluster.broker))
    assert f"{group}_{topic}" not in groups and group in groups
