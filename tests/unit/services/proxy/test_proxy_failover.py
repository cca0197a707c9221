"""The proxy's failover: a master that fails (refused, reset, timed out) has its broker set's
routes dropped at once, the route is re-resolved from the NameServer (waiting while the set has
no master), and the send / ack goes to the new master; a FIFO group keeps its queue.

The only fake is the Remoting transport (RemotingClient.invoke): the NameServer's and brokers'
answers are scripted per address, everything above it (MQClientAPI, TopicRouteCache,
ClusterService, ProducerActivity, ConsumerActivity) is the real code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from orbitmq.bench.load import LoadOptions, build_request
from orbitmq.client import MQBrokerError
from orbitmq.client.api import MQClientAPI
from orbitmq.client.route_cache import TopicRouteCache
from orbitmq.common import extra_info as ei
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.route import BrokerData, QueueData, TopicRouteData
from orbitmq.common.topic_config import TopicConfig, TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.cluster import ClusterService, consistent_hash
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.consumer import ConsumerActivity
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.producer import NOT_SENT, UNKNOWN_OUTCOME, ProducerActivity, failure_kind
from orbitmq.proxy.route import RouteActivity
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import (
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from orbitmq.remoting.protocol import RemotingCommand

Code = pb.Code
NAMESRV = "127.0.0.1:9876"
OLD, NEW, OTHER = "127.0.0.1:10911", "127.0.0.1:20911", "127.0.0.1:30911"
CTX = ProxyContext("client", "JAVA", "5", "10.0.0.1:1", "", None)

Answer = Callable[[RemotingCommand], RemotingCommand]


def _route(masters: dict[str, str | None], queues: int = 4) -> TopicRouteData:
    """A route with one broker set per name; None = the set has only a slave (no master)."""
    return TopicRouteData([QueueData(name, queues, queues, 6) for name in masters],
                          [BrokerData("C", name, {0: addr} if addr else {1: f"slave-of-{name}:1"})
                           for name, addr in masters.items()])


def _sent(request: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(ResponseCode.SUCCESS, None, {"msgId": "M", "queueId": request.ext_fields.get(
        "e", "0"), "queueOffset": "7"})


class _Transport:
    """RemotingClient.invoke, scripted: NameServer routes in turn, per-broker answers in turn."""

    def __init__(self, routes: list[TopicRouteData]) -> None:
        self.routes = routes  # each route lookup takes the next one; the last one stays
        self.brokers: dict[str, list[Answer | BaseException]] = {}
        self.calls: list[tuple[str, int, dict[str, str]]] = []

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        self.calls.append((addr, request.code, dict(request.ext_fields)))
        if addr == NAMESRV:
            if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                route = self.routes.pop(0) if len(self.routes) > 1 else self.routes[0]
                return RemotingCommand.response(ResponseCode.SUCCESS, None, {}, route.encode())
            if request.code == RequestCode.GET_BROKER_CLUSTER_INFO:
                route = self.routes[0]
                body = {"brokerAddrTable": {bd.broker_name: bd.to_json_dict() for bd in route.broker_datas},
                        "clusterAddrTable": {"C": [bd.broker_name for bd in route.broker_datas]}}
                return RemotingCommand.response(ResponseCode.SUCCESS, None, {}, json.dumps(body).encode())
        script = self.brokers.get(addr)
        step: Answer | BaseException = script.pop(0) if script and len(script) > 1 else (
            script[0] if script else RemotingConnectError(addr))
        if isinstance(step, BaseException):
            raise step
        return step(request)

    def sends(self) -> list[tuple[str, str]]:
        """(broker address, queue id) of every send request, in order."""
        return [(addr, fields["e"]) for addr, code, fields in self.calls
                if code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)]

    async def close(self) -> None:
        pass


async def _cluster(transport: _Transport, **config: object) -> ClusterService:
    cfg = ProxyConfig(**config)  # type: ignore[arg-type]
    api = MQClientAPI(transport)  # type: ignore[arg-type]
    cluster = ClusterService(cfg, api, TopicRouteCache(api, [NAMESRV]))
    cluster._topic_configs.put("T", TopicConfig("T", 4, 4, attributes={"message.type": TopicMessageType.MIXED.value}))
    await cluster.route("T")  # cached, as after the first send
    return cluster


def _single(group: str = "") -> spb.SendMessageRequest:
    request = build_request(LoadOptions(batch=1, topic="T"), b"body")
    if group:
        request.messages[0].system_properties.message_group = group
        request.messages[0].system_properties.message_type = pb.MessageType.FIFO
    return request


@pytest.mark.parametrize(("exc", "kind"), [
    (RemotingConnectError(OLD), NOT_SENT),
    (MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, "fenced"), NOT_SENT),
    (RemotingSendRequestError(OLD, "connection closed before response"), UNKNOWN_OUTCOME),
    (RemotingTimeoutError(OLD, 3.0), UNKNOWN_OUTCOME),
    (RemotingTooMuchRequestError("busy"), None),
    (MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, "no topic"), None),
    (MQBrokerError(ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"), None),
])
def test_failure_kinds(exc: BaseException, kind: str | None) -> None:
    assert failure_kind(exc) == kind


async def test_reset_connection_resends_on_the_new_master_and_counts_a_possible_duplicate() -> None:
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": NEW})])
    transport.brokers[OLD] = [RemotingSendRequestError(OLD, "connection closed before response")]
    transport.brokers[NEW] = [_sent]
    cluster = await _cluster(transport)
    response = await ProducerActivity(cluster.config, cluster).send_message(CTX, _single())
    assert response.status.code == Code.OK
    assert [addr for addr, _ in transport.sends()] == [OLD, NEW]
    assert cluster.failover.as_dict() == {"broker_failures": 1, "send_retries": 1, "possible_duplicates": 1}
    assert cluster.routes.cached("T").broker_datas[0].master_addr == NEW


async def test_refused_connect_is_resent_without_counting_a_duplicate() -> None:
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": NEW})])
    transport.brokers[NEW] = [_sent]
    cluster = await _cluster(transport)
    response = await ProducerActivity(cluster.config, cluster).send_message(CTX, _single())
    assert response.status.code == Code.OK
    assert cluster.failover.possible_duplicates == 0 and cluster.failover.send_retries == 1


async def test_other_broker_set_takes_a_plain_message_at_once() -> None:
    transport = _Transport([_route({"broker-a": OLD, "broker-b": OTHER}), _route({"broker-a": None,
                                                                               "broker-b": OTHER})])
    transport.brokers[OLD] = [RemotingConnectError(OLD)]
    transport.brokers[OTHER] = [_sent]
    cluster = await _cluster(transport)
    producer = ProducerActivity(cluster.config, cluster)
    # Round robin: the first plain send of this cluster goes to broker-a's first queue.
    response = await producer.send_message(CTX, _single())
    assert response.status.code == Code.OK
    assert [addr for addr, _ in transport.sends()] == [OLD, OTHER]


async def test_fifo_group_waits_for_its_own_queue_on_the_new_master() -> None:
    masters_before = {"broker-a": OLD, "broker-b": OTHER}
    # Pick a group that hashes onto broker-a (queues 0..3 of 8, sorted by broker name).
    group = next(g for g in (f"g{i}" for i in range(100)) if consistent_hash(java_string_hash(g), 8) < 4)
    queue_id = str(consistent_hash(java_string_hash(group), 8))
    transport = _Transport([_route(masters_before), _route({"broker-a": None, "broker-b": OTHER}),
                            _route({"broker-a": None, "broker-b": OTHER}), _route({"broker-a": NEW, "broker-b": OTHER})])
    transport.brokers[OLD] = [RemotingTimeoutError(OLD, 3.0)]
    transport.brokers[NEW] = [_sent]
    transport.brokers[OTHER] = [_sent]
    cluster = await _cluster(transport)
    response = await ProducerActivity(cluster.config, cluster).send_message(CTX, _single(group))
    assert response.status.code == Code.OK
    assert transport.sends() == [(OLD, queue_id), (NEW, queue_id)]
    assert cluster.failover.possible_duplicates == 1


async def test_fenced_new_master_is_retried_until_it_serves() -> None:
    transport = _Transport([_route({"broker-a": NEW})])
    refuse = RemotingCommand.response(ResponseCode.SERVICE_NOT_AVAILABLE, "fenced", {})
    transport.brokers[NEW] = [lambda r: refuse, lambda r: refuse, _sent]
    cluster = await _cluster(transport)
    response = await ProducerActivity(cluster.config, cluster).send_message(CTX, _single())
    assert response.status.code == Code.OK
    assert [addr for addr, _ in transport.sends()] == [NEW, NEW, NEW]
    assert cluster.failover.possible_duplicates == 0


async def test_gives_up_when_no_master_appears_within_the_window() -> None:
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": None})])
    cluster = await _cluster(transport, broker_failover_wait_millis=300)
    started = time.monotonic()
    with pytest.raises(ProxyError) as info:
        await ProducerActivity(cluster.config, cluster).send_message(CTX, _single())
    assert info.value.code == Code.INTERNAL_SERVER_ERROR and "has no master" in info.value.message
    assert time.monotonic() - started < 5  # bounded by the window, not the 30 s route refresh


async def test_unknown_outcomes_use_up_the_resend_budget() -> None:
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": NEW}), _route({"broker-a": OTHER})])
    transport.brokers[OLD] = [RemotingTimeoutError(OLD, 3.0)]
    transport.brokers[NEW] = [RemotingTimeoutError(NEW, 3.0)]
    cluster = await _cluster(transport, retry_times_when_send_failed=1)
    with pytest.raises(RemotingTimeoutError):
        await ProducerActivity(cluster.config, cluster).send_message(CTX, _single())
    assert [addr for addr, _ in transport.sends()] == [OLD, NEW]
    assert cluster.failover.possible_duplicates == 1


async def test_broker_refusals_other_than_fencing_are_not_retried() -> None:
    transport = _Transport([_route({"broker-a": OLD})])
    transport.brokers[OLD] = [lambda r: RemotingCommand.response(ResponseCode.SYSTEM_ERROR, "boom", {})]
    cluster = await _cluster(transport)
    with pytest.raises(MQBrokerError):
        await ProducerActivity(cluster.config, cluster).send_message(CTX, _single())
    assert len(transport.sends()) == 1 and cluster.failover.send_retries == 0


async def test_ack_follows_the_broker_set_to_its_new_master() -> None:
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": NEW})])
    transport.brokers[OLD] = [RemotingConnectError(OLD)]
    transport.brokers[NEW] = [lambda r: RemotingCommand.response(ResponseCode.SUCCESS, None, {})]
    cluster = await _cluster(transport)
    consumer = ConsumerActivity(cluster.config, cluster, ClientManager(cluster.config, cluster))
    now = int(time.time() * 1000)
    handle = ei.build_extra_info(3, now, 60_000, 0, "T", "broker-a", 1, 3) + " 100"
    response = await consumer.ack_message(CTX, spb.AckMessageRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
        entries=[spb.AckMessageEntry(message_id="M1", receipt_handle=handle)]))
    assert response.status.code == Code.OK
    acks = [addr for addr, code, _ in transport.calls if code == RequestCode.ACK_MESSAGE]
    assert acks == [OLD, NEW]


async def test_query_route_keeps_a_set_without_master_listed() -> None:
    transport = _Transport([_route({"broker-a": None, "broker-b": OTHER})])
    cluster = await _cluster(transport)
    response = await RouteActivity(cluster.config, cluster).query_route(spb.QueryRouteRequest(
        topic=pb.Resource(name="T"), endpoints=pb.Endpoints(addresses=[pb.Address(host="10.0.0.9", port=8081)])))
    assert response.status.code == Code.OK
    assert sorted({q.broker.name for q in response.message_queues}) == ["broker-a", "broker-b"]
    assert len(response.message_queues) == 8


@pytest.mark.parametrize("failure", [RemotingConnectError(OLD),
                                     RemotingSendRequestError(OLD, "connection closed before response")])
async def test_receive_pops_again_from_the_new_master(failure: Exception) -> None:
    pop_found = RemotingCommand.response(ResponseCode.POLLING_TIMEOUT, "no message", {
        "popTime": "1", "invisibleTime": "15000", "reviveQid": "0", "restNum": "0"})
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": None}), _route({"broker-a": NEW})])
    transport.brokers[OLD] = [failure]
    transport.brokers[NEW] = [lambda r: pop_found]
    cluster = await _cluster(transport)
    consumer = ConsumerActivity(cluster.config, cluster, ClientManager(cluster.config, cluster))
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name="G"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=4)
    request.invisible_duration.FromMilliseconds(15_000)
    request.long_polling_timeout.FromMilliseconds(5_000)
    statuses = [(r.status.code, r.status.message) async for r in consumer.receive_message(CTX, request)
                if r.HasField("status")]
    assert [code for code, _message in statuses] == [Code.MESSAGE_NOT_FOUND], statuses
    pops = [(addr, int(fields["pollTime"])) for addr, code, fields in transport.calls
            if code == RequestCode.POP_MESSAGE]
    assert [addr for addr, _ in pops] == [OLD, NEW]
    assert pops[1][1] <= pops[0][1] == 5000  # the second pop polls only for what is left


async def test_a_group_lookup_a_failing_master_cannot_answer_keeps_the_last_known_config() -> None:
    """The FIFO group's config expires while its master fails over: the proxy keeps popping it
    orderly (upstream's refreshing metadata cache), not with the defaults (concurrently)."""
    from orbitmq.common.subscription_group import SubscriptionGroupConfig

    orderly = SubscriptionGroupConfig("GFifo")
    orderly.consume_message_orderly = True
    transport = _Transport([_route({"b": OLD})])
    transport.brokers[OLD] = [lambda _r: RemotingCommand.response(ResponseCode.SUCCESS, None, {}, json.dumps(
        orderly.to_json_dict()).encode()), RemotingConnectError(OLD)]
    cluster = await _cluster(transport)
    cluster._group_configs.ttl = -1.0  # every cached entry has expired
    assert (await cluster.group_config("GFifo")).consume_message_orderly
    config = await cluster.group_config("GFifo")  # the master refuses: failing over
    assert config is not None and config.consume_message_orderly
    transport.brokers[OLD] = [lambda _r: RemotingCommand.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "gone")]
    assert await cluster.group_config("GFifo") is None  # an answer wins: the group was deleted


