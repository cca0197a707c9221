"""RIP-80 priority messages end to end: the official Python client (5.1.2) sends with
Message.priority to a message.type=PRIORITY topic through the proxy, and a SimpleConsumer sees
the backlog in the order upstream's broker gives (PopMessageProcessor: the highest queue first,
a queue's messages in order); plus raw gRPC for what the client checks locally, and
Settings.client_properties as producerConnection/consumerConnection show them.
"""

from __future__ import annotations

import json
import os
import queue as q
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.v5.exception import IllegalArgumentException

from orbitmq.client import MQBrokerError
from orbitmq.common.message import Message as RemotingMessage
from orbitmq.common.message import MessageConst as C
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.remoting.codes import ResponseCode
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code
QUEUES = 4


@pytest.fixture(scope="module")
def priority_topic(cluster: Cluster) -> str:
    return cluster.create_topic(unique("PrioT"), queues=QUEUES, message_type="PRIORITY")


@pytest.fixture
def stub(cluster: Cluster):
    channel, stub = cluster.stub()
    with channel:
        yield stub


def _producer(cluster: Cluster, topic: str) -> Producer:
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    return producer


def _priority_message(topic: str, body: bytes, priority: int | None) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    if priority is not None:
        msg.priority = priority
    return msg


def test_python_client_priority_backlog_comes_highest_first(cluster: Cluster) -> None:
    # A topic of its own: the other tests' messages must not join the backlog.
    priority_topic = cluster.create_topic(unique("PrioBacklogT"), queues=QUEUES, message_type="PRIORITY")
    group = cluster.create_group(unique("PrioG"))
    # Subscribe first (at the end of the queues), then build the backlog while nobody receives.
    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {priority_topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    try:
        assert consumer.receive(32, 15) == []
        producer = _producer(cluster, priority_topic)
        try:
            # Interleaved priorities; 9 is above the last queue and goes to it (min(p, queues - 1)).
            plan = [(f"p{p}-{n}".encode(), p) for n in range(2) for p in (0, 2, 1, 3, 9)]
            for body, priority in plan:
                producer.send(_priority_message(priority_topic, body, priority))
        finally:
            producer.shutdown()
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(plan) and time.monotonic() < deadline:
            for m in consumer.receive(32, 15):
                got.append(m)
                consumer.ack(m)
    finally:
        consumer.shutdown()
    # One broker: the queues highest first, each in send order; priority 9 shares queue 3 with 3.
    assert [m.body for m in got] == [b"p3-0", b"p9-0", b"p3-1", b"p9-1", b"p2-0", b"p2-1",
                                     b"p1-0", b"p1-1", b"p0-0", b"p0-1"]
    assert [m.priority for m in got] == [3, 9, 3, 9, 2, 2, 1, 1, 0, 0]
    assert {m.message_type for m in got} == {pb.MessageType.PRIORITY}


def test_route_names_the_priority_type(stub, priority_topic: str) -> None:
    route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=priority_topic)),
                            metadata=rawgrpc.metadata(), timeout=10)
    assert route.status.code == Code.OK
    assert {tuple(mq.accept_message_types) for mq in route.message_queues} == {(pb.MessageType.PRIORITY,)}


def test_python_client_refuses_priority_on_a_normal_topic(cluster: Cluster) -> None:
    # The route of a NORMAL topic accepts NORMAL only: the client refuses before sending.
    topic = cluster.create_topic(unique("PrioNormalT"), queues=1)
    producer = _producer(cluster, topic)
    try:
        with pytest.raises(IllegalArgumentException):
            producer.send(_priority_message(topic, b"x", 1))
    finally:
        producer.shutdown()


def _prioritised(topic: str, priority: int, **kw) -> pb.Message:
    msg = rawgrpc.message(topic, message_type=pb.MessageType.PRIORITY, **kw)
    msg.system_properties.priority = priority
    return msg


def test_raw_grpc_bad_priorities(cluster: Cluster, stub, priority_topic: str) -> None:
    negative = rawgrpc.send(stub, _prioritised(priority_topic, -1))
    assert negative.status.code == Code.BAD_REQUEST, negative.status
    assert "priority" in negative.status.message
    normal = cluster.create_topic(unique("PrioRawNormalT"), queues=1)
    wrong_topic = rawgrpc.send(stub, _prioritised(normal, 2))
    assert wrong_topic.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, wrong_topic.status
    # A message group makes it FIFO (parseFromMessageProperty ranks the group first): refused too.
    grouped = rawgrpc.send(stub, _prioritised(priority_topic, 2, group="g1"))
    assert grouped.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, grouped.status
    # The proxy kept serving.
    fine = rawgrpc.send(stub, _prioritised(priority_topic, 1))
    assert fine.status.code == Code.OK, fine.status


def _telemetry(stub, settings: pb.Settings, client_id: str):
    outbox: q.Queue = q.Queue()
    outbox.put(spb.TelemetryCommand(settings=settings))

    def requests():
        while True:
            item = outbox.get()
            if item is None:
                return
            yield item

    stream = stub.Telemetry(requests(), metadata=rawgrpc.metadata(client_id), timeout=30)
    return next(stream), stream, outbox


