"""Two namespaces, one topic and group name, through the official Python client: each tenant
sends, receives, acks, retries and dead-letters only its own messages, and keeps its own offsets
(the proxy wraps every name as ``{namespace}%{name}``; services/proxy/validation.py)."""

from __future__ import annotations

import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop.harness import Cluster, unique


def _config(cluster: Cluster, namespace: str, timeout: int = 10) -> ClientConfiguration:
    return ClientConfiguration(cluster.proxy, Credentials(), namespace=namespace, request_timeout=timeout)


def _send(producer: Producer, topic: str, body: bytes) -> str:
    msg = Message()
    msg.topic = topic
    msg.body = body
    return producer.send(msg).message_id


def _receive(consumer: SimpleConsumer, until: int, invisible_s: int, deadline_s: float = 30.0) -> list:
    got: list = []
    end = time.monotonic() + deadline_s
    while len(got) < until and time.monotonic() < end:
        got.extend(consumer.receive(32, invisible_s))
    return got


def test_two_namespaces_with_one_topic_name_are_isolated(cluster: Cluster) -> None:
    topic, group = unique("NsT"), unique("NsG")
    a, b = unique("nsA"), unique("nsB")
    for namespace in (a, b):
        cluster.create_topic(f"{namespace}%{topic}", queues=2)
    # a's group gives up after 2 deliveries (retryMaxTimes 1); b's keeps retrying
    cluster.create_group(f"{a}%{group}", retry_max_times=1)
    cluster.create_group(f"{b}%{group}", retry_max_times=16)

    sent: dict[str, dict[str, bytes]] = {}
    for namespace in (a, b):
        producer = Producer(_config(cluster, namespace), (topic,))
        producer.startup()
        try:
            sent[namespace] = {_send(producer, topic, f"{namespace}-{i}".encode()): f"{namespace}-{i}".encode()
                               for i in range(3)}
        finally:
            producer.shutdown()

    consumers = {ns: SimpleConsumer(_config(cluster, ns, 5), group, {topic: FilterExpression()}, await_duration=1)
                 for ns in (a, b)}
    for consumer in consumers.values():
        consumer.startup()
    try:
        first: dict[str, dict[str, object]] = {}
        for ns, consumer in consumers.items():
            got = _receive(consumer, 3, invisible_s=2)
            first[ns] = {m.message_id: m for m in got}
            # its own messages only, named as the tenant names them
            assert {i: m.body for i, m in first[ns].items()} == sent[ns]
            assert {(m.topic, m.namespace) for m in got} == {(topic, ns)}
        kept = {}
        for ns, consumer in consumers.items():
            ids = sorted(first[ns])
            for message_id in ids[1:]:
                consumer.ack(first[ns][message_id])  # acked: never seen again
            kept[ns] = ids[0]  # left invisible: redelivered from the group's own retry topic

        for ns, consumer in consumers.items():
            again = _receive(consumer, 1, invisible_s=2)
            assert [(m.message_id, m.delivery_attempt, m.topic) for m in again] == [(kept[ns], 2, topic)]
        # a: the third delivery would pass maxDeliveryAttempts, so the message goes to a's DLQ;
        # b: delivered a third time
        third = _receive(consumers[b], 1, invisible_s=30)
        assert [(m.message_id, m.delivery_attempt) for m in third] == [(kept[b], 3)]
        consumers[b].ack(third[0])
        assert _receive(consumers[a], 1, invisible_s=30, deadline_s=8) == []
        assert _receive(consumers[b], 1, invisible_s=30, deadline_s=3) == []
    finally:
        for consumer in consumers.values():
            consumer.shutdown()

    async def dead_letters(api) -> tuple[int, bool]:
        dlq = f"%DLQ%{a}%{group}"
        route = await api.get_topic_route(cluster.namesrv, dlq)
        count = sum([await api.get_max_offset(cluster.broker, dlq, q) for q in range(route.queue_datas[0].read_queue_nums)])
        try:
            await api.get_topic_route(cluster.namesrv, f"%DLQ%{b}%{group}")
            other = True
        except Exception:
            other = False
        return count, other

    deadline = time.monotonic() + 15
    while True:
        count, other = cluster.api_call(dead_letters)
        if count or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert (count, other) == (1, False)


def test_offsets_are_kept_per_namespace(cluster: Cluster) -> None:
    topic, group = unique("NsOffT"), unique("NsOffG")
    a, b = unique("nsA"), unique("nsB")
    for namespace in (a, b):
        cluster.create_topic(f"{namespace}%{topic}", queues=1)
        cluster.create_group(f"{namespace}%{group}")
    channel, stub = cluster.stub()
    metadata = (("x-mq-client-id", unique("ns-offsets")),)

    def queue(namespace: str) -> pb.MessageQueue:
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(resource_namespace=namespace, name=topic)),
                                metadata=metadata)
        assert route.status.code == pb.Code.OK, route.status
        (mq,) = [q for q in route.message_queues if q.id == 0]
        assert (mq.topic.resource_namespace, mq.topic.name) == (namespace, topic)
        return mq

    try:
        for namespace, offset in ((a, 0), (b, 0)):
            updated = stub.UpdateOffset(spb.UpdateOffsetRequest(
                group=pb.Resource(resource_namespace=namespace, name=group), message_queue=queue(namespace),
                offset=offset), metadata=metadata)
            assert updated.status.code == pb.Code.OK, updated.status
        moved = stub.UpdateOffset(spb.UpdateOffsetRequest(
            group=pb.Resource(resource_namespace=a, name=group), message_queue=queue(a), offset=5), metadata=metadata)
        assert moved.status.code == pb.Code.OK, moved.status
        offsets = {ns: stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(resource_namespace=ns, name=group),
                                                           message_queue=queue(ns)), metadata=metadata)
                   for ns in (a, b)}
        assert {ns: (r.status.code, r.offset) for ns, r in offsets.items()} == {a: (pb.Code.OK, 5), b: (pb.Code.OK, 0)}
    finally:
        channel.close()

    async def on_broker(api) -> tuple[int, int]:
        return (await api.query_consumer_offset(cluster.broker, f"{a}%{group}", f"{a}%{topic}", 0),
                await api.query_consumer_offset(cluster.broker, f"{b}%{group}", f"{b}%{topic}", 0))

    assert cluster.api_call(on_broker) == (5, 0)