async def test_offset_requests_follow_the_broker_set_to_its_new_master() -> None:
    """QueryOffset, GetOffset, UpdateOffset and PullMessage (the SDK's pull consumer, the Spark
    source): a master that refuses the connection is re-resolved and the request goes again to the
    new master, instead of failing the reader for the whole failover."""
    from orbitmq.proxy.config import ProxyConfig as _Config
    from orbitmq.proxy.offsets import OffsetActivity

    answers = {RequestCode.GET_MIN_OFFSET: {"offset": "5"}, RequestCode.QUERY_CONSUMER_OFFSET: {"offset": "9"},
               RequestCode.UPDATE_CONSUMER_OFFSET: {}}
    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": None}), _route({"broker-a": NEW})])
    transport.brokers[NEW] = [lambda r: RemotingCommand.response(ResponseCode.SUCCESS, None, answers[r.code])]
    cluster = await _cluster(transport)
    offsets = OffsetActivity(_Config(), cluster)
    mq = pb.MessageQueue(topic=pb.Resource(name="T"), id=1, broker=pb.Broker(name="broker-a"))
    queried = await offsets.query_offset(CTX, spb.QueryOffsetRequest(
        message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.BEGINNING))
    assert (queried.status.code, queried.offset) == (Code.OK, 5)
    got = await offsets.get_offset(CTX, spb.GetOffsetRequest(group=pb.Resource(name="G"), message_queue=mq))
    assert (got.status.code, got.offset) == (Code.OK, 9)
    updated = await offsets.update_offset(CTX, spb.UpdateOffsetRequest(group=pb.Resource(name="G"),
                                                                       message_queue=mq, offset=12))
    assert updated.status.code == Code.OK
    calls = [(addr, code) for addr, code, _ in transport.calls if addr != NAMESRV]
    assert calls == [(OLD, RequestCode.GET_MIN_OFFSET), (NEW, RequestCode.GET_MIN_OFFSET),
                     (NEW, RequestCode.QUERY_CONSUMER_OFFSET), (NEW, RequestCode.UPDATE_CONSUMER_OFFSET)]


async def test_offset_requests_do_not_retry_a_broker_refusal() -> None:
    from orbitmq.proxy.config import ProxyConfig as _Config
    from orbitmq.proxy.offsets import OffsetActivity

    transport = _Transport([_route({"broker-a": OLD}), _route({"broker-a": NEW})])
    transport.brokers[OLD] = [lambda r: RemotingCommand.response(ResponseCode.SYSTEM_ERROR, "disk full", {})]
    cluster = await _cluster(transport)
    mq = pb.MessageQueue(topic=pb.Resource(name="T"), id=1, broker=pb.Broker(name="broker-a"))
    with pytest.raises(MQBrokerError):
        await OffsetActivity(_Config(), cluster).update_offset(CTX, spb.UpdateOffsetRequest(
            group=pb.Resource(name="G"), message_queue=mq, offset=3))
    assert [addr for addr, _, _ in transport.calls if addr != NAMESRV] == [OLD]
