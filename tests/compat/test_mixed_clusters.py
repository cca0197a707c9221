"""OrbitMQ and Apache RocketMQ 5.5.0 (tests/support/apache.py) in one cluster (issue 24, part 2).

One cluster for the module, every server a real process on 127.0.0.1:

- an OrbitMQ NameServer and an Apache NameServer;
- an Apache broker (``apache-a``) and an OrbitMQ broker (``orbit-a``), both of DefaultCluster,
  each registered with both NameServers (``namesrvAddr=a;b``): so each NameServer has both kinds
  of broker;
- OrbitMQ's proxy in front of Apache's NameServer, Apache's proxy in front of OrbitMQ's.

A topic created on one broker only routes to it: ``through[...]`` is "this proxy in front of the
other kind's NameServer and broker", where the official Python client sends, receives, acks, FIFO,
delay and transactions with a check-back; a topic created on both brokers is the mixed cluster,
where one consumer group consumes every message from both and `orbitmq admin` and Apache's
mqadmin show the cluster and the route the same way through either NameServer.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from rocketmq.v5.exception import InternalErrorException

from orbitmq.common.route import parse_json
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique
from tests.interop.java.mqadmin.tools import live_clients, mqadmin, orbit, table
from tests.interop.java.test_java_grpc import received, run_client
from tests.support import ProcessFailed, ProcessRunner, free_port, running, start_broker, start_namesrv
from tests.support.apache import BOOT_TIMEOUT, Apache, ApacheBroker, wait_proxy, wait_registered

# Quick transaction check-backs on both brokers (BrokerConfig's names, the same on both sides).
TX_KEYS = {"transactionCheckInterval": "500", "transactionTimeOut": "1500"}
# Recall (off by default on both) for the Java client's recalled timer message.
BROKER_KEYS = {**TX_KEYS, "recallMessageEnable": "true"}
# Apache's broker writes the op messages that close a half message in batches, every
# transactionOpBatchInterval (3 s; TransactionalOpBatchService): with checks every 500 ms a half
# message already answered would be asked about, and committed, again meanwhile. OrbitMQ's broker
# writes them at once (it has no such key).
APACHE_BROKER_KEYS = {**BROKER_KEYS, "transactionOpBatchInterval": "100"}
# Shorter floors than the defaults (5 s polling, 10 s invisibility) keep receives quick; the names
# are ProxyConfig's, the same on both sides.
PROXY_KEYS = {"grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
              "grpcClientConsumerMaxLongPollingTimeoutMillis": 3000, "minInvisibleTimeMillsForRecv": 1000}
# Apache's proxy tells the brokers of a transactional producer's group only in its next
# heartbeat, every transactionHeartbeatPeriodSecond (20 s; ClusterTransactionService
# #scanProducerHeartBeat); a broker with no producer channel counts each 500 ms check toward
# transactionCheckMax (15) all the same, so the half message would be discarded before the group
# is known. OrbitMQ's proxy registers the group with the Settings.
APACHE_PROXY_KEYS = {"transactionHeartbeatPeriodSecond": 1}
Code = pb.Code


@dataclass
class Mixed:
    orbit_ns: str
    apache_ns: str
    apache_broker: ApacheBroker
    orbit_broker: str
    orbit_proxy: str
    apache_proxy: str
    through: dict[str, Cluster]  # "orbit-proxy" / "apache-proxy" -> that proxy and the other kind behind it

    def both(self) -> list[tuple[str, str]]:
        """(broker name, address) of both brokers."""
        return [("apache-a", self.apache_broker.addr), ("orbit-a", self.orbit_broker)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mixed]:
    workdir = tmp_path_factory.mktemp("mixed")
    started = time.monotonic()
    with running(workdir) as runner:
        apache = Apache(runner)
        _ns, orbit_ns = start_namesrv(runner, name="orbit-namesrv")
        _ans, apache_ns = apache.namesrv()
        both_ns = f"{apache_ns};{orbit_ns}"
        # The JVMs boot side by side while the OrbitMQ broker and proxy start. Apache's proxy
        # creates its heartbeat-sync topic on its cluster as it starts (AbstractSystemMessageSyncer
        # #createSysTopic) and exits when no broker is there yet: it comes after OrbitMQ's broker.
        a_broker = apache.broker(both_ns, broker_name="apache-a", wait=False, **APACHE_BROKER_KEYS)
        _b, orbit_broker = start_broker(runner, workdir, both_ns, name="orbit-broker", brokerName="orbit-a",
                                        mappedFileSizeCommitLog=64 * 1024 * 1024, **BROKER_KEYS)
        wait_registered(orbit_ns, "orbit-a", orbit_broker)
        a_proxy, apache_proxy, _ = apache.proxy(orbit_ns, wait=False, **PROXY_KEYS, **APACHE_PROXY_KEYS)
        port = free_port()
        runner.start("proxy", ["-n", apache_ns, "--port", str(port),
                               *(f"{k}={v}" for k, v in PROXY_KEYS.items())], ready_port=port, name="orbit-proxy")
        orbit_proxy = f"127.0.0.1:{port}"
        apache.wait_broker(a_broker, apache_ns)
        wait_registered(orbit_ns, "apache-a", a_broker.addr, a_broker.process)
        wait_registered(apache_ns, "orbit-a", orbit_broker)
        wait_proxy(a_proxy, apache_proxy)
        print(f"mixed cluster up in {time.monotonic() - started:.1f}s", file=sys.stderr)
        yield Mixed(orbit_ns, apache_ns, a_broker, orbit_broker, orbit_proxy, apache_proxy, {
            "orbit-proxy": Cluster(runner, apache_ns, a_broker.addr, [orbit_proxy]),
            "apache-proxy": Cluster(runner, orbit_ns, orbit_broker, [apache_proxy])})
        # Every server shuts down at once (the JVMs' shutdown hooks take seconds); stop_all then
        # waits for each and kills what lingers.
        for proc in runner.processes:
            proc.signal(signal.SIGTERM)


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    failed = any(getattr(getattr(request.node, f"rep_{p}", None), "failed", False) for p in ("setup", "call"))
    if failed and "mixed" in request.fixturenames:
        print("\n===== cluster logs =====\n"
              + request.getfixturevalue("mixed").through["orbit-proxy"].runner.report(), file=sys.stderr)


# ---- helpers -------------------------------------------------------------------------------------

def _config(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def _message(topic: str, body: bytes, tag: str = "T", key: str | None = None) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    msg.tag = tag
    msg.keys = key or body.decode()
    msg.add_property("origin", body.decode())
    return msg


def _consumer(endpoint: str, group: str, topic: str) -> SimpleConsumer:
    consumer = SimpleConsumer(_config(endpoint), group, {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    return consumer


def _receive(consumer: SimpleConsumer, count: int, deadline_s: float = 30.0, ack: bool = True,
             max_messages: int = 32, invisible_s: int = 10) -> list:
    """Receive until ``count`` messages came (acking each) or the deadline passed.

    The Python client starts a SimpleConsumer before its Settings reached the proxy; Apache's
    proxy answers a ReceiveMessage that comes first with INTERNAL_SERVER_ERROR ("settings" is
    null, ReceiveMessageActivity#receiveMessage). Only that answer is retried."""
    got: list = []
    end = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < end:
        try:
            batch = consumer.receive(max_messages, invisible_s)
        except InternalErrorException as e:
            if "settings" not in str(e):
                raise
            time.sleep(0.2)
            continue
        for m in batch:
            got.append(m)
            if ack:
                consumer.ack(m)
    return got


class Checker(TransactionChecker):
    """Answers check-backs by body (UNKNOWN when absent) and counts them."""

    def __init__(self) -> None:
        self.answers: dict[bytes, TransactionResolution] = {}
        self.checks: dict[bytes, int] = {}
        self.lock = threading.Lock()

    def check(self, message) -> TransactionResolution:
        with self.lock:
            self.checks[message.body] = self.checks.get(message.body, 0) + 1
            return self.answers.get(message.body, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED)

    def count(self, body: bytes) -> int:
        with self.lock:
            return self.checks.get(body, 0)


PATHS = ["orbit-proxy", "apache-proxy"]


# ---- one proxy in front of the other kind's NameServer and broker --------------------------------

@pytest.mark.parametrize("path", PATHS)
def test_send_receive_ack(mixed: Mixed, path: str) -> None:
    c = mixed.through[path]
    topic, group = c.create_topic(unique("MixN"), queues=2), c.create_group(unique("MixNG"))
    producer = Producer(_config(c.proxy), (topic,))
    producer.startup()
    try:
        sent = {producer.send(_message(topic, f"n-{i}".encode(), tag=f"T{i % 2}")).message_id: i for i in range(6)}
    finally:
        producer.shutdown()
    consumer = _consumer(c.proxy, group, topic)
    try:
        got = _receive(consumer, len(sent))
        assert sorted(m.message_id for m in got) == sorted(sent)
        for m in got:
            i = sent[m.message_id]
            assert (m.body, m.tag, m.keys, m.properties) == (f"n-{i}".encode(), f"T{i % 2}", {f"n-{i}"},
                                                             {"origin": f"n-{i}"})
            assert m.delivery_attempt == 1
        assert _receive(consumer, 1, deadline_s=2) == []  # all acked
    finally:
        consumer.shutdown()


@pytest.mark.parametrize("path", PATHS)
def test_tag_filter_redelivery_and_invisible_duration(mixed: Mixed, path: str) -> None:
    """A tag subscription gets only its tags; an unacked message comes again after its invisible
    time (the broker's POP revive) with delivery attempt 2, as does one whose invisible duration
    was changed; acked with the new handles, nothing comes back."""
    c = mixed.through[path]
    topic, group = c.create_topic(unique("MixR"), queues=1), c.create_group(unique("MixRG"))
    producer = Producer(_config(c.proxy), (topic,))
    producer.startup()
    try:
        ids = {producer.send(_message(topic, f"r-{i}".encode(), tag=tag)).message_id: tag
               for i, tag in enumerate(["A", "B", "A"])}
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(_config(c.proxy), group, {topic: FilterExpression("A")}, await_duration=1)
    consumer.startup()
    try:
        first = _receive(consumer, 2, ack=False, invisible_s=2)
        assert sorted(m.message_id for m in first) == sorted(i for i, tag in ids.items() if tag == "A")
        assert {m.tag for m in first} == {"A"} and {m.delivery_attempt for m in first} == {1}
        consumer.change_invisible_duration(first[1], 3)
        again = _receive(consumer, 2, ack=False, invisible_s=30)
        assert sorted(m.message_id for m in again) == sorted(m.message_id for m in first)
        assert {m.delivery_attempt for m in again} == {2}
        assert {(m.body, m.tag, m.topic) for m in again} == {(m.body, "A", topic) for m in first}
        for m in again:
            consumer.ack(m)
        assert _receive(consumer, 1, deadline_s=3) == []
    finally:
        consumer.shutdown()


@pytest.mark.parametrize("path", PATHS)
def test_fifo_order_per_message_group(mixed: Mixed, path: str) -> None:
    c = mixed.through[path]
    topic = c.create_topic(unique("MixF"), queues=2, message_type="FIFO")
    group = c.create_group(unique("MixFG"), orderly=True)
    producer = Producer(_config(c.proxy), (topic,))
    producer.startup()
    try:
        for i in range(5):
            for g in ("g0", "g1"):
                msg = _message(topic, f"{g}-{i}".encode())
                msg.message_group = g
                producer.send(msg)
    finally:
        producer.shutdown()
    consumer = _consumer(c.proxy, group, topic)
    try:
        got = _receive(consumer, 10)
        for g in ("g0", "g1"):
            assert [m.body for m in got if m.message_group == g] == [f"{g}-{i}".encode() for i in range(5)]
        assert len(got) == 10
    finally:
        consumer.shutdown()


@pytest.mark.parametrize("path", PATHS)
def test_delay_message_comes_at_its_time(mixed: Mixed, path: str) -> None:
    c = mixed.through[path]
    topic = c.create_topic(unique("MixD"), queues=1, message_type="DELAY")
    group = c.create_group(unique("MixDG"))
    consumer = _consumer(c.proxy, group, topic)
    producer = Producer(_config(c.proxy), (topic,))
    producer.startup()
    try:
        msg = _message(topic, b"later")
        deliver_at = int(time.time()) + 3  # the Python client sends this field in whole seconds
        msg.delivery_timestamp = deliver_at
        message_id = producer.send(msg).message_id
        got = _receive(consumer, 1, deadline_s=20)
        arrived = time.time()
        assert [m.message_id for m in got] == [message_id]
        assert arrived >= deliver_at - 1.0  # not before its (whole-second) time
    finally:
        producer.shutdown()
        consumer.shutdown()


@pytest.mark.parametrize("path", PATHS)
def test_transactions_commit_rollback_and_check_back(mixed: Mixed, path: str) -> None:
    c = mixed.through[path]
    topic = c.create_topic(unique("MixT"), queues=2, message_type="TRANSACTION")
    group = c.create_group(unique("MixTG"))
    checker = Checker()
    producer = Producer(_config(c.proxy), (topic,), checker)
    producer.startup()
    try:
        halves = {}
        for body in (b"commit", b"rollback", b"check-commit", b"check-rollback"):
            tx = producer.begin_transaction()
            producer.send(_message(topic, body), tx)
            halves[body] = tx
        halves[b"commit"].commit()
        halves[b"rollback"].rollback()
        # Left open: the broker asks back through the proxy; UNKNOWN first, then an answer.
        deadline = time.monotonic() + 30
        while (checker.count(b"check-commit") < 1 or checker.count(b"check-rollback") < 1) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert checker.count(b"check-commit") >= 1 and checker.count(b"check-rollback") >= 1
        checker.answers[b"check-commit"] = TransactionResolution.COMMIT
        checker.answers[b"check-rollback"] = TransactionResolution.ROLLBACK
        consumer = _consumer(c.proxy, group, topic)
        try:
            got = _receive(consumer, 2, deadline_s=30)
            assert sorted(m.body for m in got) == [b"check-commit", b"commit"]
            late = _receive(consumer, 1, deadline_s=4)
            assert [(m.body, m.message_id) for m in late] == [], [(m.message_id, m.body) for m in got]
        finally:
            consumer.shutdown()
        # Resolved transactions are not asked about again.
        settled = (checker.count(b"check-commit"), checker.count(b"check-rollback"))
        time.sleep(2)
        assert (checker.count(b"check-commit"), checker.count(b"check-rollback")) == settled
        assert checker.count(b"commit") == checker.count(b"rollback") == 0
    finally:
        producer.shutdown()


@pytest.mark.parametrize("path", PATHS)
def test_java_grpc_client(mixed: Mixed, path: str, tmp_path: Path) -> None:
    """rocketmq-client-java 5.2.0 (tests/interop/java/grpc): sync and async sends, FIFO, a delay
    message, a recalled timer message, and transactions answered by its TransactionChecker (an
    UNKNOWN answer is asked again), in one JVM."""
    c = mixed.through[path]
    normal, fifo = c.create_topic(unique("MixJN")), c.create_topic(unique("MixJF"), message_type="FIFO")
    delay, tx = c.create_topic(unique("MixJD"), message_type="DELAY"), c.create_topic(unique("MixJT"),
                                                                                       message_type="TRANSACTION")
    group, tx_group = c.create_group(unique("MixJG"), orderly=True), c.create_group(unique("MixJTG"))
    run = run_client(tmp_path, c.proxy, "+send", f"normal={normal}", f"fifo={fifo}", f"delay={delay}",
                     f"group={group}", "+transaction", f"topic={tx}", f"group={tx_group}")
    sent, got = {f[0]: f for f in run.of("send", "SENT")}, received(run, "send")
    expected = {f"sync-{i}" for i in range(3)} | {f"async-{i}" for i in range(3)} | {"delay-0"} | {
        f"fifo-{g}-{i}" for g in ("g0", "g1") for i in range(4)}
    assert set(got) == expected, run.stdout  # the recalled timer message never comes
    for key in expected:
        assert len(got[key]) == 1 and got[key][0][2] == sent[key][1] and got[key][0][5] == "true", got[key]
    for g in ("g0", "g1"):
        assert [f[0] for f in run.of("send", "RECV") if f[6] == g] == [f"fifo-{g}-{i}" for i in range(4)]
    assert int(got["delay-0"][0][4]) >= int(sent["delay-0"][2])
    assert run.of("send", "RECALLED") == [["recall-0", sent["recall-0"][1]]], run.stdout
    checks = {(f[0], f[1]) for f in run.of("transaction", "CHECK")}
    assert {key for key, _ in checks} == {"tx-check-commit", "tx-check-rollback", "tx-check-unknown"}, run.stdout
    assert {("tx-check-unknown", "1"), ("tx-check-unknown", "2")} <= checks
    assert sorted(f[0] for f in run.of("transaction", "RECV")) == ["tx-check-commit", "tx-check-unknown", "tx-commit"]


# Bad requests where Apache's proxy answers otherwise, on purpose (docs/compatibility.md, "Apache
# RocketMQ's servers"): (OrbitMQ's proxy, Apache's proxy). Apache's own proxy in front of its own
# broker answers as it does here in front of OrbitMQ's: the codes are the proxy's.
DELIBERATE = {
    "send-missing-topic": ("TOPIC_NOT_FOUND", "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"),
    "ack-bad-receipt-handle": ("INVALID_RECEIPT_HANDLE", "INTERNAL_SERVER_ERROR"),
    "change-invisible-bad-receipt-handle": ("INVALID_RECEIPT_HANDLE", "INTERNAL_SERVER_ERROR"),
    "end-transaction-bogus-id": ("INVALID_TRANSACTION_ID", "INTERNAL_SERVER_ERROR"),
}


def _bad_requests(c: Cluster) -> dict[str, tuple[str, str]]:
    """Raw gRPC calls a checking client would not make: each one's (Code name, message)."""
    topic, fifo = c.create_topic(unique("MixBad")), c.create_topic(unique("MixBadF"), message_type="FIFO")
    delay, group = c.create_topic(unique("MixBadD"), message_type="DELAY"), c.create_group(unique("MixBadG"))
    missing, some_id = unique("MixNoT"), rawgrpc.message(topic).system_properties.message_id
    far = rawgrpc.message(delay, message_type=pb.MessageType.DELAY)
    far.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 40 * 86_400_000)
    channel, stub = c.stub()
    md = rawgrpc.metadata()
    with channel:
        def send(message: pb.Message) -> pb.Status:
            return rawgrpc.send(stub, message, md=md).status

        out = {
            "query-route-missing-topic": stub.QueryRoute(spb.QueryRouteRequest(
                topic=pb.Resource(name=missing), endpoints=_endpoints(c.proxy)), metadata=md, timeout=10).status,
            "query-assignment-missing-topic": stub.QueryAssignment(spb.QueryAssignmentRequest(
                topic=pb.Resource(name=missing), group=pb.Resource(name=group), endpoints=_endpoints(c.proxy)),
                metadata=md, timeout=10).status,
            "heartbeat-without-settings": stub.Heartbeat(spb.HeartbeatRequest(
                client_type=pb.ClientType.SIMPLE_CONSUMER), metadata=md, timeout=10).status,
            "send-missing-topic": send(rawgrpc.message(missing)),
            "send-no-messages": stub.SendMessage(spb.SendMessageRequest(messages=[]), metadata=md, timeout=10).status,
            "send-body-too-large": send(rawgrpc.message(topic, b"x" * (4 * 1024 * 1024 + 1))),
            "send-empty-body": send(rawgrpc.message(topic, b"")),
            "send-tag-with-bar": send(rawgrpc.message(topic, tag="a|b")),
            "send-empty-message-id": send(rawgrpc.message(topic, message_id="")),
            "send-group-too-long": send(rawgrpc.message(fifo, group="g" * 65, message_type=pb.MessageType.FIFO)),
            "send-delivery-too-far": send(far),
            # the type comes from the properties (TopicMessageType#parseFromMessageProperty): a FIFO
            # message without a group is NORMAL, one with a group FIFO
            "send-fifo-without-group": send(rawgrpc.message(fifo, message_type=pb.MessageType.FIFO)),
            "send-fifo-to-normal-topic": send(rawgrpc.message(topic, group="g", message_type=pb.MessageType.FIFO)),
            "ack-bad-receipt-handle": stub.AckMessage(spb.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                entries=[spb.AckMessageEntry(message_id=some_id, receipt_handle="not-a-handle")]),
                metadata=md, timeout=10).status,
            "change-invisible-bad-receipt-handle": stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle="not-a-handle",
                invisible_duration=rawgrpc.duration(5000), message_id=some_id), metadata=md, timeout=10).status,
            "end-transaction-bogus-id": stub.EndTransaction(spb.EndTransactionRequest(
                topic=pb.Resource(name=topic), message_id=some_id, transaction_id="bogus",
                resolution=pb.TransactionResolution.COMMIT, source=pb.TransactionSource.SOURCE_CLIENT),
                metadata=md, timeout=10).status,
        }
    return {case: (Code.Name(status.code), status.message) for case, status in out.items()}


