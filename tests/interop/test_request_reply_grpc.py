"""Request/reply and gRPC: apache.rocketmq.v2 has no reply RPC, and the proxy does what upstream's does.

A gRPC client cannot make a request (CORRELATION_ID, REPLY_TO_CLIENT, TTL, MSG_TYPE and CLUSTER are
system property keys, refused with ILLEGAL_MESSAGE_PROPERTY_KEY and nothing stored), so no broker
ever pushes a reply towards a proxy connection; a request a Remoting client made is delivered to
gRPC consumers with those keys hidden, like every system property.
"""

from __future__ import annotations

import pytest

from orbitmq.common.message import Message, MessageConst
from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code
REPLY_KEYS = (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL,
              MessageConst.MESSAGE_TYPE, MessageConst.CLUSTER)


@pytest.fixture
def stub(cluster: Cluster):
    channel, s = cluster.stub()
    yield s
    channel.close()


def test_grpc_clients_cannot_set_request_reply_properties(cluster: Cluster, stub) -> None:
    topic = cluster.create_topic(unique("RRGrpc"), queues=1)
    for key in REPLY_KEYS:
        response = rawgrpc.send(stub, rawgrpc.message(topic, props={key: "x"}))
        assert response.status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY, (key, response)
    assert cluster.api_call(lambda api: api.get_max_offset(cluster.broker, topic, 0)) == 0


def test_a_remoting_request_reaches_grpc_consumers_without_its_reply_keys(cluster: Cluster, stub) -> None:
    topic = cluster.create_topic(unique("RRGrpcIn"), queues=1)
    group = cluster.create_group(unique("RRGrpcG"))
    request = Message(topic, b"question", 0, {
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id(), MessageConst.CORRELATION_ID: "corr-1",
        MessageConst.MESSAGE_REPLY_TO_CLIENT: "requester@1", MessageConst.MESSAGE_TTL: "3000"})
    cluster.api_call(lambda api: api.send_message(cluster.broker, "broker-a", request, "PG_RR", 0))
    got = rawgrpc.pull_all(stub, topic, group, 1, 1)
    assert [m.body for m in got] == [b"question"]
    assert not set(REPLY_KEYS) & set(got[0].user_properties)
