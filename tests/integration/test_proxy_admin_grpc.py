"""The proxy's apache.rocketmq.v2.Admin gRPC service (services/proxy/admin/) against real processes.

One cluster for the module: a NameServer, broker-a, a plain proxy and a proxy with ACL 2.0 on (its
bootstrap Super user ``admin``, and ``bob`` whose ACL, stored on the broker, allows Get on the
module's groups and topics only). Each RPC is called for its good path with real outcomes (ten
messages sent, a POP consumer acking four: the accumulation is six, in flight), with bad inputs
(unknown topic, group and client, missing fields), with ACL (allowed and denied users), and once
through ``orbitmq admin grpcAdmin``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from orbitmq import AsyncProducer, AsyncPushConsumer, AsyncSimpleConsumer, ClientConfig, Message
from orbitmq.auth.signature import grpc_auth_headers
from orbitmq.client import MQClientAPI
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2_grpc as agrpc
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.pool import Timestamp
from orbitmq.remoting.codes import RequestCode
from tests.support import free_port, start_broker
from tests.support.process import running
from tests.support.services import start_namesrv

Code = pb.Code
TOPIC, OTHER, GROUP, IDLE, PUSH, STATIC = "TAdminOrders", "TAdminOther", "GAdminPop", "GAdminIdle", "GAdminPush", \
    "GAdminStatic"
REVIVED, REVIVE_GROUP, FIFO = "TAdminRevived", "GAdminRevive", "TAdminFifo"
ADMIN = {"username": "admin", "password": "admin-secret"}
BOB = ("bob", "bob-secret")
BROKER_KEYS = {"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "true",
               "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": 64 * 1024 * 1024}


@dataclass
class Cluster:
    namesrv: str
    broker: str
    proxy: str
    acl_proxy: str
    metrics: str  # the plain proxy's /metrics


def R(name: str) -> pb.Resource:  # noqa: N802 -- reads as the proto's Resource
    return pb.Resource(name=name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir: Path = tmp_path_factory.mktemp("proxy-admin")
    with running(workdir) as runner:
        _, namesrv = start_namesrv(runner, name="namesrv")
        _, broker = start_broker(runner, workdir, namesrv, "broker-a", store=workdir / "store", brokerName="broker-a",
                                 **BROKER_KEYS)
        ports = [free_port() for _ in range(5)]
        runner.start("proxy", ["-n", namesrv, "--port", str(ports[0]), f"remotingListenPort={ports[1]}",
                               "metricsExporterType=PROM", f"metricsPromExporterPort={ports[4]}"],
                     ready_port=ports[1], ready_text="The proxy boot success", name="proxy", timeout=30)
        runner.start("proxy", ["-n", namesrv, "--port", str(ports[2]), f"remotingListenPort={ports[3]}",
                               "authenticationEnabled=true", "authorizationEnabled=true",
                               f"initAuthenticationUser={json.dumps(ADMIN)}", "userCacheRefreshSecond=1",
                               "aclCacheRefreshSecond=1"],
                     ready_port=ports[3], ready_text="The proxy boot success", name="acl-proxy", timeout=30)

        async def setup() -> None:
            api = MQClientAPI(timeout=10)
            try:
                for topic in (TOPIC, OTHER, REVIVED):
                    await api.create_topic(broker, TopicConfig(topic, 2, 2))
                await api.create_topic(broker, TopicConfig(FIFO, 1, 1, attributes={"message.type": "FIFO"}))
                for group in (GROUP, IDLE, PUSH, REVIVE_GROUP):
                    await api.create_subscription_group(broker, SubscriptionGroupConfig(group))
                static = SubscriptionGroupConfig(STATIC)
                static.extra["subscriptionDataSet"] = [{"topic": OTHER, "expressionType": "TAG", "expression": "*"}]
                await api.create_subscription_group(broker, static)
                await api.call(broker, RequestCode.AUTH_CREATE_USER, {"username": BOB[0]}, json.dumps(
                    {"username": BOB[0], "password": BOB[1], "userType": "Normal"}).encode())
                await api.call(broker, RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"}, json.dumps(
                    {"subject": "User:bob", "policies": [{"policyType": "Custom", "entries": [
                        {"resource": "Group:GAdmin*", "actions": ["Get"], "decision": "Allow"},
                        {"resource": "Topic:TAdmin*", "actions": ["Get"], "decision": "Allow"}]}]}).encode())
                deadline = time.monotonic() + 20
                for topic in (TOPIC, OTHER, REVIVED, FIFO):
                    while True:
                        try:
                            await api.get_topic_route(namesrv, topic)
                            break
                        except Exception:
                            assert time.monotonic() < deadline, f"{topic} never routed"
                            await asyncio.sleep(0.2)
            finally:
                await api.close()

        asyncio.run(setup())
        yield Cluster(namesrv, broker, f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[2]}",
                      f"http://127.0.0.1:{ports[4]}/metrics")


async def admin_call(addr: str, method: str, request: Any, credentials: tuple[str, str] | None = None) -> Any:
    metadata = grpc_auth_headers(*credentials) if credentials else None
    async with grpc.aio.insecure_channel(addr) as channel:
        return await getattr(agrpc.AdminStub(channel), method)(request, metadata=metadata, timeout=20)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.3)


def ts(ms: int) -> Timestamp:
    out = Timestamp()
    out.FromMilliseconds(ms)
    return out


async def test_pop_group_accumulation_clients_messages_and_offsets(cluster: Cluster) -> None:
    """Ten messages, a POP consumer takes them all and acks four: six in flight, none ready; an
    idle group has all ten ready; the POP consumer's connection, subscription, running info and
    stacks; a push consumer verifies a message; queries by id, key and tag; reset to now."""
    config = ClientConfig(cluster.proxy)
    call = lambda method, request: admin_call(cluster.proxy, method, request)  # noqa: E731
    pushed: list[bytes] = []
    async with AsyncProducer(config, [TOPIC]) as producer, \
            AsyncSimpleConsumer(config, GROUP, {TOPIC: "*"}) as consumer, \
            AsyncPushConsumer(config, PUSH, {OTHER: "*"}, lambda m: pushed.append(bytes(m.body))) as push:
        receipts = [await producer.send(Message(TOPIC, f"m{i}".encode(), tag="TagA" if i % 2 else "TagB",
                                                keys=[f"key-{i}"])) for i in range(10)]
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < 10:
            assert time.monotonic() < deadline, f"received {len(got)} of 10"
            got += await consumer.receive(max_messages=10, invisible_duration=120)
        await consumer.ack_many(got[:4])

        async def six_in_flight() -> bool:
            answer = await call("DescribeGroupAccumulation", apb.DescribeGroupAccumulationRequest(group=R(GROUP)))
            assert answer.status.code == Code.OK, answer.status
            acc = answer.accumulation
            return (acc.accumulation, acc.inflight_messages, acc.ready_messages) == (6, 6, 0) and \
                answer.topic_accumulation[TOPIC].accumulation == 6
        await eventually(six_in_flight, "DescribeGroupAccumulation never said 6 in flight")

        idle = await call("DescribeGroupAccumulation", apb.DescribeGroupAccumulationRequest(
            group=R(IDLE), topics=[R(TOPIC)]))
        assert idle.status.code == Code.OK, idle.status
        assert (idle.accumulation.ready_messages, idle.accumulation.inflight_messages) == (10, 0)
        assert idle.accumulation.deliver_delay_time.ToMilliseconds() >= 0 and list(idle.topic_accumulation) == [TOPIC]

        # clients of the group: connection list, subscriptions, running info, stacks
        conns = await call("ListConsumerConnection", apb.ListConsumerConnectionRequest(group=R(GROUP)))
        assert conns.status.code == Code.OK and [c.client_id for c in conns.client_info] == [consumer.client_id]
        assert conns.client_info[0].message_model == apb.CLUSTERING and conns.client_info[0].language
        subs = await call("ListSubscription", apb.ListSubscriptionRequest(group=R(GROUP)))
        assert subs.status.code == Code.OK, subs.status
        assert [(s.topic.name, s.online, s.expression.expression, s.subscription_consistency)
                for s in subs.subscription_info] == [(TOPIC, True, "*", True)]
        by_topic = await call("ListSubscription", apb.ListSubscriptionRequest(topic=R(TOPIC)))
        assert {s.group.name for s in by_topic.subscription_info} >= {GROUP}
        described = await call("DescribeSubscription", apb.DescribeSubscriptionRequest(group=R(GROUP)))
        assert [(d.client_info.client_id, d.subscription_info.topic.name) for d in described.client_subscription_info] \
            == [(consumer.client_id, TOPIC)]
        info = await call("GetConsumerRunningInfo", apb.GetConsumerRunningInfoRequest(
            group=R(GROUP), client_id=consumer.client_id))
        assert info.status.code == Code.OK, info.status
        assert info.consumer_running_info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
        assert TOPIC in info.consumer_running_info.subscriptions
        stack = await call("PrintThreadStackTrace", apb.PrintThreadStackTraceRequest(
            group=R(GROUP), client_id=consumer.client_id))
        assert stack.status.code == Code.OK and stack.thread_stack_trace, stack.status

        # a message handed to the push consumer of another group (CONSUME_MESSAGE_DIRECTLY via Telemetry)
        other = await producer.send(Message(OTHER, b"verify-me"))
        await eventually(lambda: _true(b"verify-me" in pushed), "the push consumer never got its message")
        verified = await call("VerifyMessage", apb.VerifyMessageRequest(
            group=R(PUSH), topic=R(OTHER), client_id=push.client_id, message_id=other.message_id))
        assert verified.status.code == Code.OK, verified.status
        assert pushed.count(b"verify-me") == 2

        # messages by id, key and tag (paged), within time ranges
        by_id = await call("QueryMessage", apb.ListMessageRequest(topic=R(TOPIC), message_id=receipts[3].message_id))
        assert [m.body for m in by_id.messages] == [b"m3"], by_id.status
        assert by_id.messages[0].system_properties.message_id == receipts[3].message_id
        by_key = await call("QueryMessage", apb.ListMessageRequest(topic=R(TOPIC), message_key="key-7"))
        assert [m.body for m in by_key.messages] == [b"m7"], by_key.status
        page = await call("QueryMessage", apb.ListMessageRequest(topic=R(TOPIC), subscription="TagA", page_size=3))
        assert page.status.code == Code.OK and len(page.messages) == 3 and page.scroll_id, page.status
        rest = await call("QueryMessage", apb.ListMessageRequest(topic=R(TOPIC), subscription="TagA", page_size=3,
                                                                 scroll_id=page.scroll_id))
        assert sorted(m.body for m in [*page.messages, *rest.messages]) == [b"m1", b"m3", b"m5", b"m7", b"m9"]
        assert not rest.scroll_id
        future = await call("QueryMessage", apb.ListMessageRequest(
            topic=R(TOPIC), subscription="*", begin_timestamp=ts(int(time.time() * 1000) + 3_600_000)))
        assert future.status.code == Code.OK and not future.messages

        span = await call("QueryTimeSpan", apb.QueryTimeSpanRequest(group=R(GROUP), topics=[R(TOPIC)]))
        assert span.status.code == Code.OK and len(span.queue_time_span_list) == 2, span.status
        assert all(q.max_timestamp >= q.min_timestamp > 0 for q in span.queue_time_span_list)

        # reset the idle group to now: nothing is ready any more
        reset = await call("ResetGroupOffset", apb.ResetGroupOffsetRequest(
            group=R(IDLE), topic=R(TOPIC), reset_timestamp=ts(int(time.time() * 1000) + 1000)))
        assert reset.status.code == Code.OK, reset.status
        after = await call("DescribeGroupAccumulation", apb.DescribeGroupAccumulationRequest(
            group=R(IDLE), topics=[R(TOPIC)]))
        assert after.accumulation.accumulation == 0, after

        stats = await call("GetProxyRuntimeStats", apb.GetProxyRuntimeStatsRequest())
        assert stats.status.code == Code.OK and stats.producers >= 1 and stats.consumers >= 2, stats
        assert stats.connections >= 3 and stats.proxy_name and "inFlightCalls=" in stats.status.message
        assert stats.in_tps > 0 and stats.out_tps > 0, stats  # 11 sent, 11 delivered since start

    scraped = await asyncio.to_thread(lambda: urllib.request.urlopen(cluster.metrics, timeout=10).read().decode())
    counted = [line for line in scraped.splitlines() if line.startswith("rocketmq_proxy_rpc_total")
               and 'method="DescribeGroupAccumulation"' in line and 'code="OK"' in line]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 3, counted


async def _true(value: bool) -> bool:
    return value


async def test_revived_pop_messages_stay_in_the_accumulation(cluster: Cluster) -> None:
    """Three messages popped and never acked are in flight until their invisible time passes, then
    ready in the group's POP retry topic: the accumulation stays three throughout."""
    config = ClientConfig(cluster.proxy)
    async with AsyncProducer(config, [REVIVED]) as producer, \
            AsyncSimpleConsumer(config, REVIVE_GROUP, {REVIVED: "*"}) as consumer:
        for i in range(3):
            await producer.send(Message(REVIVED, f"r{i}".encode()))
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < 3:
            assert time.monotonic() < deadline, f"received {len(got)} of 3"
            got += await consumer.receive(max_messages=3, invisible_duration=10)
        seen: list[tuple[int, int, int]] = []

        async def state(want: tuple[int, int, int]) -> bool:
            answer = await admin_call(cluster.proxy, "DescribeGroupAccumulation",
                                      apb.DescribeGroupAccumulationRequest(group=R(REVIVE_GROUP)))
            acc = answer.accumulation
            seen.append((acc.accumulation, acc.inflight_messages, acc.ready_messages))
            return seen[-1] == want and answer.topic_accumulation[REVIVED].accumulation == 3
        await eventually(lambda: state((3, 3, 0)), f"never 3 in flight: {seen[-3:]}")
        await eventually(lambda: state((3, 0, 3)), f"never 3 ready after the revive: {seen[-3:]}", timeout=30)