def test_bad_requests_get_the_same_codes_through_either_proxy(mixed: Mixed) -> None:
    """Each proxy in front of the other kind answers the same bad requests with the same Code,
    but the recorded deliberate deviations; where Apache's message is a plain text, the same text."""
    orbit_side, apache_side = (_bad_requests(mixed.through[path]) for path in PATHS)
    codes = {case: (orbit_side[case][0], apache_side[case][0]) for case in orbit_side}
    assert {case: pair for case, pair in codes.items() if pair[0] != pair[1]} == DELIBERATE, codes
    assert codes["send-fifo-without-group"] == codes["send-fifo-to-normal-topic"] == (
        "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE",) * 2
    assert codes["query-route-missing-topic"] == ("TOPIC_NOT_FOUND",) * 2
    for case in ("send-empty-body", "send-tag-with-bar", "send-empty-message-id", "send-group-too-long",
                 "send-delivery-too-far", "send-no-messages", "heartbeat-without-settings"):
        assert orbit_side[case] == apache_side[case], case


def _endpoints(addr: str) -> pb.Endpoints:
    host, port = addr.rsplit(":", 1)
    return pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))])


# ---- one cluster, both kinds of broker -----------------------------------------------------------

def _topic_on_both(mixed: Mixed, topic: str, queues: int = 2) -> None:
    for namesrv, broker in ((mixed.apache_ns, mixed.apache_broker.addr), (mixed.orbit_ns, mixed.orbit_broker)):
        view = Cluster(mixed.through["orbit-proxy"].runner, namesrv, broker, [])
        view.create_topic(topic, queues=queues)
    for namesrv in (mixed.apache_ns, mixed.orbit_ns):
        _wait_route(namesrv, topic, {"apache-a", "orbit-a"})


