"""The Java gRPC client, rocketmq-client-java 5.2.0 unmodified (tests/interop/java/grpc), against
OrbitMQ's proxy (issue 23, item 1, and its Bad input section).

tests/interop/java/grpc/.../GrpcClient.java runs scenarios and prints one line per outcome; these
tests parse them. The session cluster serves the producer, SimpleConsumer, PushConsumer and bad
input scenarios (plaintext: sslEnabled=false); a cluster of its own, with authentication and
authorization on, short transaction checks and TLS permissive, serves the client's defaults (TLS on)
with ACL 2.0 credentials and transactions answered by a TransactionChecker. Every run keeps the
client's own log (``rocketmq.log.root``): on the good paths it must hold no ERROR or WARN line.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from tests.interop.harness import Cluster, unique
from tests.interop.test_auth import ADMIN, AuthCluster, acl_cluster_running, entry
from tests.support import jvm

Code = pb.Code
MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # the proxy's and broker's maxMessageSize default
CLIENT = "orbitmq.interop.GrpcClient"
# A log entry's first line: "<date> <time> <LEVEL> [pid] [thread] [logger] - message".
_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ +(ERROR|WARN) ")


@dataclass
class Run:
    lines: list[list[str]]
    stdout: str
    log: str

    def of(self, scenario: str, event: str) -> list[list[str]]:
        """The fields after ``<scenario> <event>`` of each such line."""
        return [line[2:] for line in self.lines if line[:2] == [scenario, event]]

    def errors(self, scenario: str = "errors") -> dict[str, tuple[str, str, str]]:
        """case -> (exception, response code or "-", message) of each ERROR line."""
        return {f[0]: (f[1], f[2], " ".join(f[3:])) for f in self.of(scenario, "ERROR")}

    def problems(self, allowed: tuple[str, ...] = ()) -> list[str]:
        """The client log's ERROR and WARN entries, but those naming an ``allowed`` text."""
        return [line for line in self.log.splitlines() if _ENTRY.match(line) and not any(a in line for a in allowed)]


def run_client(log_dir: Path, endpoint: str, *scenarios: str, ssl: bool = False, timeout: float = 150) -> Run:
    """Run the Java client's scenarios; every scenario must end DONE (its outcomes are asserted by the
    caller). The client writes its log under ``log_dir`` (rocketmq.log.root of its logback config)."""
    suite = jvm.suite("grpc")
    proc = suite.run(CLIENT, f"endpoints={endpoint}", f"ssl={str(ssl).lower()}", *scenarios, timeout=timeout,
                     jvm_flags=[f"-Drocketmq.log.root={log_dir}", "-Drocketmq.log.level=info"])
    log_file = log_dir / "rocketmq-client.log"
    run = Run([line.split() for line in proc.stdout.splitlines() if line.strip()], proc.stdout,
              log_file.read_text(errors="replace") if log_file.exists() else "")
    failed = [" ".join(line) for line in run.lines if len(line) > 1 and line[1] == "FAILED"]
    assert proc.returncode == 0 and not failed, (
        f"exit {proc.returncode}, failed: {failed}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-6000:]}")
    return run


def received(run: Run, scenario: str) -> dict[str, list[list[str]]]:
    """key -> its RECV lines' fields (key topic msgId attempt receivedAtMs bodyOk messageGroup)."""
    got: dict[str, list[list[str]]] = defaultdict(list)
    for fields in run.of(scenario, "RECV"):
        got[fields[0]].append(fields)
    return got


# ---- the session cluster: producer, SimpleConsumer, PushConsumer ---------------------------------