async def test_topics_routes_sends_log_level_stacks_and_static_subscriptions(cluster: Cluster) -> None:
    call = lambda method, request: admin_call(cluster.proxy, method, request)  # noqa: E731
    status = await call("DescribeTopicStatus", apb.DescribeTopicStatusRequest(topic=R(OTHER)))
    assert status.status.code == Code.OK and status.topic_message_type == pb.MessageType.NORMAL, status
    assert status.tags["readQueueNums"] == "2" and status.tags["brokerNames"] == "broker-a"
    fifo = await call("DescribeTopicStatus", apb.DescribeTopicStatusRequest(topic=R(FIFO)))
    assert fifo.topic_message_type == pb.MessageType.FIFO and fifo.tags["message.type"] == "FIFO", fifo
    route = await call("GetTopicRoute", apb.GetTopicRouteRequest(topic=R(OTHER)))
    data = json.loads(route.topic_route_data)
    assert [b["brokerName"] for b in data["brokerDatas"]] == ["broker-a"]
    assert data["brokerDatas"][0]["brokerAddrs"]["0"] == cluster.broker

    sent = await call("AdminSendMessage", apb.AdminSendMessageRequest(
        topic=R(OTHER), tag="Probe", key="probe-key", body=b"from admin", user_properties={"k": "v"}))
    assert sent.status.code == Code.OK and sent.message_id, sent.status
    found = await call("QueryMessage", apb.ListMessageRequest(topic=R(OTHER), message_id=sent.message_id))
    assert [(m.body, m.system_properties.tag, dict(m.user_properties)) for m in found.messages] == \
        [(b"from admin", "Probe", {"k": "v"})]

    changed = await call("ChangeLogLevel", apb.ChangeLogLevelRequest(level=apb.ChangeLogLevelRequest.DEBUG))
    assert "to DEBUG" in changed.remark, changed.remark
    back = await call("ChangeLogLevel", apb.ChangeLogLevelRequest(level=apb.ChangeLogLevelRequest.INFO))
    assert "from DEBUG to INFO" in back.remark, back.remark
    bad_level = await call("ChangeLogLevel", apb.ChangeLogLevelRequest(level=42))
    assert "unknown log level" in bad_level.remark

    own = await call("PrintThreadStackTrace", apb.PrintThreadStackTraceRequest())
    assert own.status.code == Code.OK and "MainThread" in own.thread_stack_trace and "task " in own.thread_stack_trace

    listed = await call("ListSubscription", apb.ListSubscriptionRequest(group=R(STATIC)))
    assert [(s.topic.name, s.online) for s in listed.subscription_info] == [(OTHER, False)]
    deleted = await call("DeleteSubscription", apb.DeleteSubscriptionRequest(group=R(STATIC), topic=R(OTHER)))
    assert deleted.status.code == Code.OK, deleted.status
    again = await call("DeleteSubscription", apb.DeleteSubscriptionRequest(group=R(STATIC), topic=R(OTHER)))
    assert again.status.code == Code.NOT_FOUND, again.status
    assert not (await call("ListSubscription", apb.ListSubscriptionRequest(group=R(STATIC)))).subscription_info


