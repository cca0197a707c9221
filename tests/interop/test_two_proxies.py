"""Proxies are interchangeable: a message received through one is acked through the other."""

from __future__ import annotations

import time

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code


def test_receive_through_one_ack_through_the_other(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("TwoProx"), queues=1)
    group = cluster.create_group(unique("TwoProxG"))
    ch_a, proxy_a = cluster.stub(cluster.proxies[0])
    ch_b, proxy_b = cluster.stub(cluster.proxies[1])
    with ch_a, ch_b:
        sent = [rawgrpc.message(topic, body=f"m{i}".encode()) for i in range(3)]
        assert rawgrpc.send(proxy_b, *sent).status.code == Code.OK

        got: list[pb.Message] = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            status, msgs, responses = rawgrpc.receive(proxy_a, topic, group, invisible_ms=3000, polling_ms=1000)
            assert responses[-1].HasField("delivery_timestamp")
            got.extend(msgs)
        assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]

        # Postpone one through proxy B, ack all through proxy B (the new handle for the postponed one).
        changed = proxy_b.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic),
            receipt_handle=got[0].system_properties.receipt_handle, invisible_duration=rawgrpc.duration(5000),
            message_id=got[0].system_properties.message_id), metadata=rawgrpc.metadata())
        assert changed.status.code == Code.OK
        assert changed.receipt_handle and changed.receipt_handle != got[0].system_properties.receipt_handle
        got[0].system_properties.receipt_handle = changed.receipt_handle
        acked = rawgrpc.ack(proxy_b, topic, group, *got)
        assert acked.status.code == Code.OK, acked
        assert [e.status.code for e in acked.entries] == [Code.OK] * 3

        # After the original invisible time nothing comes back, through either proxy.
        time.sleep(3.5)
        for stub in (proxy_a, proxy_b):
            status, msgs, _ = rawgrpc.receive(stub, topic, group, polling_ms=1000)
            assert msgs == []
            assert status.code == Code.MESSAGE_NOT_FOUND
