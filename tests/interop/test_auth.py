"""ACL 2.0 end to end: NameServer, broker and proxy with authentication and authorization on, the
official Python client and raw gRPC calls (status codes checked), ACL changes taking effect live.

Users and ACLs are managed over Remoting (AUTH_* codes) signed as the init Super user.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from orbitmq.auth.client import install_signing
from orbitmq.auth.signature import grpc_auth_headers
from orbitmq.client import MQClientAPI
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.remoting.codes import RequestCode
from tests.interop import rawgrpc
from tests.interop.harness import CLUSTER_BROKER_KEYS, _run, unique
from tests.support import ProcessRunner, free_port, running, start_broker
from tests.support.prom import scrape

NODE_DIR = Path(__file__).parent / "node"
ADMIN = ("admin", "admin-secret")
INNER = {"accessKey": "inner", "secretKey": "inner-secret"}
UNAUTHORIZED = pb.Code.UNAUTHORIZED


class AuthCluster:
    def __init__(self, runner: ProcessRunner, namesrv: str, broker: str, proxy: str,
                 broker_metrics: str = "", proxy_metrics: str = "") -> None:
        self.runner, self.namesrv, self.broker, self.proxy = runner, namesrv, broker, proxy
        self.broker_metrics, self.proxy_metrics = broker_metrics, proxy_metrics

    def admin(self, fn):  # noqa: ANN001 -- fn(api) coroutine function
        async def go():
            api = MQClientAPI(timeout=10)
            install_signing(api.remoting, ADMIN)
            try:
                return await fn(api)
            finally:
                await api.close()
        return _run(go())

    def auth_call(self, code: int, header: dict[str, str], body: dict | None = None) -> None:
        self.admin(lambda api: api.call(self.broker, code, header, json.dumps(body).encode() if body else b""))

    def topic(self, name: str, attributes: dict[str, str] | None = None) -> str:
        async def go(api: MQClientAPI) -> None:
            await api.create_topic(self.broker, TopicConfig(name, 2, 2, attributes=attributes or {}))
            deadline = time.monotonic() + 10
            while True:
                try:
                    await api.get_topic_route(self.namesrv, name)
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
        self.admin(go)
        return name

    def group(self, name: str) -> str:
        self.admin(lambda api: api.create_subscription_group(self.broker, SubscriptionGroupConfig(name)))
        return name

    def user(self, name: str, password: str, acl_entries: list[dict] | None = None) -> None:
        self.auth_call(RequestCode.AUTH_CREATE_USER, {"username": name},
                       {"username": name, "password": password, "userType": "Normal"})
        if acl_entries:
            self.acl(RequestCode.AUTH_CREATE_ACL, name, acl_entries)

    def acl(self, code: int, name: str, entries: list[dict]) -> None:
        self.auth_call(code, {"subject": f"User:{name}"},
                       {"subject": f"User:{name}", "policies": [{"policyType": "Custom", "entries": entries}]})


def entry(resource: str, actions: list[str], decision: str = "Allow", ips: list[str] | None = None) -> dict:
    return {"resource": resource, "actions": actions, "decision": decision, "sourceIps": ips or []}


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    with acl_cluster_running(tmp_path_factory.mktemp("auth-cluster")) as cluster:
        yield cluster


@contextlib.contextmanager
def acl_cluster_running(workdir: Path, broker_keys: dict[str, str] | None = None,
                        proxy_args: tuple[str, ...] = ()) -> Iterator[AuthCluster]:
    """NameServer, broker and proxy with authentication and authorization on (``broker_keys`` and
    ``proxy_args`` on top: tests/interop/java/test_java_grpc.py adds TLS and short transaction checks)."""
    inner = json.dumps(INNER)
    ns_port, broker_port, proxy_port = free_port(), free_port(), free_port()
    broker_metrics_port, proxy_metrics_port = free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    with running(workdir) as runner:
        init_user = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
        # The NameServer knows only the Super users of its own config (init user, inner client).
        runner.start("namesrv", [f"listenPort={ns_port}", "authenticationEnabled=true",
                                 f"initAuthenticationUser={init_user}",
                                 f"innerClientAuthenticationCredentials={inner}"], ready_port=ns_port, name="namesrv")
        start_broker(runner, workdir, namesrv, port=broker_port, **CLUSTER_BROKER_KEYS,
                     authenticationEnabled="true", authorizationEnabled="true", initAuthenticationUser=init_user,
                     innerClientAuthenticationCredentials=inner, metricsExporterType="PROM",
                     metricsPromExporterPort=broker_metrics_port, **(broker_keys or {}))
        runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "authenticationEnabled=true",
                               "authorizationEnabled=true", f"innerClientAuthenticationCredentials={inner}",
                               "userCacheRefreshSecond=1", "aclCacheRefreshSecond=1",
                               "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                               "minInvisibleTimeMillsForRecv=1000", "metricsExporterType=PROM",
                               f"metricsPromExporterPort={proxy_metrics_port}", *proxy_args],
                     ready_port=proxy_port, name="proxy")
        yield AuthCluster(runner, namesrv, f"127.0.0.1:{broker_port}", f"127.0.0.1:{proxy_port}",
                          f"127.0.0.1:{broker_metrics_port}", f"127.0.0.1:{proxy_metrics_port}")


@pytest.fixture
def stub(acl_cluster: AuthCluster) -> Iterator[sgrpc.MessagingServiceStub]:
    channel = grpc.insecure_channel(acl_cluster.proxy)
    try:
        yield sgrpc.MessagingServiceStub(channel)
    finally:
        channel.close()


def signed(ak: str, sk: str, stamp: str | None = None) -> list[tuple[str, str]]:
    return rawgrpc.metadata() + grpc_auth_headers(ak, sk, stamp)


def config(cluster: AuthCluster, ak: str, sk: str) -> ClientConfiguration:
    return ClientConfiguration(cluster.proxy, Credentials(ak, sk), request_timeout=10)


def py_send(cluster: AuthCluster, creds: tuple[str, str], topic: str, body: bytes = b"hello") -> str:
    producer = Producer(config(cluster, *creds), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic = topic
        msg.body = body
        return producer.send(msg).message_id
    finally:
        producer.shutdown()


def test_authentication_refusals_carry_unauthorized(acl_cluster: AuthCluster, stub) -> None:
    topic = acl_cluster.topic(unique("AuthT"))
    acl_cluster.user("frank", "frank-pw", [entry(f"Topic:{topic}", ["Pub"])])
    acl_cluster.user("off", "off-pw", [entry("*", ["All"])])
    acl_cluster.auth_call(RequestCode.AUTH_UPDATE_USER, {"username": "off"}, {"userStatus": "disable"})
    msg = rawgrpc.message(topic)
    stale = (datetime.now() - timedelta(hours=2)).strftime("%Y%m%dT%H%M%SZ")
    cases = [(rawgrpc.metadata(), "username cannot be null"),
             (signed("frank", "wrong"), "check signature failed"),
             (signed("nobody", "x"), "User:nobody is not found"),
             (signed("off", "off-pw"), "User:off is disabled"),
             (signed("frank", "frank-pw", stale), "authenticationMaxClockSkewMillis")]
    for md, reason in cases:
        status = rawgrpc.send(stub, msg, md=md).status
        assert status.code == UNAUTHORIZED and reason in status.message, (reason, status)
    assert rawgrpc.send(stub, msg, md=signed("frank", "frank-pw")).status.code == pb.Code.OK
    # server streams and Telemetry are checked too
    status, _msgs, _ = rawgrpc.receive(stub, topic, "G", md=rawgrpc.metadata(), polling_ms=1000)
    assert status is not None and status.code == UNAUTHORIZED
    replies = list(stub.Telemetry(iter([spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER))]),
                                  metadata=signed("frank", "wrong"), timeout=10))
    assert replies and replies[0].status.code == UNAUTHORIZED


def test_official_client_right_and_wrong_credentials(acl_cluster: AuthCluster,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    topic = acl_cluster.topic(unique("AuthPy"))
    group = acl_cluster.group(unique("AuthPyG"))
    assert py_send(acl_cluster, ADMIN, topic, b"as admin")
    consumer = SimpleConsumer(config(acl_cluster, *ADMIN), group, {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    try:
        got = []
        end = time.monotonic() + 20
        while not got and time.monotonic() < end:
            got = consumer.receive(16, 15)
        assert [m.body for m in got] == [b"as admin"]
        consumer.ack(got[0])
    finally:
        consumer.shutdown()
    # The client fails its route query (UNAUTHORIZED, logged by the client) and the send with it.
    for creds, reason in (((ADMIN[0], "wrong-secret"), "40100, check signature failed for User:admin"),
                          (("ghost", "x"), "40100, User:ghost is not found")):
        caplog.clear()
        with pytest.raises(Exception, match="route"):
            py_send(acl_cluster, creds, topic)
        assert reason in caplog.text


def test_normal_user_pub_on_prefix_but_not_sub(acl_cluster: AuthCluster, stub,
                                               caplog: pytest.LogCaptureFixture) -> None:
    prefix = unique("orders").replace("_", "-") + "-"
    orders = acl_cluster.topic(prefix + "eu")
    other = acl_cluster.topic(unique("payments"))
    group = acl_cluster.group(unique("AuthG"))
    acl_cluster.user("bob", "bob-pw", [entry(f"Topic:{prefix}*", ["Pub"])])
    assert py_send(acl_cluster, ("bob", "bob-pw"), orders)
    # Elsewhere even the route is refused (QueryRoute needs Pub or Sub), and so is a raw send.
    caplog.clear()
    with pytest.raises(Exception, match="route"):
        py_send(acl_cluster, ("bob", "bob-pw"), other)
    assert f"40100, User:bob has no permission to access Topic:{other}" in caplog.text
    status = rawgrpc.send(stub, rawgrpc.message(other), md=signed("bob", "bob-pw")).status
    assert status.code == UNAUTHORIZED and f"Topic:{other}" in status.message and "Pub" in status.message
    status, _msgs, _ = rawgrpc.receive(stub, orders, group, md=signed("bob", "bob-pw"), polling_ms=1000)
    assert status.code == UNAUTHORIZED and "Sub" in status.message and "User:bob" in status.message
    # granting Sub on the group and the topic takes effect without a restart
    acl_cluster.acl(RequestCode.AUTH_UPDATE_ACL, "bob", [entry(f"Topic:{prefix}*", ["Pub", "Sub"]),
                                                         entry(f"Group:{group}", ["Sub"])])
    time.sleep(2.5)  # aclCacheRefreshSecond=1 on the proxy, plus its 1 s decision cache
    status, msgs, _ = rawgrpc.receive(stub, orders, group, md=signed("bob", "bob-pw"), polling_ms=2000)
    assert status is None or status.code in (pb.Code.OK, pb.Code.MESSAGE_NOT_FOUND), status
    assert [m.body for m in msgs] == [b"hello"]


def test_deny_beats_allow_on_a_tie_and_source_ips(acl_cluster: AuthCluster, stub) -> None:
    tie = acl_cluster.topic(unique("tie"))
    acl_cluster.user("tina", "tina-pw", [entry(f"Topic:{tie}", ["Pub"], "Allow"),
                                         entry(f"Topic:{tie}", ["Pub"], "Deny")])
    status = rawgrpc.send(stub, rawgrpc.message(tie), md=signed("tina", "tina-pw")).status
    assert status.code == UNAUTHORIZED and "Deny" in status.message

    net = acl_cluster.topic(unique("net"))
    acl_cluster.user("ivan", "ivan-pw", [entry(f"Topic:{net}", ["Pub"], ips=["10.0.0.0/8"])])
    status = rawgrpc.send(stub, rawgrpc.message(net), md=signed("ivan", "ivan-pw")).status
    assert status.code == UNAUTHORIZED and "from 127.0.0.1" in status.message
    acl_cluster.acl(RequestCode.AUTH_UPDATE_ACL, "ivan", [entry(f"Topic:{net}", ["Pub"], ips=["127.0.0.0/24"])])
    time.sleep(2.5)
    assert rawgrpc.send(stub, rawgrpc.message(net), md=signed("ivan", "ivan-pw")).status.code == pb.Code.OK


def test_node_client_signs_and_is_accepted(acl_cluster: AuthCluster) -> None:
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir():
        pytest.skip("the Node.js client is not installed (make setup)")
    topic = acl_cluster.topic(unique("NodeAuthT"))
    group = acl_cluster.group(unique("NodeAuthG"))
    run = subprocess.run([node, "send_receive.js", acl_cluster.proxy, topic, group, "2", *ADMIN], cwd=NODE_DIR,
                         capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(result["sent"]) == 2 and result["acked"] == 2
    refused = subprocess.run([node, "send_receive.js", acl_cluster.proxy, topic, group, "1", ADMIN[0], "wrong"],
                             cwd=NODE_DIR, capture_output=True, text=True, timeout=90)
    assert refused.returncode != 0 and "check signature failed" in refused.stderr


def test_telemetry_settings_are_authorized(acl_cluster: AuthCluster, stub) -> None:
    mine = acl_cluster.topic(unique("TelMine"))
    theirs = acl_cluster.topic(unique("TelTheirs"))
    acl_cluster.user("tom", "tom-pw", [entry(f"Topic:{mine}", ["Pub"])])

    def settings(topic: str) -> list[spb.TelemetryCommand]:
        command = spb.TelemetryCommand(settings=pb.Settings(
            client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)])))
        return list(stub.Telemetry(iter([command]), metadata=signed("tom", "tom-pw"), timeout=10))

    replies = settings(mine)
    assert replies and all(r.status.code in (0, pb.Code.OK) for r in replies), replies
    replies = settings(theirs)
    assert replies[-1].status.code == UNAUTHORIZED and f"Topic:{theirs}" in replies[-1].status.message


def test_denials_are_counted_in_the_metrics(acl_cluster: AuthCluster, stub) -> None:
    """rocketmq_auth_denied_total{protocol_type, reason} on the proxy (gRPC) and the broker (Remoting)."""
    topic = acl_cluster.topic(unique("AuthCount"))
    acl_cluster.user("gina", "gina-pw", [entry(f"Topic:{topic}", ["Sub"])])

    def denied(addr: str, protocol: str, reason: str) -> float:
        return scrape(addr).value("rocketmq_auth_denied_total", default=0.0, protocol_type=protocol, reason=reason)

    before_authn = denied(acl_cluster.proxy_metrics, "grpc", "authentication")
    before_authz = denied(acl_cluster.proxy_metrics, "grpc", "authorization")
    msg = rawgrpc.message(topic)
    assert rawgrpc.send(stub, msg, md=signed("gina", "wrong")).status.code == UNAUTHORIZED  # bad secret
    assert rawgrpc.send(stub, msg, md=signed("gina", "gina-pw")).status.code == UNAUTHORIZED  # Sub only
    deadline = time.monotonic() + 10
    while (denied(acl_cluster.proxy_metrics, "grpc", "authentication") < before_authn + 1
           or denied(acl_cluster.proxy_metrics, "grpc", "authorization") < before_authz + 1):
        assert time.monotonic() < deadline, scrape(acl_cluster.proxy_metrics).text
        time.sleep(0.2)

    # Remoting: an unsigned request to the broker is refused there and counted there.
    before = denied(acl_cluster.broker_metrics, "remoting", "authentication")

    async def unsigned() -> int:
        api = MQClientAPI(timeout=10)
        try:
            response = await api.invoke(acl_cluster.broker, RequestCode.GET_BROKER_CONFIG, {})
            return response.code
        finally:
            await api.close()

    assert _run(unsigned()) == 16  # NO_PERMISSION
    assert denied(acl_cluster.broker_metrics, "remoting", "authentication") == before + 1
