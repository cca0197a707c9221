"""QueryRoute, QueryAssignment, Telemetry settings, Heartbeat and NotifyClientTermination."""

from __future__ import annotations

import time

from orbitmq.client import MQBrokerError
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code


def test_query_route_names_the_proxy_and_the_topic_type(cluster: Cluster) -> None:
    normal = cluster.create_topic(unique("RtNormal"), queues=3)
    fifo = cluster.create_topic(unique("RtFifo"), queues=2, message_type="FIFO")
    mixed = cluster.create_topic(unique("RtMixed"), queues=1, message_type="MIXED")
    host, port = cluster.proxy.split(":")
    channel, stub = cluster.stub()
    with channel:
        def route(topic: str) -> spb.QueryRouteResponse:
            endpoints = pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))])
            return stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=endpoints),
                                   metadata=rawgrpc.metadata())

        r = route(normal)
        assert r.status.code == Code.OK
        assert [q.id for q in r.message_queues] == [0, 1, 2]
        for q in r.message_queues:
            assert q.permission == pb.Permission.READ_WRITE
            assert q.broker.name == "broker-a"
            assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [(host, int(port))]
            assert list(q.accept_message_types) == [pb.MessageType.NORMAL]
        assert all(list(q.accept_message_types) == [pb.MessageType.FIFO] for q in route(fifo).message_queues)
        assert set(route(mixed).message_queues[0].accept_message_types) == {
            pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION}


def test_query_assignment_by_group_kind(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("AsT"), queues=3)
    normal = cluster.create_group(unique("AsG"))
    orderly = cluster.create_group(unique("AsOrderly"), orderly=True)
    channel, stub = cluster.stub()
    with channel:
        def assign(group: str) -> spb.QueryAssignmentResponse:
            return stub.QueryAssignment(spb.QueryAssignmentRequest(
                topic=pb.Resource(name=topic), group=pb.Resource(name=group)), metadata=rawgrpc.metadata())

        plain = assign(normal)
        assert plain.status.code == Code.OK
        assert [a.message_queue.id for a in plain.assignments] == [-1]
        assert [a.message_queue.id for a in assign(orderly).assignments] == [0, 1, 2]


def _telemetry(stub, settings: pb.Settings, client_id: str):
    """Open a Telemetry stream, send ``settings`` and return (first reply, stream)."""
    import queue as q

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


def test_settings_heartbeat_and_termination(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("TelT"), queues=1)
    group = cluster.create_group(unique("TelG"), orderly=True, retry_max_times=3)
    channel, stub = cluster.stub()
    with channel:
        producer_id = unique("producer")
        reply, stream, outbox = _telemetry(stub, pb.Settings(
            client_type=pb.ClientType.PRODUCER,
            publishing=pb.Publishing(topics=[pb.Resource(name=topic)])), producer_id)
        assert reply.status.code == Code.OK
        assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
        assert reply.settings.publishing.validate_message_type
        assert reply.settings.backoff_policy.max_attempts == 3
        assert reply.settings.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
        outbox.put(None)
        assert list(stream) == []  # the proxy closes its side when the client half-closes

        consumer_id = unique("consumer")
        sub = pb.Subscription(group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=topic), expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"))])
        reply, stream, outbox = _telemetry(stub, pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER,
                                                             subscription=sub), consumer_id)
        s = reply.settings
        assert reply.status.code == Code.OK
        assert s.subscription.fifo is True
        assert s.subscription.receive_batch_size == 32
        assert s.subscription.long_polling_timeout.seconds == 3  # grpcClientConsumerMaxLongPollingTimeoutMillis
        assert s.backoff_policy.max_attempts == 4
        assert [d.seconds for d in s.backoff_policy.customized_backoff.next][:4] == [1, 5, 10, 30]

        hb = stub.Heartbeat(spb.HeartbeatRequest(group=pb.Resource(name=group),
                                                 client_type=pb.ClientType.PUSH_CONSUMER),
                            metadata=rawgrpc.metadata(consumer_id))
        assert hb.status.code == Code.OK

        async def consumer_list(api) -> list[str]:
            try:
                return await api.get_consumer_list(cluster.broker, group)
            except MQBrokerError:  # SYSTEM_ERROR "no consumer for this group"
                return []

        def consumers() -> list[str]:
            return cluster.api_call(consumer_list)

        deadline = time.monotonic() + 10
        while consumer_id not in consumers():
            assert time.monotonic() < deadline, "the broker never learnt about the gRPC consumer"
            time.sleep(0.1)

        done = stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(group=pb.Resource(name=group)),
                                            metadata=rawgrpc.metadata(consumer_id))
        assert done.status.code == Code.OK
        assert list(stream) == []  # the telemetry stream ends cleanly
        outbox.put(None)
        assert consumer_id not in consumers()
