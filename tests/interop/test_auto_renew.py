"""ReceiveMessage with auto_renew (what push consumers send): the proxy keeps the message invisible
while the client holds it, acks it with the latest handle, and frees it when the client leaves.

The test cluster's proxies use defaultInvisibleTimeMills=3000 and renew 1.5 s ahead.
"""

from __future__ import annotations

import time

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code


def _receive_one(stub, topic: str, group: str, md, auto_renew: bool = True) -> pb.Message:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _status, msgs, _ = rawgrpc.receive(stub, topic, group, polling_ms=1000, md=md, auto_renew=auto_renew)
        if msgs:
            assert len(msgs) == 1
            return msgs[0]
    raise AssertionError("nothing received")


def test_auto_renew_holds_then_acks_with_latest_handle(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("RenewT"), queues=1)
    group = cluster.create_group(unique("RenewG"))
    channel, stub = cluster.stub()
    with channel:
        holder = rawgrpc.metadata()
        assert rawgrpc.send(stub, rawgrpc.message(topic, body=b"held")).status.code == Code.OK
        msg = _receive_one(stub, topic, group, holder)
        # Twice the invisible time later, another consumer of the group still gets nothing.
        time.sleep(4.0)
        status, msgs, _ = rawgrpc.receive(stub, topic, group, polling_ms=2000)
        assert msgs == [] and status.code == Code.MESSAGE_NOT_FOUND
        # The client acks with the handle it was given; the proxy uses the renewed one.
        acked = rawgrpc.ack(stub, topic, group, msg, md=holder)
        assert acked.status.code == Code.OK, acked
        time.sleep(3.5)
        status, msgs, _ = rawgrpc.receive(stub, topic, group, polling_ms=1000)
        assert msgs == []


def test_terminated_client_releases_its_messages(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("RenewGone"), queues=1)
    group = cluster.create_group(unique("RenewGoneG"))
    channel, stub = cluster.stub()
    with channel:
        client_id = unique("leaving")
        holder = rawgrpc.metadata(client_id)
        # The client must be known to the proxy (its Settings) for termination to mean anything.
        settings = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name=topic), expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                              expression="*"))]))
        stream = stub.Telemetry(iter([spb.TelemetryCommand(settings=settings)]), metadata=holder, timeout=10)
        assert next(stream).status.code == Code.OK
        assert rawgrpc.send(stub, rawgrpc.message(topic, body=b"orphan")).status.code == Code.OK
        first = _receive_one(stub, topic, group, holder)
        done = stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(group=pb.Resource(name=group)),
                                            metadata=holder)
        assert done.status.code == Code.OK
        again = _receive_one(stub, topic, group, rawgrpc.metadata(), auto_renew=False)
        assert again.system_properties.message_id == first.system_properties.message_id
        assert again.system_properties.delivery_attempt == 2
        assert rawgrpc.ack(stub, topic, group, again).status.code == Code.OK
