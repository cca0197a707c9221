"""Namespaces at the proxy: every topic and group a gRPC client names in a Resource reaches the
brokers as ``{namespace}%{name}`` (GrpcConverter#wrapResourceWithNamespace) and comes back
unwrapped (GrpcConverter#buildResource); a SendMessage batch mixing sysFlags is refused."""

from __future__ import annotations

import pytest

from orbitmq.auth.model import Resource
from orbitmq.bench.load import LoadOptions, build_request
from orbitmq.client.api import MQClientAPI
from orbitmq.client.route_cache import TopicRouteCache
from orbitmq.common.message import MessageConst, MessageExt, string_to_properties
from orbitmq.common.route import BrokerData, QueueData, TopicRouteData
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig, TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, producer, validation
from orbitmq.proxy.auth import GRPC_REQUIREMENTS, settings_requirements
from orbitmq.proxy.client_manager import ClientManager, GrpcClient
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.producer import ProducerActivity
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.protocol import RemotingCommand

Code = pb.Code
CTX = ProxyContext("client", "PYTHON", "5.1.2", "10.1.2.3:40000", "NS", None)


def _res(name: str, namespace: str = "") -> pb.Resource:
    return pb.Resource(resource_namespace=namespace, name=name)


# ---- wrap on the way in, with upstream's validation of the wrapped name ------------------------

def test_resources_are_wrapped_and_validated_whole() -> None:
    assert validation.topic_of(_res("T")) == "T"
    assert validation.topic_of(_res("T", "NS")) == "NS%T"
    assert validation.topic_of(_res("NS%T", "NS")) == "NS%T"  # already wrapped
    assert validation.topic_of(_res("%DLQ%G", "NS")) == "%DLQ%NS%G"
    assert validation.group_of(_res("G", "NS")) == "NS%G"
    assert validation.group_of(_res("G")) == "G"
    with pytest.raises(ProxyError) as info:  # the wrapped name is a topic, limits and all
        validation.topic_of(_res("T" * 125, "NS"))
    assert info.value.code == Code.ILLEGAL_TOPIC
    with pytest.raises(ProxyError) as info:
        validation.group_of(_res("G" * 253, "NS"))
    assert info.value.code == Code.ILLEGAL_CONSUMER_GROUP


@pytest.mark.parametrize("namespace", ["a b", "a%b", "n\u00e4", " ", "a/b"])
def test_illegal_namespaces_are_refused(namespace: str) -> None:
    with pytest.raises(ProxyError) as info:
        validation.topic_of(_res("T", namespace))
    assert info.value.code == Code.ILLEGAL_TOPIC and "namespace" in info.value.message
    with pytest.raises(ProxyError) as info:
        validation.group_of(_res("G", namespace))
    assert info.value.code == Code.ILLEGAL_CONSUMER_GROUP and "namespace" in info.value.message


# ---- unwrap on the way out ---------------------------------------------------------------------

def _stored(topic: str, **props: str) -> MessageExt:
    msg = MessageExt(topic=topic, body=b"x", queue_id=1, queue_offset=7)
    msg.properties.update({MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "ID", **props})
    return msg


@pytest.mark.parametrize(("stored", "namespace", "name"), [
    (_stored("T"), "", "T"),
    (_stored("NS%T"), "NS", "T"),
    # redelivered from the POP retry topic: the original topic, unwrapped
    (_stored("%RETRY%NS%G_NS%T", **{MessageConst.RETRY_TOPIC: "NS%T"}), "NS", "T"),
    # read from a DLQ topic: its name as the tenant names it
    (_stored("%DLQ%NS%G"), "NS", "%DLQ%G"),
    (_stored("rmq_sys_a%b"), "", "rmq_sys_a%b"),
])
def test_delivered_messages_name_the_topic_as_the_client_does(stored: MessageExt, namespace: str, name: str) -> None:
    message = converter.build_proto_message(stored)
    assert (message.topic.resource_namespace, message.topic.name) == (namespace, name)


def test_dead_letter_origin_is_unwrapped() -> None:
    msg = _stored("%DLQ%NS%G", **{MessageConst.DLQ_ORIGIN_TOPIC: "NS%T", MessageConst.DLQ_ORIGIN_MESSAGE_ID: "ID"})
    dlq = converter.build_proto_message(msg).system_properties.dead_letter_queue
    assert (dlq.topic, dlq.message_id) == ("T", "ID")


# ---- SendMessage -------------------------------------------------------------------------------

class _Remoting:
    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        self.requests.append(request)
        return RemotingCommand.response(0, None, {"msgId": "M", "queueId": "3", "queueOffset": "70"})

    async def close(self) -> None:
        pass


def _activity(*topics: str) -> tuple[ProducerActivity, _Remoting]:
    config = ProxyConfig()
    remoting = _Remoting()
    api = MQClientAPI(remoting)  # type: ignore[arg-type]
    routes = TopicRouteCache(api, ["127.0.0.1:1"])
    cluster = ClusterService(config, api, routes)
    for topic in topics:
        routes._routes[topic] = TopicRouteData([QueueData("b", 4, 4, 6)], [BrokerData("c", "b", {0: "127.0.0.1:2"})])
        cluster._topic_configs.put(topic, TopicConfig(topic, 4, 4, attributes={
            "message.type": TopicMessageType.MIXED.value}))
    return ProducerActivity(config, cluster), remoting


def _namespaced(batch: int, namespace: str = "NS") -> spb.SendMessageRequest:
    request = build_request(LoadOptions(batch=batch, topic="T"), b"payload")
    for message in request.messages:
        message.topic.resource_namespace = namespace
    return request


