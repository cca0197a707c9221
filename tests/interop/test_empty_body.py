"""A 0-byte body round-trips when the proxy's empty-body check is off.

The official client refuses empty bodies before sending, and RocketMQ's proxy refuses them by
default (enableMessageBodyEmptyCheck=true, covered in test_python_producer.py). With the check
off, as RocketMQ allows, the store and every hop carry a 0-byte body exactly.
"""

from __future__ import annotations

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique
from tests.support import free_port


def test_zero_byte_body_round_trips_with_the_check_off(cluster: Cluster) -> None:
    port = free_port()
    cluster.runner.start("proxy", ["-n", cluster.namesrv, "--port", str(port), "enableMessageBodyEmptyCheck=false"],
                         ready_port=port, name="proxy-empty-body")
    topic = cluster.create_topic(unique("PyEmptyOk"), queues=1)
    group = cluster.create_group(unique("GPyEmptyOk"))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        sent = rawgrpc.send(stub, rawgrpc.message(topic, body=b"", tag="Empty"))
        assert sent.status.code == pb.Code.OK
        (entry,) = sent.entries
        got = rawgrpc.pull_all(stub, topic, group, queues=1, expected=1)
    assert [(m.system_properties.message_id, m.body, m.system_properties.tag) for m in got] == [
        (entry.message_id, b"", "Empty")]