@pytest.fixture(scope="module")
def client_run(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One JVM for the producer, SimpleConsumer and PushConsumer scenarios (recall switched on for it:
    the broker's recallMessageEnable defaults to false, as upstream's)."""
    normal, fifo, delay = (cluster.create_topic(unique("JavaN")), cluster.create_topic(unique("JavaF"), message_type="FIFO"),
                           cluster.create_topic(unique("JavaD"), message_type="DELAY"))
    simple_topic, push_topic = cluster.create_topic(unique("JavaS")), cluster.create_topic(unique("JavaP"))
    push_fifo, dlq_topic = cluster.create_topic(unique("JavaPF"), message_type="FIFO"), cluster.create_topic(unique("JavaX"))
    priority_topic = cluster.create_topic(unique("JavaPrio"), queues=4, message_type="PRIORITY")
    g = {name: cluster.create_group(unique(f"Java{name}"), orderly=name in ("send", "fifo"))
         for name in ("send", "tag", "sql", "push", "fifo", "reader", "priority")}
    # maxAttempts = retryMaxTimes + 1; a 500 ms retry backoff keeps the failing listener quick.
    dlq_group = cluster.create_group(unique("JavaDead"), retry_max_times=2, retry_next_ms=[500])
    set_recall = lambda value: cluster.api_call(  # noqa: E731
        lambda api: api.update_broker_config(cluster.broker, {"recallMessageEnable": value}))
    set_recall("true")
    try:
        yield run_client(
            tmp_path_factory.mktemp("java-grpc-log"), cluster.proxy,
            "+send", f"normal={normal}", f"fifo={fifo}", f"delay={delay}", f"group={g['send']}",
            "+simple", f"topic={simple_topic}", f"tagGroup={g['tag']}", f"sqlGroup={g['sql']}",
            "+priority", f"topic={priority_topic}", f"group={g['priority']}",
            "+push", f"topic={push_topic}", f"group={g['push']}", f"fifoTopic={push_fifo}", f"fifoGroup={g['fifo']}",
            f"dlqTopic={dlq_topic}", f"dlqGroup={dlq_group}", f"dlqReader={g['reader']}", "maxAttempts=3")
    finally:
        set_recall("false")


def test_producer_sync_async_fifo_delay_and_recall(client_run: Run) -> None:
    sent = {f[0]: f for f in client_run.of("send", "SENT")}
    got = received(client_run, "send")
    expected = {f"sync-{i}" for i in range(3)} | {f"async-{i}" for i in range(3)} | {"delay-0"} | {
        f"fifo-{g}-{i}" for g in ("g0", "g1") for i in range(4)}
    assert expected <= set(sent)
    assert set(got) == expected, client_run.stdout  # the recalled timer message never comes
    for key in expected:
        assert len(got[key]) == 1 and got[key][0][2] == sent[key][1] and got[key][0][5] == "true", got[key]
    for group in ("g0", "g1"):
        order = [f[0] for f in client_run.of("send", "RECV") if f[6] == group]
        assert order == [f"fifo-{group}-{i}" for i in range(4)]
    # a delay message comes at its delivery timestamp, not before
    assert int(got["delay-0"][0][4]) >= int(sent["delay-0"][2])
    recalled = client_run.of("send", "RECALLED")
    assert recalled == [["recall-0", sent["recall-0"][1]]], client_run.stdout


def test_priority_message_is_refused_by_the_client(client_run: Run) -> None:
    """setPriority to a NORMAL topic: its route accepts NORMAL only, so the client refuses before sending."""
    exc, _code, message = client_run.errors("send")["priority"]
    assert exc == "IllegalArgumentException" and "actualMessageType=PRIORITY" in message
    assert "acceptMessageTypes=[NORMAL]" in message


def test_priority_messages_to_a_priority_topic(client_run: Run) -> None:
    """With PRIORITY topics (RIP-80) the route accepts PRIORITY and 5.2.0's setPriority sends; the
    backlog comes highest queue first (priority 5 shares the last of the 4 queues)."""
    assert [f[0] for f in client_run.of("priority", "SENT")] == ["prio-0", "prio-2", "prio-1", "prio-5"], \
        client_run.stdout
    got = [f[0] for f in client_run.of("priority", "RECV")]
    assert got == ["prio-5", "prio-2", "prio-1", "prio-0"], client_run.stdout
    assert all(f[5] == "true" for f in client_run.of("priority", "RECV"))


def test_simple_consumer_filters_ack_and_invisible_duration(client_run: Run) -> None:
    tag_lines = [f for f in client_run.of("simple", "RECV") if f[0] == "tag"]
    by_tag = {f[1] for f in tag_lines}
    assert by_tag == {"k0", "k2", "k4", "k5"}  # "A || C"
    assert all(f[2] in ("A", "C") for f in tag_lines)
    [extended] = client_run.of("simple", "EXTENDED_ACK")
    [shortened] = client_run.of("simple", "SHORTENED")
    # acked after a longer invisible duration (with the handle ChangeInvisibleDuration answered): once
    assert [f[3] for f in tag_lines if f[1] == extended[0]] == ["1"]
    # made visible again after 1 s: delivered a second time, attempt 2
    assert [f[3] for f in tag_lines if f[1] == shortened[0]] == ["1", "2"]
    sql = {f[0] for f in client_run.of("simple", "RECV") if f[0] != "tag"}
    assert sql == {"k3", "k4"}  # "n > 2 AND n < 5"


def test_push_consumer_concurrent_fifo_and_dead_letters(client_run: Run) -> None:
    lines = client_run.of("push", "RECV")
    concurrent = [f[1] for f in lines if f[0] == "concurrent"]
    assert sorted(concurrent) == sorted(f"c{i}" for i in range(8))
    fifo = [f for f in lines if f[0] == "fifo"]
    for group in ("g0", "g1", "g2"):
        assert [f[1] for f in fifo if f[2] == group] == [f"f-{group}-{i}" for i in range(4)]
    # the failing listener sees maxAttempts deliveries, then the message sits in %DLQ%<group>
    assert [f[2] for f in lines if f[0] == "failing"] == ["1", "2", "3"]
    dead = [f for f in lines if f[0] == "dead-0"]
    assert len(dead) == 1 and dead[0][1].startswith("%DLQ%") and dead[0][5] == "true"


def test_client_log_stays_quiet(client_run: Run) -> None:
    """No ERROR or WARN from the client's telemetry, metrics, settings or heartbeats. Allowed: the
    DLQ reader's route lookups before the first dead letter creates %DLQ%<group> (as upstream)."""
    assert "Init settings successfully" in client_run.log
    assert client_run.problems(allowed=("%DLQ%",)) == []


# ---- bad input -----------------------------------------------------------------------------------

def test_bad_input_gets_rocketmqs_codes_and_exceptions(cluster: Cluster,
                                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    topic, group = cluster.create_topic(unique("JavaE")), cluster.create_group(unique("JavaE"))
    read_only = cluster.create_topic(unique("JavaRO"), queues=2, perm=4)
    run = run_client(tmp_path_factory.mktemp("java-grpc-errors"), cluster.proxy, "+errors", f"topic={topic}",
                     f"group={group}", f"readOnly={read_only}", f"missingTopic={unique('JavaNoT')}",
                     f"missingGroup={unique('JavaNoG')}", f"maxMessageSize={MAX_MESSAGE_SIZE}")
    e = run.errors()
    # checked by the client against the Settings the proxy sent (maxBodySizeBytes = maxMessageSize)
    assert e["body-too-large"][0] == "ClientException" and f"max size={MAX_MESSAGE_SIZE}" in e["body-too-large"][2]
    assert e["empty-body"][0] == "IllegalArgumentException"
    assert e["illegal-topic-chars"][0] == e["illegal-group-chars"][0] == "IllegalArgumentException"
    # the proxy's own checks, mapped by the client's StatusChecker
    assert e["illegal-topic-long"][:2] == ("BadRequestException", str(Code.ILLEGAL_TOPIC))
    assert e["system-topic"][:2] == ("BadRequestException", str(Code.ILLEGAL_TOPIC))
    assert e["topic-not-found"][:2] == ("NotFoundException", str(Code.TOPIC_NOT_FOUND))
    assert e["subscription-topic-not-found"][:2] == ("NotFoundException", str(Code.TOPIC_NOT_FOUND))
    assert e["group-not-found"][:2] == ("NotFoundException", str(Code.CONSUMER_GROUP_NOT_FOUND))
    assert e["illegal-sql"][:2] == ("BadRequestException", str(Code.ILLEGAL_FILTER_EXPRESSION))
    assert e["illegal-invisible-duration"][:2] == ("BadRequestException", str(Code.ILLEGAL_INVISIBLE_TIME))
    assert e["expired-receipt-handle-ack"][:2] == ("BadRequestException", str(Code.INVALID_RECEIPT_HANDLE))
    assert e["expired-receipt-handle-change"][:2] == ("BadRequestException", str(Code.INVALID_RECEIPT_HANDLE))
    # a route of read-only queues: the client finds no writable queue (perm 4, Permission.READ)
    assert e["read-only-topic"][0] == "IllegalArgumentException" and "No writable message queue" in e["read-only-topic"][2]
    assert e["fifo-to-normal-topic"][0] == "IllegalArgumentException"
    assert e["missing-subscription"] == ("IllegalArgumentException", "-", "There is no topic to receive message")
    # refused Settings end the Telemetry stream with INVALID_ARGUMENT (ClientActivity#processTelemetryException):
    # the consumer fails to start at once rather than after its startup attempts time out
    assert e["illegal-group-long"][0] == "IllegalStateException"
    assert ("INVALID_ARGUMENT: process client telemetryCommand failed. The specified group is longer than group "
            "max length 255.") in run.log


# ---- ACL 2.0, TLS on, transactions ---------------------------------------------------------------

@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    """Authentication and authorization on, TLS permissive with a test-mode certificate (the Java
    client trusts any: RpcClientImpl's InsecureTrustManagerFactory), quick transaction check-backs."""
    workdir = tmp_path_factory.mktemp("java-secure")
    tls = ("tlsTestModeEnable=true", f"tlsCertPath={workdir / 'tls.crt'}", f"tlsKeyPath={workdir / 'tls.key'}",
           "tls.server.mode=permissive")
    with acl_cluster_running(workdir, {"transactionCheckInterval": "500", "transactionTimeOut": "1500"},
                             tls) as cluster:
        yield cluster


def test_tls_acl_credentials_and_transactions(secure_cluster: AuthCluster,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    c = secure_cluster
    topic, denied = c.topic(unique("JavaA")), c.topic(unique("JavaDenied"))
    tx_topic = c.topic(unique("JavaTx"), {"message.type": "TRANSACTION"})
    group, tx_group = c.group(unique("JavaA")), c.group(unique("JavaTx"))
    c.user("javauser", "java-secret", [entry(f"Topic:{topic}", ["Pub", "Sub"]), entry(f"Group:{group}", ["Sub"])])
    user = ("ak=javauser", "sk=java-secret", f"topic={topic}", f"group={group}")
    run = run_client(tmp_path_factory.mktemp("java-secure-log"), c.proxy, "+auth", *user,
                     "+transaction", f"ak={ADMIN[0]}", f"sk={ADMIN[1]}", f"topic={tx_topic}", f"group={tx_group}",
                     ssl=True)
    assert "Init settings successfully" in run.log
    assert {f[0] for f in run.of("auth", "SENT")} == {"auth-0"}
    assert {f[0] for f in run.of("auth", "RECV")} == {"auth-0"}
    checks = {(f[0], f[1]) for f in run.of("transaction", "CHECK")}
    # ended transactions are never checked; an UNKNOWN answer is asked again
    assert {key for key, _ in checks} == {"tx-check-commit", "tx-check-rollback", "tx-check-unknown"}
    assert {("tx-check-unknown", "1"), ("tx-check-unknown", "2")} <= checks
    assert sorted(f[0] for f in run.of("transaction", "RECV")) == ["tx-check-commit", "tx-check-unknown", "tx-commit"]
    # TLS, signed calls, the Telemetry stream, check-backs: nothing the client complains of
    assert run.problems() == []

    refused = run_client(tmp_path_factory.mktemp("java-secure-refused-log"), c.proxy, "+authRefused", *user,
                         f"denied={denied}", ssl=True)
    e = refused.errors("authRefused")
    assert e["denied"][:2] == ("UnauthorizedException", str(Code.UNAUTHORIZED))
    assert e["wrong-secret"][:2] == ("UnauthorizedException", str(Code.UNAUTHORIZED))