@pytest.mark.parametrize("batch", [1, 3])
async def test_send_goes_to_the_wrapped_topic_with_the_wrapped_producer_group(batch: int) -> None:
    activity, remoting = _activity("NS%T")  # only the wrapped topic has a route
    response = await activity.send_message(CTX, _namespaced(batch))
    assert response.status.code == Code.OK
    (request,) = remoting.requests
    fields = request.ext_fields
    if batch == 1:
        assert request.code == RequestCode.SEND_MESSAGE_V2
        properties = string_to_properties(fields["i"])
        assert (fields["a"], fields["b"], properties[MessageConst.PRODUCER_GROUP]) == ("NS%T", "NS%T", "NS%T")
    else:
        assert request.code == RequestCode.SEND_BATCH_MESSAGE
        assert (fields["a"], fields["b"]) == ("NS%T", "NS%T")
        assert bytes(request.body).count(f"{MessageConst.PRODUCER_GROUP}\x01NS%T\x02".encode()) == batch


def test_both_encoders_name_the_producer_group_apart_from_the_topic() -> None:
    request = _namespaced(3)
    config = ProxyConfig()
    args = (request, "T", "NS", "10.1.2.3:40000", config, None, None, "NS%T")
    compiled = producer.encode_messages(*args)
    assert compiled == producer._py_encode_messages(*args)
    assert all(f"{MessageConst.PRODUCER_GROUP}\x01NS%T\x02" in text for text in compiled[1])
    with pytest.raises(ProxyError) as info:  # a message of another namespace is another topic
        request.messages[1].topic.resource_namespace = "OTHER"
        producer.encode_messages(*args)
    assert info.value.code == Code.MESSAGE_CORRUPTED


@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("user", [{}, {"k": "v"}, {MessageConst.SHARDING_KEY: "u"}])  # the dict path too
async def test_a_batch_mixing_transactional_and_other_messages_is_refused(position: int, user: dict) -> None:
    activity, remoting = _activity("T")
    request = build_request(LoadOptions(batch=3, topic="T"), b"payload")
    for message in request.messages:
        message.user_properties.update(user)
    request.messages[position].system_properties.message_type = pb.MessageType.TRANSACTION
    with pytest.raises(ProxyError) as info:
        await activity.send_message(CTX, request)
    assert info.value.code == Code.MESSAGE_CORRUPTED
    assert remoting.requests == []  # nothing was sent


@pytest.mark.parametrize("message_type", [pb.MessageType.TRANSACTION, pb.MessageType.NORMAL])
async def test_a_batch_of_one_kind_is_sent_with_its_sys_flag(message_type: int) -> None:
    activity, remoting = _activity("T")
    request = build_request(LoadOptions(batch=3, topic="T"), b"payload")
    for message in request.messages:
        message.system_properties.message_type = message_type
        message.user_properties["note"] = "TRAN_MSG true"  # look-alike text is no marker
    assert (await activity.send_message(CTX, request)).status.code == Code.OK
    (sent,) = remoting.requests
    assert int(sent.ext_fields["f"]) & 0x4 == (4 if message_type == pb.MessageType.TRANSACTION else 0)  # sysFlag


# ---- clients: heartbeats, settings, ACL resources ----------------------------------------------

class _Cluster:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        self.asked.append(group)
        return SubscriptionGroupConfig(group, retry_max_times=2)


def _consumer_settings(namespace: str) -> pb.Settings:
    settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER)
    settings.subscription.group.CopyFrom(_res("G", namespace))
    settings.subscription.subscriptions.add(topic=_res("T", namespace), expression=pb.FilterExpression(
        type=pb.FilterType.TAG, expression="*"))
    return settings


async def test_clients_are_known_to_the_brokers_by_wrapped_names() -> None:
    cluster = _Cluster()
    clients = ClientManager(ProxyConfig(), cluster)  # type: ignore[arg-type]
    reply = await clients.on_settings(CTX, _consumer_settings("NS"))
    assert reply.settings.subscription.group == _res("G", "NS")  # answered as the client named it
    assert reply.settings.backoff_policy.max_attempts == 3  # the namespaced group's config
    assert cluster.asked == ["NS%G"]
    client = clients.clients["client"]
    assert (client.group, client.topics()) == ("NS%G", ["NS%T"])
    producers, consumers = clients._heartbeat_data(client)
    assert producers == [] and consumers[0].group_name == "NS%G"
    assert [s.topic for s in consumers[0].subscriptions] == ["NS%T"]
    publisher = GrpcClient("p", "PYTHON", "5", settings=pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[_res("T", "NS"), _res("U")])))
    assert [p.group_name for p in clients._heartbeat_data(publisher)[0]] == ["NS%T", "U"]
    with pytest.raises(ProxyError) as info:
        await clients.on_settings(CTX, _consumer_settings("a%b"))
    assert info.value.code == Code.ILLEGAL_CONSUMER_GROUP


def test_acl_resources_are_the_wrapped_names() -> None:
    request = spb.AckMessageRequest(group=_res("G", "NS"), topic=_res("T", "NS"))
    assert [r for r, _ in GRPC_REQUIREMENTS["AckMessage"](request)] == [Resource.group("NS%G"), Resource.topic("NS%T")]
    assert [r for r, _ in settings_requirements(_consumer_settings("NS"))] == [
        Resource.group("NS%G"), Resource.topic("NS%T")]