def _wait_route(namesrv: str, topic: str, brokers: set[str], timeout: float = 40.0) -> dict:
    """Until the route of ``topic`` from ``namesrv`` names every broker of ``brokers`` (a broker
    tells every NameServer of its list at once; the other registration is its next heartbeat)."""
    deadline = time.monotonic() + timeout
    while True:
        route = orbit(namesrv, "topicRoute", "-t", topic)
        if {q["brokerName"] for q in route["queueDatas"]} >= brokers or time.monotonic() > deadline:
            return route
        time.sleep(0.3)


def _sorted(value: Any) -> Any:
    """JSON with its lists in a canonical order (the NameServers' map iteration orders differ)."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_sorted(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def _raw(mixed: Mixed, namesrv: str, code: int, header: dict[str, str] | None) -> tuple:
    """A NameServer's answer: response code, remark, header fields, body as JSON in canonical order."""
    response = mixed.through["orbit-proxy"].api_call(lambda api: api.invoke(namesrv, code, header))
    body = _sorted(parse_json(response.body)) if response.body else None
    return response.code, response.remark, dict(response.ext_fields or {}), body


@pytest.mark.parametrize("ns_kind", ["apache", "orbit"])
def test_one_group_consumes_from_both_kinds_of_broker(mixed: Mixed, ns_kind: str) -> None:
    """Sent through the proxy in front of ``ns_kind``'s NameServer, spread over both brokers'
    queues, and consumed by one group through it."""
    namesrv, proxy = ((mixed.apache_ns, mixed.orbit_proxy) if ns_kind == "apache"
                      else (mixed.orbit_ns, mixed.apache_proxy))
    topic, group = unique("MixBoth"), unique("MixBothG")
    _topic_on_both(mixed, topic)
    for _name, broker in mixed.both():
        Cluster(mixed.through["orbit-proxy"].runner, namesrv, broker, []).create_group(group)
    count = 16
    producer = Producer(_config(proxy), (topic,))
    producer.startup()
    try:
        sent = {producer.send(_message(topic, f"b-{i}".encode())).message_id for i in range(count)}
    finally:
        producer.shutdown()
    stored = {name: sum(mixed.through["orbit-proxy"].api_call(
        lambda api, b=broker, q=q: api.get_max_offset(b, topic, q)) for q in range(2)) for name, broker in mixed.both()}
    assert sum(stored.values()) == count and all(stored.values()), stored  # both brokers hold some
    consumer = _consumer(proxy, group, topic)
    try:
        got = _receive(consumer, count)
        assert sorted(m.message_id for m in got) == sorted(sent)
        assert _receive(consumer, 1, deadline_s=2) == []
    finally:
        consumer.shutdown()


