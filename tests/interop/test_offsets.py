"""PullMessage, GetOffset, QueryOffset and UpdateOffset: offset-addressed reads of one queue."""

from __future__ import annotations

import threading
import time

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.pool import Timestamp
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code


def test_offsets_and_pull(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("OffT"), queues=1)
    group = cluster.create_group(unique("OffG"))
    channel, stub = cluster.stub()
    with channel:
        before = int(time.time() * 1000) - 1
        sent = rawgrpc.send(stub, *[rawgrpc.message(topic, body=f"m{i}".encode(), tag="A" if i % 2 else "B")
                                    for i in range(4)])
        assert sent.status.code == Code.OK
        md = rawgrpc.metadata()

        def query(policy: int, ts: int | None = None) -> int:
            req = spb.QueryOffsetRequest(message_queue=rawgrpc.queue(topic, 0), query_offset_policy=policy)
            if ts is not None:
                req.timestamp.CopyFrom(Timestamp(seconds=ts // 1000, nanos=(ts % 1000) * 1_000_000))
            response = stub.QueryOffset(req, metadata=md)
            assert response.status.code == Code.OK, response.status
            return response.offset

        assert query(pb.QueryOffsetPolicy.BEGINNING) == 0
        assert query(pb.QueryOffsetPolicy.END) == 4
        assert query(pb.QueryOffsetPolicy.TIMESTAMP, before) == 0

        update = stub.UpdateOffset(spb.UpdateOffsetRequest(group=pb.Resource(name=group),
                                                           message_queue=rawgrpc.queue(topic, 0), offset=2), metadata=md)
        assert update.status.code == Code.OK
        got = stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(name=group), message_queue=rawgrpc.queue(topic, 0)),
                             metadata=md)
        assert (got.status.code, got.offset) == (Code.OK, 2)

        status, msgs, nxt = rawgrpc.pull(stub, topic, group, 0, 2)
        assert status.code == Code.OK
        assert [m.body for m in msgs] == [b"m2", b"m3"]
        assert [m.system_properties.queue_offset for m in msgs] == [2, 3]
        assert nxt == 4
        status, msgs, _ = rawgrpc.pull(stub, topic, group, 0, 0, expression="A")
        assert [m.body for m in msgs] == [b"m1", b"m3"]

        # A long-polling pull at the end of the queue is answered when a message arrives.
        def later() -> None:
            time.sleep(0.5)
            rawgrpc.send(stub, rawgrpc.message(topic, body=b"late"))

        threading.Thread(target=later).start()
        started = time.monotonic()
        status, msgs, nxt = rawgrpc.pull(stub, topic, group, 0, 4, polling_ms=5000)
        waited = time.monotonic() - started
        assert status.code == Code.OK and [m.body for m in msgs] == [b"late"] and nxt == 5
        assert waited < 4.5
        print(f"long-polling pull answered after {waited * 1000:.0f} ms (message sent after 500 ms)")
