"""Bad input through raw gRPC calls and through the official client: each apache.rocketmq.v2.Code
the proxy promises comes back as a Status (gRPC OK), and the proxy keeps serving."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from orbitmq.common.extra_info import build_extra_info
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique

Code = pb.Code


@pytest.fixture(scope="module")
def names(cluster: Cluster) -> dict[str, str]:
    return {"topic": cluster.create_topic(unique("ErrT"), queues=2),
            "group": cluster.create_group(unique("ErrG"))}


@pytest.fixture
def stub(cluster: Cluster):
    channel, stub = cluster.stub()
    with channel:
        yield stub


def _route(stub, topic: str, md=None) -> spb.QueryRouteResponse:
    return stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=md or rawgrpc.metadata(),
                           timeout=10)


def test_client_id_required(stub, names) -> None:
    assert _route(stub, names["topic"], md=rawgrpc.metadata("")).status.code == Code.CLIENT_ID_REQUIRED
    status, _, _ = rawgrpc.receive(stub, names["topic"], names["group"], md=rawgrpc.metadata(""))
    assert status.code == Code.CLIENT_ID_REQUIRED


def test_illegal_topic_and_topic_not_found(stub, names) -> None:
    assert _route(stub, "bad topic!").status.code == Code.ILLEGAL_TOPIC
    assert _route(stub, "x" * 200).status.code == Code.ILLEGAL_TOPIC
    assert _route(stub, "SCHEDULE_TOPIC_XXXX").status.code == Code.ILLEGAL_TOPIC
    missing = unique("Missing")
    assert _route(stub, missing).status.code == Code.TOPIC_NOT_FOUND
    assert rawgrpc.send(stub, rawgrpc.message(missing)).status.code == Code.TOPIC_NOT_FOUND


def test_illegal_consumer_group(stub, names) -> None:
    for group in ("bad group", "CID_RMQ_SYS_X", ""):
        response = stub.QueryAssignment(spb.QueryAssignmentRequest(
            topic=pb.Resource(name=names["topic"]), group=pb.Resource(name=group)), metadata=rawgrpc.metadata())
        assert response.status.code == Code.ILLEGAL_CONSUMER_GROUP, group


def test_message_checks(stub, names) -> None:
    topic = names["topic"]

    def code_of(**kwargs) -> int:
        return rawgrpc.send(stub, rawgrpc.message(topic, **kwargs)).status.code

    assert code_of(body=b"x" * (4 * 1024 * 1024 + 1)) == Code.MESSAGE_BODY_TOO_LARGE
    assert code_of(body=b"") == Code.MESSAGE_BODY_EMPTY
    assert code_of(props={"big": "v" * (17 * 1024)}) == Code.MESSAGE_PROPERTIES_TOO_LARGE
    assert code_of(props={f"k{i}": "v" for i in range(129)}) == Code.MESSAGE_PROPERTIES_TOO_LARGE
    assert code_of(tag="A|B") == Code.ILLEGAL_MESSAGE_TAG
    assert code_of(tag="   ") == Code.ILLEGAL_MESSAGE_TAG
    assert code_of(tag="a\x01b") == Code.ILLEGAL_MESSAGE_TAG
    assert code_of(keys=["  "]) == Code.ILLEGAL_MESSAGE_KEY
    assert code_of(keys=["k\x07"]) == Code.ILLEGAL_MESSAGE_KEY
    assert code_of(props={"TAGS": "x"}) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert code_of(props={"ok": "bad\x00value"}) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert code_of(message_id="") == Code.ILLEGAL_MESSAGE_ID
    assert code_of(group="g" * 64, message_type=pb.MessageType.FIFO) == Code.ILLEGAL_MESSAGE_GROUP
    # A FIFO (message group) message to a NORMAL topic.
    assert code_of(group="g1", message_type=pb.MessageType.FIFO) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    delayed = rawgrpc.message(topic, message_type=pb.MessageType.DELAY)
    delayed.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 2 * 86_400_000)
    assert rawgrpc.send(stub, delayed).status.code == Code.ILLEGAL_DELIVERY_TIME
    assert stub.SendMessage(spb.SendMessageRequest(), metadata=rawgrpc.metadata()).status.code == Code.MESSAGE_CORRUPTED
    other = rawgrpc.message("OtherTopic")
    assert rawgrpc.send(stub, rawgrpc.message(topic), other).status.code == Code.MESSAGE_CORRUPTED
    # The proxy is still serving after all of that.
    assert code_of(body=b"fine") == Code.OK


def test_receive_checks(stub, names) -> None:
    topic, group = names["topic"], names["group"]
    status, _, responses = rawgrpc.receive(stub, topic, group, invisible_ms=500)
    assert status.code == Code.ILLEGAL_INVISIBLE_TIME
    assert responses[-1].HasField("delivery_timestamp")
    status, _, _ = rawgrpc.receive(stub, topic, group, expression="a > ", filter_type=pb.FilterType.SQL)
    assert status.code == Code.ILLEGAL_FILTER_EXPRESSION
    status, _, _ = rawgrpc.receive(stub, topic, group, expression="||")
    assert status.code == Code.ILLEGAL_FILTER_EXPRESSION
    status, _, _ = rawgrpc.receive(stub, topic, group, batch=0)
    assert status.code == Code.BAD_REQUEST
    status, _, _ = rawgrpc.receive(stub, topic, group, timeout=0.8)
    assert status.code == Code.ILLEGAL_POLLING_TIME
    old_client = rawgrpc.metadata()
    old_client = [(k, "5.0.0" if k == "x-mq-client-version" else v) for k, v in old_client]
    status, _, _ = rawgrpc.receive(stub, topic, group, timeout=0.8, md=old_client)
    assert status.code == Code.BAD_REQUEST


def test_unknown_consumer_group(stub, names) -> None:
    """The broker runs without autoCreateSubscriptionGroup: POP for an unknown group is refused."""
    status, msgs, _ = rawgrpc.receive(stub, names["topic"], unique("NoSuchGroup"), polling_ms=1000)
    assert msgs == []
    assert status.code == Code.CONSUMER_GROUP_NOT_FOUND


def test_empty_long_poll_is_message_not_found(cluster: Cluster, stub, names) -> None:
    empty = cluster.create_topic(unique("ErrEmpty"), queues=1)
    status, msgs, responses = rawgrpc.receive(stub, empty, names["group"], polling_ms=1000)
    assert (status.code, msgs) == (Code.MESSAGE_NOT_FOUND, [])
    assert responses[-1].HasField("delivery_timestamp")


def test_receipt_handle_checks(stub, names) -> None:
    topic, group = names["topic"], names["group"]
    garbage = pb.Message(system_properties=pb.SystemProperties(message_id="m", receipt_handle="not a handle"))
    response = rawgrpc.ack(stub, topic, group, garbage)
    assert response.status.code == Code.INVALID_RECEIPT_HANDLE
    assert response.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    expired = build_extra_info(0, int(time.time() * 1000) - 120_000, 60_000, 0, topic, "broker-a", 0, 0) + " 0"
    response = stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle=expired,
        invisible_duration=rawgrpc.duration(10_000), message_id="m"), metadata=rawgrpc.metadata())
    assert response.status.code == Code.INVALID_RECEIPT_HANDLE
    response = stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle=expired,
        invisible_duration=rawgrpc.duration(-5), message_id="m"), metadata=rawgrpc.metadata())
    assert response.status.code == Code.ILLEGAL_INVISIBLE_TIME


def test_client_lifecycle_errors(stub, names) -> None:
    response = stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), metadata=rawgrpc.metadata())
    assert response.status.code == Code.UNRECOGNIZED_CLIENT_TYPE
    bad = spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER))
    # Settings without publishing or subscription: the stream ends with INVALID_ARGUMENT and no
    # command, as upstream's ClientActivity#processTelemetryException.
    with pytest.raises(grpc.RpcError) as refused:
        list(stub.Telemetry(iter([bad]), metadata=rawgrpc.metadata(), timeout=5))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("process client telemetryCommand failed.")


def test_offsets_errors(stub, names) -> None:
    topic, group = names["topic"], names["group"]
    status, _, _ = rawgrpc.pull(stub, topic, group, 0, -1)
    assert status.code == Code.ILLEGAL_OFFSET
    response = stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(name=group),
                                                   message_queue=rawgrpc.queue(topic, 1)),
                              metadata=rawgrpc.metadata())
    assert response.status.code == Code.OFFSET_NOT_FOUND


def test_not_implemented_is_a_status(stub, names) -> None:
    response = stub.SyncLiteSubscription(spb.SyncLiteSubscriptionRequest(), metadata=rawgrpc.metadata())
    assert response.status.code == Code.NOT_IMPLEMENTED


def test_end_transaction_without_transaction_id_is_a_status(stub, names) -> None:
    response = stub.EndTransaction(spb.EndTransactionRequest(topic=pb.Resource(name=names["topic"])),
                                   metadata=rawgrpc.metadata())
    assert response.status.code == Code.INVALID_TRANSACTION_ID


def test_official_client_sees_topic_not_found(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5))
    producer.startup()
    try:
        msg = Message()
        msg.topic = unique("NoSuchTopic")
        msg.body = b"x"
        with pytest.raises(Exception, match="route"):
            producer.send(msg)
    finally:
        producer.shutdown()
    # The client logs the proxy's Status: TOPIC_NOT_FOUND (40402).
    assert f"{Code.TOPIC_NOT_FOUND}, topic {msg.topic} not found" in caplog.text


def test_grpc_transport_stays_ok(cluster: Cluster, names) -> None:
    """Errors are never transport failures: the RPC itself succeeds."""
    channel, stub = cluster.stub()
    with channel:
        try:
            _route(stub, "bad topic!")
        except grpc.RpcError as exc:  # pragma: no cover - would be the bug
            pytest.fail(f"transport error {exc}")


def test_broker_flow_control_is_too_many_requests(cluster: Cluster, names) -> None:
    """SYSTEM_BUSY from the broker (sends waiting over 200 ms in its queue) -> TOO_MANY_REQUESTS."""
    import concurrent.futures

    topic = cluster.create_topic(unique("ErrBusy"), queues=1)
    cluster.api_call(lambda api: api.update_broker_config(cluster.broker, {"sendMessageTestDelayMills": "300"}))
    try:
        channel, stub = cluster.stub()
        with channel, concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda i: rawgrpc.send(stub, rawgrpc.message(topic)).status.code, range(8)))
    finally:
        cluster.api_call(lambda api: api.update_broker_config(cluster.broker, {"sendMessageTestDelayMills": "0"}))
    assert Code.TOO_MANY_REQUESTS in codes, codes
    assert Code.OK in codes, codes