async def test_bad_inputs_answer_codes(cluster: Cluster) -> None:
    call = lambda method, request: admin_call(cluster.proxy, method, request)  # noqa: E731
    now = ts(int(time.time() * 1000))
    cases: list[tuple[str, Any, int]] = [
        ("DescribeTopicStatus", apb.DescribeTopicStatusRequest(topic=R("NoSuchTopic")), Code.TOPIC_NOT_FOUND),
        ("DescribeTopicStatus", apb.DescribeTopicStatusRequest(), Code.ILLEGAL_TOPIC),
        ("GetTopicRoute", apb.GetTopicRouteRequest(topic=R("NoSuchTopic")), Code.TOPIC_NOT_FOUND),
        ("AdminSendMessage", apb.AdminSendMessageRequest(topic=R("NoSuchTopic"), body=b"x"), Code.TOPIC_NOT_FOUND),
        ("AdminSendMessage", apb.AdminSendMessageRequest(topic=R(OTHER)), Code.MESSAGE_BODY_EMPTY),
        ("QueryMessage", apb.ListMessageRequest(topic=R("NoSuchTopic"), message_key="k"), Code.TOPIC_NOT_FOUND),
        ("QueryMessage", apb.ListMessageRequest(topic=R(OTHER)), Code.BAD_REQUEST),
        ("QueryMessage", apb.ListMessageRequest(topic=R(OTHER), message_key="k", scroll_id="x"), Code.BAD_REQUEST),
        ("ListSubscription", apb.ListSubscriptionRequest(), Code.BAD_REQUEST),
        ("ListSubscription", apb.ListSubscriptionRequest(group=R("NoSuchGroup")), Code.CONSUMER_GROUP_NOT_FOUND),
        ("DescribeSubscription", apb.DescribeSubscriptionRequest(topic=R("NoSuchTopic")), Code.TOPIC_NOT_FOUND),
        ("DeleteSubscription", apb.DeleteSubscriptionRequest(group=R("NoSuchGroup"), topic=R(OTHER)),
         Code.CONSUMER_GROUP_NOT_FOUND),
        ("DeleteSubscription", apb.DeleteSubscriptionRequest(group=R(IDLE)), Code.ILLEGAL_TOPIC),
        ("DescribeGroupAccumulation", apb.DescribeGroupAccumulationRequest(group=R("NoSuchGroup")),
         Code.CONSUMER_GROUP_NOT_FOUND),
        ("DescribeGroupAccumulation", apb.DescribeGroupAccumulationRequest(), Code.ILLEGAL_CONSUMER_GROUP),
        ("DescribeGroupAccumulation", apb.DescribeGroupAccumulationRequest(group=R(IDLE), topics=[R("NoSuchTopic")]),
         Code.TOPIC_NOT_FOUND),
        ("ListConsumerConnection", apb.ListConsumerConnectionRequest(group=R("NoSuchGroup")),
         Code.CONSUMER_GROUP_NOT_FOUND),
        ("ResetGroupOffset", apb.ResetGroupOffsetRequest(group=R(IDLE), topic=R(OTHER)), Code.BAD_REQUEST),
        ("ResetGroupOffset", apb.ResetGroupOffsetRequest(group=R(IDLE), topic=R("NoSuchTopic"), reset_timestamp=now),
         Code.TOPIC_NOT_FOUND),
        ("ResetGroupOffset", apb.ResetGroupOffsetRequest(group=R("NoSuchGroup"), topic=R(OTHER), reset_timestamp=now),
         Code.CONSUMER_GROUP_NOT_FOUND),
        ("GetConsumerRunningInfo", apb.GetConsumerRunningInfoRequest(group=R(IDLE)), Code.CLIENT_ID_REQUIRED),
        ("GetConsumerRunningInfo", apb.GetConsumerRunningInfoRequest(group=R(IDLE), client_id="nobody@1"),
         Code.NOT_FOUND),
        ("GetConsumerRunningInfo", apb.GetConsumerRunningInfoRequest(group=R("NoSuchGroup"), client_id="x"),
         Code.CONSUMER_GROUP_NOT_FOUND),
        ("PrintThreadStackTrace", apb.PrintThreadStackTraceRequest(group=R(IDLE), client_id="nobody@1"),
         Code.NOT_FOUND),
        ("VerifyMessage", apb.VerifyMessageRequest(group=R(IDLE), topic=R(OTHER), client_id="nobody@1",
                                                   message_id="0123456789ABCDEF0123456789ABCDEF"),
         Code.MESSAGE_NOT_FOUND),
        ("VerifyMessage", apb.VerifyMessageRequest(group=R(IDLE), topic=R(OTHER), client_id="c"),
         Code.ILLEGAL_MESSAGE_ID),
        ("QueryTimeSpan", apb.QueryTimeSpanRequest(group=R("NoSuchGroup")), Code.CONSUMER_GROUP_NOT_FOUND),
        ("QueryTimeSpan", apb.QueryTimeSpanRequest(group=R(IDLE), topics=[R("NoSuchTopic")]), Code.TOPIC_NOT_FOUND),
    ]
    for method, request, code in cases:
        answer = await call(method, request)
        assert answer.status.code == code, f"{method} {request}: {answer.status}"
    # the proxy keeps serving
    assert (await call("GetProxyRuntimeStats", apb.GetProxyRuntimeStatsRequest())).status.code == Code.OK