@pytest.mark.parametrize("ns_kind", ["apache", "orbit"])
def test_remoting_clients_rebalance_over_both_kinds_of_broker(mixed: Mixed, ns_kind: str, tmp_path: Path) -> None:
    """rocketmq-client 5.5.0's DefaultMQProducer and DefaultMQPushConsumer on ``ns_kind``'s
    NameServer: the producer spreads over both brokers' queues, the consumer's rebalance takes
    the queues of both and commits its offsets to each broker."""
    namesrv = mixed.apache_ns if ns_kind == "apache" else mixed.orbit_ns
    topic, group = unique("MixRem"), unique("MixRemG")
    _topic_on_both(mixed, topic)
    count = 12
    api = mixed.through["orbit-proxy"].api_call
    with live_clients(tmp_path, namesrv, topic, unique("MixRemP"), group, count) as clients:
        assert sorted(clients["sent"]) == sorted(f"key-{i}" for i in range(count))
        stored = {name: [api(lambda a, b=broker, q=q: a.get_max_offset(b, topic, q)) for q in range(2)]
                  for name, broker in mixed.both()}
        committed = {name: [api(lambda a, b=broker, q=q: a.query_consumer_offset(b, group, topic, q))
                            for q in range(2)] for name, broker in mixed.both()}
        assert all(sum(v) for v in stored.values()) and sum(map(sum, stored.values())) == count, stored
        assert committed == stored  # every message consumed, on both kinds of broker