def _admin_json(cluster: Cluster, *args: str) -> dict:
    argv = [sys.executable, "-m", "orbitmq", "admin", *args, "-n", cluster.namesrv, "--json"]
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_client_properties_kept_and_shown(cluster: Cluster, stub, priority_topic: str) -> None:
    group = cluster.create_group(unique("PropsG"))
    sub = pb.Subscription(group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
        topic=pb.Resource(name=priority_topic), expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                                 expression="*"))])
    bad = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=sub,
                      client_properties={"9starts-with-digit": "x"})
    # Like any refused Settings (ClientActivity#processTelemetryException): the stream ends with
    # INVALID_ARGUMENT, its text naming the code (40021 is a client error).
    with pytest.raises(grpc.RpcError) as refused:
        _telemetry(stub, bad, unique("props-bad"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "INVALID_CLIENT_PROPERTIES" in refused.value.details() and "9starts-with-digit" in refused.value.details()

    consumer_id, producer_id = unique("props-consumer"), unique("props-producer")
    good = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=sub,
                       client_properties={"app": "billing", "zone": "z-1"})
    reply, stream, outbox = _telemetry(stub, good, consumer_id)
    assert reply.status.code == Code.OK, reply.status
    preply, pstream, poutbox = _telemetry(stub, pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=priority_topic)]),
        client_properties={"team": "payments"}), producer_id)
    assert preply.status.code == Code.OK, preply.status
    try:
        deadline = time.monotonic() + 15
        while True:  # the proxy relays the client to the broker on its next heartbeat
            try:
                cc = _admin_json(cluster, "consumerConnection", "-g", group)
            except AssertionError:
                cc = {"connectionSet": []}
            conns = {c["clientId"]: c for c in cc["connectionSet"]}
            if consumer_id in conns or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert conns[consumer_id]["clientProperties"] == {"app": "billing", "zone": "z-1"}
        pc = _admin_json(cluster, "producerConnection", "-g", priority_topic, "-t", priority_topic)
        assert {c["clientId"]: c.get("clientProperties") for c in pc["connectionSet"]}[producer_id] == \
            {"team": "payments"}
    finally:
        for box, s in ((outbox, stream), (poutbox, pstream)):
            box.put(None)
            list(s)


def _admin(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", cluster.namesrv],
                          capture_output=True, text=True, timeout=60, env=env)


def test_priority_factor_group_attribute(cluster: Cluster) -> None:
    group = cluster.create_group(unique("FactorG"))
    done = _admin(cluster, "updateSubGroup", "-b", cluster.broker, "-g", group, "--attributes", "+priority.factor=40")
    assert done.returncode == 0, done.stderr
    stored = cluster.api_call(lambda api: api.get_subscription_group_config(cluster.broker, group))
    assert stored.attributes == {"priority.factor": "40"} and stored.priority_factor == 40
    refused = _admin(cluster, "updateSubGroup", "-b", cluster.broker, "-g", group, "--attributes", "+priority.factor=101")
    assert refused.returncode == 1 and "priority.factor" in refused.stderr
    # The broker checks too (a client that skips the CLI): INVALID_PARAMETER, the group unchanged.
    raw = SubscriptionGroupConfig(group, attributes={"+priority.factor": "-5"})
    with pytest.raises(MQBrokerError) as bad:
        cluster.api_call(lambda api: api.create_subscription_group(cluster.broker, raw))
    assert bad.value.code == ResponseCode.INVALID_PARAMETER and "priority.factor" in str(bad.value)
    removed = SubscriptionGroupConfig(group, attributes={"-priority.factor": ""})
    cluster.api_call(lambda api: api.create_subscription_group(cluster.broker, removed))
    stored = cluster.api_call(lambda api: api.get_subscription_group_config(cluster.broker, group))
    assert stored.attributes == {} and stored.priority_factor == 100


def test_remoting_send_priority_routing(cluster: Cluster, priority_topic: str) -> None:
    """SendMessageProcessor's rule for any producer (here the Remoting API): the properties decide;
    a PRIORITY message goes to the queue of its priority whatever queue the producer picked, capped
    at the last; a FIFO message with a priority keeps its queue and loses the property."""
    def send(props: dict[str, str], queue_id: int):
        msg = RemotingMessage(priority_topic, b"r", properties={C.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id(),
                                                               **props})
        return cluster.api_call(lambda api: api.send_message(cluster.broker, "broker-a", msg, "PG", queue_id))

    assert send({C.PRIORITY: "2"}, 0).queue_id == 2
    assert send({C.PRIORITY: "7"}, 1).queue_id == QUEUES - 1
    assert send({C.PRIORITY: "0"}, 3).queue_id == 0
    fifo = send({C.PRIORITY: "2", C.SHARDING_KEY: "g"}, 1)
    assert fifo.queue_id == 1
    stored = cluster.api_call(lambda api: api.view_message_by_id(fifo.offset_msg_id))
    assert C.PRIORITY not in stored.properties and stored.properties[C.SHARDING_KEY] == "g"
    plain = send({}, 1)
    assert plain.queue_id == 1