async def test_acl_allows_and_denies_admin_rpcs(cluster: Cluster) -> None:
    async def call(method: str, request: Any, who: tuple[str, str] | None) -> Any:
        return await admin_call(cluster.acl_proxy, method, request, who)
    admin = (ADMIN["username"], ADMIN["password"])
    accumulation = apb.DescribeGroupAccumulationRequest(group=R(IDLE), topics=[R(OTHER)])
    assert (await call("DescribeGroupAccumulation", accumulation, admin)).status.code == Code.OK
    assert (await call("DescribeGroupAccumulation", accumulation, BOB)).status.code == Code.OK
    anonymous = await call("DescribeGroupAccumulation", accumulation, None)
    assert anonymous.status.code == Code.UNAUTHORIZED, anonymous.status
    wrong = await call("DescribeGroupAccumulation", accumulation, (BOB[0], "not-the-secret"))
    assert wrong.status.code == Code.UNAUTHORIZED and "signature" in wrong.status.message
    now = ts(int(time.time() * 1000))
    for method, request in (("ResetGroupOffset", apb.ResetGroupOffsetRequest(group=R(IDLE), topic=R(OTHER),
                                                                            reset_timestamp=now)),
                            ("GetProxyRuntimeStats", apb.GetProxyRuntimeStatsRequest()),
                            ("AdminSendMessage", apb.AdminSendMessageRequest(topic=R(OTHER), body=b"x")),
                            ("DescribeTopicStatus", apb.DescribeTopicStatusRequest(topic=R("Elsewhere")))):
        denied = await call(method, request, BOB)
        assert denied.status.code == Code.UNAUTHORIZED and "User:bob has no permission" in denied.status.message, \
            (method, denied.status)
    assert (await call("GetProxyRuntimeStats", apb.GetProxyRuntimeStatsRequest(), admin)).status.code == Code.OK
    refused_level = await call("ChangeLogLevel", apb.ChangeLogLevelRequest(level=apb.ChangeLogLevelRequest.INFO), BOB)
    assert refused_level.remark.startswith("UNAUTHORIZED")


def test_cli_grpc_admin(cluster: Cluster) -> None:
    body = json.dumps({"group": {"name": IDLE}, "topics": [{"name": OTHER}]})
    done = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "grpcAdmin", "-p", cluster.proxy, "-m",
                           "DescribeGroupAccumulation", "-b", body, "--json"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"]["code"] == "OK" and OTHER in answer["topic_accumulation"]
    missing = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "grpcAdmin", "-p", cluster.proxy, "-m",
                              "DescribeTopicStatus", "-b", json.dumps({"topic": {"name": "NoSuchTopic"}})],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "TOPIC_NOT_FOUND" in missing.stderr, missing.stderr
