"""A ReceiveMessage the client abandons mid long-poll does not swallow what the broker pops for it:
the proxy makes those messages visible again at once instead of after their invisible time."""

from __future__ import annotations

import time

import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code


@pytest.mark.serial  # its cancel must reach the proxy within a second: not beside another worker's load
def test_cancelled_receive_releases_popped_messages(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("CancelT"), queues=1)
    group = cluster.create_group(unique("CancelG"))
    channel, stub = cluster.stub()
    with channel:
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=8,
            invisible_duration=rawgrpc.duration(60_000), long_polling_timeout=rawgrpc.duration(3_000))
        call = stub.ReceiveMessage(request, metadata=rawgrpc.metadata(), timeout=10)
        time.sleep(0.5)  # the proxy is now long-polling the broker for this call
        call.cancel()
        # Let the proxy see the cancel before the message exists: a message the proxy already
        # wrote into the stream counts as delivered (gRPC gives no receipt), as upstream.
        time.sleep(1.0)
        assert rawgrpc.send(stub, rawgrpc.message(topic, body=b"rescued")).status.code == Code.OK
        got: list[pb.Message] = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            _status, got, _ = rawgrpc.receive(stub, topic, group, polling_ms=1000)
        assert [m.body for m in got] == [b"rescued"], "the message stayed invisible for its 60 s"
        assert rawgrpc.ack(stub, topic, group, *got).status.code == Code.OK
