"""The official Python PushConsumer: success, retries with delivery attempt + 1, the DLQ, and FIFO
order per message group under concurrent consumers and a failing first delivery."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
)

from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique


class Recorder(MessageListener):
    """Records (message id, body, delivery attempt); fails as ``decide`` says."""

    def __init__(self, decide=lambda message: True) -> None:
        self.decide = decide
        self.lock = threading.Lock()
        self.seen: list[tuple[str, bytes, int]] = []

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.seen.append((message.message_id, message.body, message.delivery_attempt))
        return ConsumeResult.SUCCESS if self.decide(message) else ConsumeResult.FAILURE

    def wait_for(self, predicate, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if predicate(list(self.seen)):
                    return True
            time.sleep(0.1)
        return False


def _push(cluster: Cluster, group: str, topic: str, listener: MessageListener) -> PushConsumer:
    consumer = PushConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group, listener,
                            {topic: FilterExpression()}, consumption_thread_count=4)
    consumer.startup()
    return consumer


def _send(cluster: Cluster, topic: str, bodies: list[bytes], groups: list[str] | None = None) -> list[str]:
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        ids = []
        for index, body in enumerate(bodies):
            msg = Message()
            msg.topic = topic
            msg.body = body
            if groups:
                msg.message_group = groups[index]
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


def test_push_consumer_succeeds(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("PushOk"), queues=2)
    group = cluster.create_group(unique("PushOkG"))
    recorder = Recorder()
    consumer = _push(cluster, group, topic, recorder)
    try:
        ids = _send(cluster, topic, [f"m{i}".encode() for i in range(10)])
        assert recorder.wait_for(lambda seen: {s[0] for s in seen} >= set(ids), 20)
    finally:
        consumer.shutdown()
    assert all(attempt == 1 for _id, _body, attempt in recorder.seen)


def test_push_consumer_retries_then_dead_letter_queue(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("PushRetry"), queues=1)
    group = cluster.create_group(unique("PushRetryG"), retry_max_times=2, retry_next_ms=[1000, 1000, 1000])
    # max attempts = retryMaxTimes + 1 = 3: "recovers" succeeds at its 3rd delivery, "poison" never does.
    recorder = Recorder(lambda m: m.body == b"recovers" and m.delivery_attempt >= 3)
    consumer = _push(cluster, group, topic, recorder)
    try:
        recovers, poison = _send(cluster, topic, [b"recovers", b"poison"])
        assert recorder.wait_for(
            lambda seen: {a for i, _b, a in seen if i == recovers} >= {1, 2, 3}
            and {a for i, _b, a in seen if i == poison} >= {1, 2, 3}, 40), recorder.seen
        # The poison message lands in the group's DLQ instead of a 4th delivery.
        channel, stub = cluster.stub()
        with channel:
            dlq = rawgrpc.pull_all(stub, f"%DLQ%{group}", group, queues=1, expected=1, deadline_s=20)
        assert [m.system_properties.message_id for m in dlq] == [poison]
        assert dlq[0].body == b"poison"
    finally:
        consumer.shutdown()
    attempts = defaultdict(list)
    for mid, _body, attempt in recorder.seen:
        attempts[mid].append(attempt)
    assert sorted(attempts[poison]) == [1, 2, 3]
    assert sorted(attempts[recovers]) == [1, 2, 3]


def test_fifo_order_per_message_group(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("PushFifo"), queues=2, message_type="FIFO")
    group = cluster.create_group(unique("PushFifoG"), orderly=True, retry_next_ms=[500, 500, 500])
    lock = threading.Lock()
    first_failed: set[str] = set()
    successes: dict[str, list[int]] = defaultdict(list)  # message group -> indexes, in consumption order

    def decide(message) -> bool:
        g, index = message.body.decode().split(":")
        with lock:
            if index == "0" and g not in first_failed:
                first_failed.add(g)  # each group's first delivery fails once
                return False
            successes[g].append(int(index))
            return True

    recorders = [Recorder(decide), Recorder(decide)]
    consumers = [_push(cluster, group, topic, r) for r in recorders]
    groups = ["g-a", "g-b", "g-c", "g-d"]
    per_group = 8
    bodies = [f"{g}:{i}".encode() for i in range(per_group) for g in groups]
    try:
        _send(cluster, topic, bodies, [b.decode().split(":")[0] for b in bodies])

        def done(_seen) -> bool:
            with lock:
                return all(len(successes[g]) >= per_group for g in groups)

        assert recorders[0].wait_for(done, 40), dict(successes)
    finally:
        for c in consumers:
            c.shutdown()
    for g in groups:
        assert successes[g] == list(range(per_group)), (g, successes[g])
    assert first_failed == set(groups)
