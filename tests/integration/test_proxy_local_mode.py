"""proxyMode=local: the proxy inside the broker's process (`orbitmq proxy -pm local -bc broker.conf`).

Real processes: a NameServer, and one process running the broker of broker.conf with its proxy in
local mode (services/proxy/local.py), which hands RemotingCommands to the broker's processors
in-process. The official Python client and the project's SDK send, receive, ack, keep FIFO order,
wait out a delay and resolve a transaction through a check-back; bad input is still answered with
apache.rocketmq.v2.Code; and the broker sees the proxy as a client without a TCP connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

from orbitmq import AsyncProducer, AsyncSimpleConsumer, ClientConfig
from orbitmq import Message as SdkMessage
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.receipt_handle import ReceiptHandle
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.interop import rawgrpc
from tests.interop.harness import CLUSTER_BROKER_KEYS, Cluster, unique
from tests.support import ProcessRunner, free_port
from tests.support.net import free_port_pair
from tests.support.services import write_broker_conf

Code = pb.Code


@pytest.fixture(scope="module")
def local_mode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("proxy-local-mode")
    runner = ProcessRunner(workdir)
    try:
        ns_port = free_port()
        namesrv = f"127.0.0.1:{ns_port}"
        runner.start("namesrv", [f"listenPort={ns_port}"], ready_port=ns_port, name="namesrv")
        broker_port = free_port_pair()
        conf = write_broker_conf(workdir / "broker.conf", broker_port, workdir / "store", namesrvAddr=namesrv,
                                 **CLUSTER_BROKER_KEYS, transactionCheckInterval=500, transactionTimeOut=1500)
        port = free_port()
        runner.start("proxy", ["-pm", "local", "-bc", str(conf), "-n", namesrv, "--port", str(port),
                               "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                               "grpcClientConsumerMaxLongPollingTimeoutMillis=3000",
                               "minInvisibleTimeMillsForRecv=1000", "defaultInvisibleTimeMills=3000"],
                     ready_port=port, ready_text="local mode with broker", name="broker-with-local-proxy")
        yield Cluster(runner, namesrv, f"127.0.0.1:{broker_port}", [f"127.0.0.1:{port}"])
    finally:
        runner.stop_all()


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    failed = any(getattr(getattr(request.node, f"rep_{p}", None), "failed", False) for p in ("setup", "call"))
    if failed and "local_mode" in request.fixturenames:
        print("\n===== logs =====\n" + request.getfixturevalue("local_mode").runner.report())


def _producer(endpoint: str, topic: str, checker: TransactionChecker | None = None) -> Producer:
    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,), checker)
    producer.startup()
    return producer


def _consumer(endpoint: str, group: str, topic: str) -> SimpleConsumer:
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    return consumer


def _message(topic: str, body: bytes, group: str | None = None) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    if group:
        msg.message_group = group
    return msg


def _receive(consumer: SimpleConsumer, count: int, deadline_s: float = 20) -> list:
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < deadline:
        batch = consumer.receive(32, 10)
        for m in batch:
            consumer.ack(m)
        got += batch
    return got


def test_official_client_send_receive_ack(local_mode: Cluster) -> None:
    topic = local_mode.create_topic(unique("LocalT"))
    group = local_mode.create_group(unique("LocalG"))
    producer = _producer(local_mode.proxy, topic)
    consumer = _consumer(local_mode.proxy, group, topic)
    try:
        ids = {producer.send(_message(topic, f"m{i}".encode())).message_id: f"m{i}".encode() for i in range(20)}
        got = _receive(consumer, len(ids))
        assert {m.message_id: m.body for m in got} == ids
        # acked: nothing comes back after the invisible time
        time.sleep(3.5)
        assert consumer.receive(32, 10) == []
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_fifo_order_per_message_group(local_mode: Cluster) -> None:
    topic = local_mode.create_topic(unique("LocalFifoT"), message_type="FIFO")
    group = local_mode.create_group(unique("LocalFifoG"), orderly=True)
    producer = _producer(local_mode.proxy, topic)
    consumer = _consumer(local_mode.proxy, group, topic)
    try:
        for i in range(12):
            producer.send(_message(topic, f"{i % 2}-{i // 2}".encode(), group=f"g{i % 2}"))
        got = _receive(consumer, 12)
        by_group: dict[str, list[bytes]] = {}
        for m in got:
            by_group.setdefault(m.message_group, []).append(m.body)
        assert by_group == {f"g{g}": [f"{g}-{k}".encode() for k in range(6)] for g in (0, 1)}
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_delay_message(local_mode: Cluster) -> None:
    topic = local_mode.create_topic(unique("LocalDelayT"), queues=1, message_type="DELAY")
    group = local_mode.create_group(unique("LocalDelayG"))
    producer = _producer(local_mode.proxy, topic)
    consumer = _consumer(local_mode.proxy, group, topic)
    try:
        msg = _message(topic, b"later")
        deliver_at = int(time.time()) + 2  # the Python client sends this field in seconds
        msg.delivery_timestamp = deliver_at
        message_id = producer.send(msg).message_id
        assert consumer.receive(16, 10) == []
        got = _receive(consumer, 1)
        assert [m.message_id for m in got] == [message_id]
        assert time.time() >= deliver_at - 1.0
    finally:
        producer.shutdown()
        consumer.shutdown()


class _Checker(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.message_id)
        return TransactionResolution.COMMIT


def test_transaction_commit_and_check_back(local_mode: Cluster) -> None:
    """CHECK_TRANSACTION_STATE from the broker runs the proxy's relay in-process, which asks the
    client over Telemetry; its answer commits the half message."""
    topic = local_mode.create_topic(unique("LocalTxT"), queues=2, message_type="TRANSACTION")
    group = local_mode.create_group(unique("LocalTxG"))
    checker = _Checker()
    producer = _producer(local_mode.proxy, topic, checker)
    consumer = _consumer(local_mode.proxy, group, topic)
    try:
        committed = producer.begin_transaction()
        committed_id = producer.send(_message(topic, b"committed"), committed).message_id
        committed.commit()
        orphan = producer.begin_transaction()
        orphan_id = producer.send(_message(topic, b"orphan"), orphan).message_id  # left to the check-back
        got = _receive(consumer, 2, deadline_s=30)
        assert {m.message_id: m.body for m in got} == {committed_id: b"committed", orphan_id: b"orphan"}
        assert orphan_id in checker.checked and committed_id not in checker.checked
    finally:
        producer.shutdown()
        consumer.shutdown()


async def test_sdk_send_receive_ack(local_mode: Cluster) -> None:
    topic = local_mode.create_topic(unique("LocalSdkT"))
    group = local_mode.create_group(unique("LocalSdkG"))
    config = ClientConfig(local_mode.proxy)
    async with AsyncProducer(config, [topic]) as producer:
        sent = {(await producer.send(SdkMessage(topic, f"s{i}".encode(), tag="T"))).message_id for i in range(10)}
    seen: set[str] = set()
    async with AsyncSimpleConsumer(ClientConfig(local_mode.proxy), group, {topic: "T"},
                                   long_polling_timeout=1) as consumer:
        deadline = time.monotonic() + 20
        while seen != sent and time.monotonic() < deadline:
            for m in await consumer.receive(16, 20):
                seen.add(m.message_id)
                await consumer.ack(m)
    assert seen == sent


def test_bad_input_answered_with_codes(local_mode: Cluster) -> None:
    topic = local_mode.create_topic(unique("LocalBadT"))
    group = local_mode.create_group(unique("LocalBadG"))
    channel, stub = local_mode.stub()
    with channel:
        resp = stub.SendMessage(spb.SendMessageRequest(messages=[rawgrpc.message("bad topic!", b"x")]),
                                metadata=rawgrpc.metadata(), timeout=10)
        assert resp.status.code == Code.ILLEGAL_TOPIC, resp
        resp = stub.SendMessage(spb.SendMessageRequest(messages=[rawgrpc.message(unique("Missing"), b"x")]),
                                metadata=rawgrpc.metadata(), timeout=10)
        assert resp.status.code == Code.TOPIC_NOT_FOUND, resp
        resp = stub.AckMessage(spb.AckMessageRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic),
            entries=[spb.AckMessageEntry(message_id="0A0B0C0D0E0F00000000000000000000", receipt_handle="garbage")]),
            metadata=rawgrpc.metadata(), timeout=10)
        assert resp.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE, resp


def test_broker_sees_the_proxy_without_a_connection(local_mode: Cluster) -> None:
    """The proxy's heartbeats for a gRPC producer reach the broker on the in-process channel: the
    producer group's one connection is the proxy at its gRPC address, and no TCP connection from the
    proxy's process exists (GET_PRODUCER_CONNECTION_LIST lists it as cluster mode's socket would)."""
    topic = local_mode.create_topic(unique("LocalConnT"))
    producer = _producer(local_mode.proxy, topic)
    try:
        producer.send(_message(topic, b"hello"))

        async def connections(api):
            deadline = time.monotonic() + 10
            while True:
                found = await api.invoke(local_mode.broker, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                         {"producerGroup": topic})
                if found.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
                    return found
                await asyncio.sleep(0.3)

        found = local_mode.api_call(connections)
        assert found.code == ResponseCode.SUCCESS, found
        assert local_mode.proxy.rsplit(":", 1)[1] in found.body.decode()
    finally:
        producer.shutdown()


def test_broker_enable_proxy_takes_the_brokers_name_server(procs: ProcessRunner, tmp_path) -> None:
    """`orbitmq broker --enable-proxy -c broker.conf -pc proxy.conf` (mqbroker --enable-proxy): the
    proxy in local mode in the broker's process; with no namesrvAddr of its own it routes through
    the broker's NameServer (broker.conf's namesrvAddr)."""
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    procs.start("namesrv", [f"listenPort={ns_port}"], ready_port=ns_port, name="namesrv")
    broker_port = free_port_pair()
    conf = write_broker_conf(tmp_path / "broker.conf", broker_port, tmp_path / "store", namesrvAddr=namesrv,
                             **CLUSTER_BROKER_KEYS)
    port = free_port()
    proxy_conf = tmp_path / "proxy.conf"
    proxy_conf.write_text(f"grpcServerPort={port}\nremotingListenPort=0\n", encoding="utf-8")
    procs.start("broker", ["--enable-proxy", "-c", str(conf), "-pc", str(proxy_conf)], ready_port=port,
                ready_text="local mode with broker", name="broker-enable-proxy")
    c = Cluster(procs, namesrv, f"127.0.0.1:{broker_port}", [f"127.0.0.1:{port}"])
    topic = c.create_topic(unique("EnableProxyT"))
    group = c.create_group(unique("EnableProxyG"))
    producer = _producer(c.proxy, topic)
    consumer = _consumer(c.proxy, group, topic)
    try:
        message_id = producer.send(_message(topic, b"via --enable-proxy")).message_id
        got = _receive(consumer, 1)
        assert [(m.message_id, m.body) for m in got] == [(message_id, b"via --enable-proxy")]
    finally:
        producer.shutdown()
        consumer.shutdown()


def _admin(local_mode: Cluster, *args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", local_mode.namesrv],
                          capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


async def test_consumer_status_and_consume_directly_reach_a_push_consumer(local_mode: Cluster, tmp_path) -> None:
    """GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY from the broker go to the channel
    the proxy's heartbeats came on, the in-process one: the proxy's relay answers or forwards them
    over Telemetry to the SDK's push consumer."""
    from orbitmq import AsyncPushConsumer, ConsumeResult

    topic = local_mode.create_topic(unique("LocalStatusT"), queues=1)
    group = local_mode.create_group(unique("LocalStatusG"))
    config = ClientConfig(local_mode.proxy)
    async with AsyncProducer(config, [topic]) as producer:
        receipt = await producer.send(SdkMessage(topic, b"status", tag="TagA"))
    consumed: list[str] = []
    first = asyncio.Event()

    async def listener(message) -> ConsumeResult:
        consumed.append(message.message_id)
        first.set()
        return ConsumeResult.SUCCESS

    async with AsyncPushConsumer(config, group, {topic: "TagA"}, listener, long_polling_timeout=1) as consumer:
        await asyncio.wait_for(first.wait(), 20)
        assert consumed == [receipt.message_id]
        listing = await asyncio.to_thread(_admin, local_mode, "consumerStatus", "-g", group, "--json", cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        info = json.loads(listing.stdout)["runningInfo"][consumer.client_id]
        assert info["properties"]["consumerGroup"] == group
        direct = await asyncio.to_thread(_admin, local_mode, "queryMsgById", "-i", receipt.message_id, "-t", topic,
                                         "-g", group, "-d", consumer.client_id)
        assert direct.returncode == 0, direct.stderr
        assert "consumeResult=CR_SUCCESS" in direct.stdout
        assert consumed == [receipt.message_id] * 2


def _broker_of(message: pb.Message) -> str:
    """The broker set a delivered message was popped from, as its receipt handle names it."""
    return ReceiptHandle.decode(message.system_properties.receipt_handle).broker_name


def test_two_brokers_each_with_a_local_proxy(procs: ProcessRunner, tmp_path) -> None:
    """Two broker sets, each process running its proxy in local mode. A topic on both is sent to
    and received from the proxy's own broker (LocalTopicRouteService's current view); a topic only
    the other broker has is sent and popped over Remoting; a receipt handle is acked through either
    proxy, the one of the other broker reaching it over Remoting (proxies stay interchangeable)."""
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    procs.start("namesrv", [f"listenPort={ns_port}"], ready_port=ns_port, name="namesrv")
    sets: dict[str, Cluster] = {}
    for name in ("broker-a", "broker-b"):
        broker_port = free_port_pair()
        conf = write_broker_conf(tmp_path / f"{name}.conf", broker_port, tmp_path / name, namesrvAddr=namesrv,
                                 brokerName=name, **CLUSTER_BROKER_KEYS)
        port = free_port()
        procs.start("proxy", ["-pm", "local", "-bc", str(conf), "-n", namesrv, "--port", str(port),
                              "remotingListenPort=0"],
                    ready_port=port, ready_text="local mode with broker", name=f"{name}-with-proxy")
        sets[name] = Cluster(procs, namesrv, f"127.0.0.1:{broker_port}", [f"127.0.0.1:{port}"])
    a, b = sets["broker-a"], sets["broker-b"]
    both, only_b = unique("BothT"), unique("OnlyBT")
    a.create_topic(both)
    b.create_topic(both)
    b.create_topic(only_b)
    group = unique("TwoG")
    a.create_group(group)
    b.create_group(group)

    def received(stub, topic: str, count: int) -> list[pb.Message]:
        got: list[pb.Message] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            got += rawgrpc.receive(stub, topic, group, polling_ms=1000)[1]
        return got

    ch_a, stub_a = a.stub()
    ch_b, stub_b = b.stub()
    with ch_a, ch_b:
        for topic, count in ((both, 8), (only_b, 4)):
            resp = rawgrpc.send(stub_a, *(rawgrpc.message(topic, f"{topic}-{i}".encode()) for i in range(count)))
            assert resp.status.code == Code.OK, resp
        on_both = received(stub_a, both, 8)
        assert len(on_both) == 8
        assert {_broker_of(m) for m in on_both} == {"broker-a"}
        on_b = received(stub_a, only_b, 4)
        assert len(on_b) == 4
        assert {_broker_of(m) for m in on_b} == {"broker-b"}
        # broker-a's handles through broker-b's proxy, broker-b's through broker-a's
        acked = rawgrpc.ack(stub_b, both, group, *on_both)
        assert [e.status.code for e in acked.entries] == [Code.OK] * 8, acked
        acked = rawgrpc.ack(stub_a, only_b, group, *on_b)
        assert [e.status.code for e in acked.entries] == [Code.OK] * 4, acked


def test_bench_proxy_mode_measures_every_mode_in_one_run() -> None:
    """`orbitmq bench proxy-mode`: sends and the drain in each mode, medians and ratios."""
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", "proxy-mode", "-d", "0.5", "-n", "200", "-r", "1",
                          "-w", "4", "--json"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(summary["medians"]) == {"cluster", "cluster-1p", "local"}
    for mode, (result,) in summary["runs"].items():
        assert result["send"]["messages"] > 0 and result["send"]["errors"] == 0, mode
        drained = result["drain"]
        assert (drained["received"], drained["missing"], drained["duplicates"]) == (200, 0, 0), mode


def test_acl_through_a_local_mode_proxy(procs: ProcessRunner, tmp_path) -> None:
    """ACL 2.0 on both: the proxy checks its clients as in cluster mode, and its own in-process
    calls, signed with the inner credentials, pass the broker's guard."""
    from tests.interop.test_auth import ADMIN, INNER, AuthCluster, entry

    inner = json.dumps(INNER)
    init_user = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    procs.start("namesrv", [f"listenPort={ns_port}", "authenticationEnabled=true",
                            f"initAuthenticationUser={init_user}", f"innerClientAuthenticationCredentials={inner}"],
                ready_port=ns_port, name="namesrv")
    broker_port = free_port_pair()
    conf = write_broker_conf(tmp_path / "broker.conf", broker_port, tmp_path / "store", namesrvAddr=namesrv,
                             **CLUSTER_BROKER_KEYS, authenticationEnabled="true", authorizationEnabled="true",
                             initAuthenticationUser=init_user, innerClientAuthenticationCredentials=inner)
    port = free_port()
    procs.start("proxy", ["-pm", "local", "-bc", str(conf), "-n", namesrv, "--port", str(port),
                          "authenticationEnabled=true", "authorizationEnabled=true",
                          f"innerClientAuthenticationCredentials={inner}", "userCacheRefreshSecond=1",
                          "aclCacheRefreshSecond=1", "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                          "minInvisibleTimeMillsForRecv=1000"],
                ready_port=port, ready_text="local mode with broker", name="broker-with-local-proxy")
    c = AuthCluster(procs, namesrv, f"127.0.0.1:{broker_port}", f"127.0.0.1:{port}")
    topic = c.topic(unique("LocalAclT"))
    group = c.group(unique("LocalAclG"))
    c.user("frank", "frank-pw", [entry(f"Topic:{topic}", ["Pub"])])
    channel, stub = Cluster(procs, namesrv, c.broker, [c.proxy]).stub()
    with channel:
        def signed(ak: str, sk: str) -> list[tuple[str, str]]:
            from orbitmq.auth.signature import grpc_auth_headers
            return rawgrpc.metadata() + grpc_auth_headers(ak, sk)

        assert rawgrpc.send(stub, rawgrpc.message(topic), md=rawgrpc.metadata()).status.code == Code.UNAUTHORIZED
        deadline = time.monotonic() + 10
        while True:  # the proxy's user cache refreshes every second
            status = rawgrpc.send(stub, rawgrpc.message(topic, b"from frank"), md=signed("frank", "frank-pw")).status
            if status.code == Code.OK or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert status.code == Code.OK, status
        status, _, _ = rawgrpc.receive(stub, topic, group, md=signed("frank", "frank-pw"), polling_ms=1000)
        assert status is not None and status.code == Code.UNAUTHORIZED and "Sub" in status.message
        status, got, _ = rawgrpc.receive(stub, topic, group, md=signed(*ADMIN), polling_ms=1000)
        assert [m.body for m in got] == [b"from frank"], status
        assert rawgrpc.ack(stub, topic, group, *got, md=signed(*ADMIN)).status.code == Code.OK