def test_cluster_list_and_route_with_both_admin_tools(mixed: Mixed, tmp_path: Path) -> None:
    """clusterList and topicRoute through either NameServer, by `orbitmq admin` and Apache's
    mqadmin: both brokers in DefaultCluster at their addresses, the topic's queues on both."""
    topic = unique("MixRoute")
    _topic_on_both(mixed, topic, queues=3)
    expected_brokers = {("apache-a", mixed.apache_broker.addr), ("orbit-a", mixed.orbit_broker)}
    for namesrv in (mixed.apache_ns, mixed.orbit_ns):
        info = orbit(namesrv, "clusterList")
        rows = {(b["brokerName"], b["brokerAddr"]) for b in info
                if b["clusterName"] == "DefaultCluster" and b["brokerId"] == 0 and b["reachable"]}
        assert rows == expected_brokers and len(info) == 2, info
        # each broker's own version, from its runtime info (Apache's is MQVersion's name)
        assert {b["brokerName"]: b["version"] for b in info}["apache-a"] == "V5_5_0", info
        route = orbit(namesrv, "topicRoute", "-t", topic)
        queues = {q["brokerName"]: (q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]}
        assert queues == {"apache-a": (3, 3, 6), "orbit-a": (3, 3, 6)}, route
        addrs = {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]}
        assert addrs == {"apache-a": {"0": mixed.apache_broker.addr}, "orbit-a": {"0": mixed.orbit_broker}}, route
    # Byte-level: the two NameServers answer GET_ROUTEINFO_BY_TOPIC and GET_BROKER_CLUSTER_INFO of
    # the same registrations with the same code, header fields and body.
    for code, header in ((RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                         (RequestCode.GET_BROKER_CLUSTER_INFO, None)):
        apache_side, orbit_side = (_raw(mixed, namesrv, code, header) for namesrv in (mixed.apache_ns, mixed.orbit_ns))
        assert apache_side[0] == ResponseCode.SUCCESS and orbit_side == apache_side, (code, apache_side, orbit_side)
    runs = mqadmin(tmp_path / "mqadmin", [
        ["clusterList", "-n", mixed.apache_ns], ["clusterList", "-n", mixed.orbit_ns],
        ["topicRoute", "-t", topic, "-n", mixed.apache_ns], ["topicRoute", "-t", topic, "-n", mixed.orbit_ns]])
    for run in runs[:2]:
        # #Cluster Name  #Broker Name  #BID  #Addr  #Version ...
        rows = {(r[0], r[1], r[2], r[3]) for r in table(run.ok())}
        assert rows == {("DefaultCluster", name, "0", addr) for name, addr in expected_brokers}, run.out
    for run in runs[2:]:
        text = run.ok()
        for name, addr in expected_brokers:
            assert f'"brokerName":"{name}"' in text.replace(" ", "") and addr in text, text


def test_apache_controller_answers_orbitmq_admin(mixed: Mixed, tmp_path: Path) -> None:
    """A one-peer Apache controller (DLedger) elects itself; `orbitmq admin getControllerMetaData`
    reads its group, leader and peers as Apache's controller reports them."""
    runner = ProcessRunner(tmp_path)
    try:
        [(proc, addr)] = Apache(runner).controllers(1, group="mixed-ctl")
        deadline = time.monotonic() + 30
        while True:
            meta = orbit(mixed.apache_ns, "getControllerMetaData", "-a", addr)
            if meta["isLeader"] or time.monotonic() > deadline or not proc.is_running():
                break
            time.sleep(0.3)
        assert meta == {"group": "mixed-ctl", "controllerLeaderId": "n0", "controllerLeaderAddress": addr,
                        "isLeader": True, "peers": [f"n0:{addr}"]}, meta  # "id:addr;" as DLedgerController#getControllerMetadata
    finally:
        runner.stop_all()


# ---- the launcher's own faults -------------------------------------------------------------------

def test_a_server_that_cannot_start_fails_with_its_log(mixed: Mixed, tmp_path: Path) -> None:
    """An Apache NameServer whose listenPort is taken exits; the launcher says so at once, with
    the tail of its stdout and of its namesrv.log, rather than waiting out its timeout."""
    runner = ProcessRunner(tmp_path)
    taken = int(mixed.orbit_ns.rsplit(":", 1)[1])
    started = time.monotonic()
    try:
        with pytest.raises(ProcessFailed) as info:
            Apache(runner).namesrv("apache-broken", port=taken)
    finally:
        runner.stop_all()
    text = str(info.value)
    assert "apache-broken" in text and "exited with code" in text, text
    assert "Address already in use" in text and "namesrv.log" in text, text
    assert time.monotonic() - started < BOOT_TIMEOUT
