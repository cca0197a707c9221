"""The official Python SimpleConsumer through the proxy (POP on the broker)."""

from __future__ import annotations

import os
import threading
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import FilterType

from tests.interop.harness import Cluster, unique


def producer_for(cluster: Cluster, topic: str) -> Producer:
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    return producer


def consumer_for(cluster: Cluster, group: str, subs: dict[str, FilterExpression], proxy: str | None = None,
                 await_s: int = 1) -> SimpleConsumer:
    consumer = SimpleConsumer(ClientConfiguration(proxy or cluster.proxy, Credentials(), request_timeout=5), group,
                              subs, await_duration=await_s)
    consumer.startup()
    return consumer


def send(producer: Producer, topic: str, body: bytes, tag: str | None = None, key: str | None = None,
         props: dict[str, str] | None = None) -> str:
    msg = Message()
    msg.topic = topic
    msg.body = body
    if tag:
        msg.tag = tag
    if key:
        msg.keys = key
    for k, v in (props or {}).items():
        msg.add_property(k, v)
    return producer.send(msg).message_id


def receive_until(consumer: SimpleConsumer, count: int, invisible_s: int = 15, deadline_s: float = 20.0,
                  ack: bool = True) -> list:
    got = []
    end = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < end:
        for m in consumer.receive(32, invisible_s):
            got.append(m)
            if ack:
                consumer.ack(m)
    return got


def test_receive_and_ack_round_trip(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("ScT"), queues=2)
    group = cluster.create_group(unique("ScG"))
    producer = producer_for(cluster, topic)
    sent = {}
    try:
        for i, size in enumerate([1, 10, 1000, 100_000, 1024 * 1024]):
            body = os.urandom(size)
            mid = send(producer, topic, body, tag=f"T{i}", key=f"K{i}", props={"n": str(i)})
            sent[mid] = (body, f"T{i}", f"K{i}", {"n": str(i)})
    finally:
        producer.shutdown()
    consumer = consumer_for(cluster, group, {topic: FilterExpression()})
    try:
        got = receive_until(consumer, len(sent))
        assert sorted(m.message_id for m in got) == sorted(sent)
        for m in got:
            body, tag, key, props = sent[m.message_id]
            assert (m.body, m.tag, m.keys, m.properties) == (body, tag, {key}, props)
            assert m.delivery_attempt == 1
        assert consumer.receive(32, 15) == []  # acked: nothing comes back
    finally:
        consumer.shutdown()


def test_redelivery_after_invisible_time_and_change_invisible_duration(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("ScRedo"), queues=1)
    group = cluster.create_group(unique("ScRedoG"))
    producer = producer_for(cluster, topic)
    try:
        first = send(producer, topic, b"not acked")
        second = send(producer, topic, b"postponed")
    finally:
        producer.shutdown()
    consumer = consumer_for(cluster, group, {topic: FilterExpression()})
    try:
        got = {m.message_id: m for m in receive_until(consumer, 2, invisible_s=2, ack=False)}
        assert set(got) == {first, second}
        assert all(m.delivery_attempt == 1 for m in got.values())
        # Postpone the second one a little, then ack it with the new receipt handle.
        consumer.change_invisible_duration(got[second], 3)
        again = receive_until(consumer, 2, invisible_s=30, deadline_s=30, ack=False)
        by_id = {m.message_id: m for m in again}
        assert set(by_id) == {first, second}
        assert by_id[first].delivery_attempt == 2
        assert by_id[second].delivery_attempt == 2
        for m in again:
            consumer.ack(m)
        assert consumer.receive(32, 10) == []
    finally:
        consumer.shutdown()


def test_two_consumers_share_without_loss_or_duplicates(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("ScShare"), queues=4)
    group = cluster.create_group(unique("ScShareG"))
    producer = producer_for(cluster, topic)
    try:
        ids = {send(producer, topic, f"m{i}".encode()) for i in range(60)}
    finally:
        producer.shutdown()
    results: list[list[str]] = [[], []]
    total = threading.Event()
    lock = threading.Lock()

    ready = threading.Barrier(2)

    def run(index: int) -> None:
        consumer = consumer_for(cluster, group, {topic: FilterExpression()})
        try:
            ready.wait(timeout=20)  # both started before either receives
            end = time.monotonic() + 25
            while not total.is_set() and time.monotonic() < end:
                for m in consumer.receive(4, 15):
                    consumer.ack(m)
                    with lock:
                        results[index].append(m.message_id)
                        if sum(map(len, results)) >= len(ids):
                            total.set()
        finally:
            consumer.shutdown()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = results[0] + results[1]
    assert len(everything) == len(set(everything)), "a message was delivered twice"
    assert set(everything) == ids
    assert results[0] and results[1], "both consumers of the group should get a share"


def test_tag_and_sql92_filters(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("ScFilter"), queues=2)
    producer = producer_for(cluster, topic)
    try:
        by_tag = {tag: {send(producer, topic, f"{tag}{i}".encode(), tag=tag, props={"a": str(i)}) for i in range(3)}
                  for tag in ("A", "B", "C")}
    finally:
        producer.shutdown()
    everything = set().union(*by_tag.values())

    def consume(expression: FilterExpression, expected: int) -> set[str]:
        consumer = consumer_for(cluster, cluster.create_group(unique("ScF")), {topic: expression})
        try:
            ids = {m.message_id for m in receive_until(consumer, expected)}
            ids |= {m.message_id for m in receive_until(consumer, 1, deadline_s=1.5)}  # nothing more
            return ids
        finally:
            consumer.shutdown()

    assert consume(FilterExpression("A||B"), 6) == by_tag["A"] | by_tag["B"]
    assert consume(FilterExpression("*"), 9) == everything
    # Property a is 0, 1, 2 within each tag: "a >= 2" picks one message per tag.
    sql = consume(FilterExpression("a >= 2", FilterType.SQL), 3)
    assert len(sql) == 3
    assert all(len(sql & ids) == 1 for ids in by_tag.values())
