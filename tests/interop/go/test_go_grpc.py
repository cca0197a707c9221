"""Apache's RocketMQ 5 Go client (github.com/apache/rocketmq-clients/golang/v5 v5.1.2), unmodified,
through an OrbitMQ proxy: normal (sync and async), FIFO, delay and transactional sends with a
TransactionChecker answering a check-back, SimpleConsumer receive and ack, and the codes Apache's
proxy gives for bad input. The programs are tests/interop/go/grpc/main.go, built by `make clients`.

The client always dials TLS (an x509 config that skips verification), so the cluster here is its
own: one proxy serving TLS beside plaintext on its port (tls.server.mode=permissive with a
self-signed pair, tlsTestModeEnable) and a broker that checks open transactions every 500 ms
(transactionCheckInterval) once they are 1.5 s old (transactionTimeOut)."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.go.outcome import cases, explain, rows
from tests.interop.harness import Cluster, start_cluster, unique
from tests.support import golang

BROKER_KEYS = {"transactionCheckInterval": "500", "transactionTimeOut": "1500"}
TIMER_PRECISION_MS = 1000  # the broker's timerPrecisionMs (default)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("go-grpc-cluster"), proxies=1, broker_extra=BROKER_KEYS,
                      proxy_extra={"tlsTestModeEnable": "true"})
    try:
        yield c
    finally:
        c.runner.stop_all()


def _run(cluster: Cluster, tmp_path: Path, scenario: str, *args: str, timeout: float = 60):
    return golang.run("grpc", scenario, "-endpoint", cluster.proxy, *args, timeout=timeout,
                      env={"rocketmq.client.logRoot": str(tmp_path / "go-client-logs")})


def test_normal_sync_and_async_then_simple_consumer(tls_cluster: Cluster, tmp_path: Path) -> None:
    topic = tls_cluster.create_topic(unique("GoNormT"), queues=2, message_type="NORMAL")
    group = tls_cluster.create_group(unique("GoNormG"))
    produced = _run(tls_cluster, tmp_path, "produce", "-topic", topic, "-n", "4", "-prefix", "gn")
    assert produced.returncode == 0, explain(produced)
    sent = {key: msg_id for key, msg_id, _ in rows(produced, "SENT")}
    assert len(sent) == 8, explain(produced)

    consumed = _run(tls_cluster, tmp_path, "consume", "-topic", topic, "-group", group, "-n", "8", "-linger", "1s")
    assert consumed.returncode == 0, explain(consumed)
    recv = rows(consumed, "RECV")
    assert {key: msg_id for key, msg_id, *_ in recv} == sent, explain(consumed)
    assert collections.Counter(key for key, *_ in recv) == dict.fromkeys(sent, 1)
    assert [key for key, in rows(consumed, "ACK")] == [key for key, *_ in recv]
    assert all(attempt == "1" for _, _, _, attempt, _, _ in recv), explain(consumed)


def test_fifo_message_groups_arrive_in_order(tls_cluster: Cluster, tmp_path: Path) -> None:
    topic = tls_cluster.create_topic(unique("GoFifoT"), queues=2, message_type="FIFO")
    group = tls_cluster.create_group(unique("GoFifoG"), orderly=True)
    produced = _run(tls_cluster, tmp_path, "produce", "-kind", "fifo", "-topic", topic, "-n", "10", "-groups", "2",
                    "-prefix", "gf")
    assert produced.returncode == 0, explain(produced)
    order: dict[str, list[str]] = collections.defaultdict(list)
    for key, _msg_id, message_group in rows(produced, "SENT"):
        order[message_group].append(key)
    assert sorted(order) == ["gf-group-0", "gf-group-1"], explain(produced)

    consumed = _run(tls_cluster, tmp_path, "consume", "-topic", topic, "-group", group, "-n", "10", "-linger", "1s")
    assert consumed.returncode == 0, explain(consumed)
    got: dict[str, list[str]] = collections.defaultdict(list)
    for key, _msg_id, message_group, _attempt, _at, _delivery in rows(consumed, "RECV"):
        got[message_group].append(key)
    assert got == order, explain(consumed)


def test_delay_message_comes_at_its_delivery_timestamp(tls_cluster: Cluster, tmp_path: Path) -> None:
    topic = tls_cluster.create_topic(unique("GoDelayT"), queues=2, message_type="DELAY")
    group = tls_cluster.create_group(unique("GoDelayG"))
    produced = _run(tls_cluster, tmp_path, "produce", "-kind", "delay", "-delay", "2s", "-topic", topic, "-n", "2",
                    "-prefix", "gd")
    assert produced.returncode == 0, explain(produced)
    deliver_at = {key: int(at) for key, _msg_id, at in rows(produced, "SENT")}
    assert len(deliver_at) == 2, explain(produced)

    consumed = _run(tls_cluster, tmp_path, "consume", "-topic", topic, "-group", group, "-n", "2")
    assert consumed.returncode == 0, explain(consumed)
    recv = rows(consumed, "RECV")
    assert sorted(key for key, *_ in recv) == sorted(deliver_at), explain(consumed)
    for key, _msg_id, _group, _attempt, received_ms, delivery_ms in recv:
        # The message carries the delivery timestamp it was sent with, and is not handed out
        # before it: at the earliest at the start of its timer slot (timerPrecisionMs, 1000).
        assert int(delivery_ms) == deliver_at[key]
        assert int(received_ms) >= deliver_at[key] - TIMER_PRECISION_MS, (key, received_ms, deliver_at[key])


def test_transaction_commit_rollback_and_check_back(tls_cluster: Cluster, tmp_path: Path) -> None:
    """Commit and rollback end their transactions at once; the third, left open, is asked about
    by the broker's check-back (relayed by the proxy over the client's telemetry stream) and
    committed by the TransactionChecker. A consumer (in the same run, so the producer is still
    there to send the checker's answer) sees the two committed messages only."""
    topic = tls_cluster.create_topic(unique("GoTxT"), queues=2, message_type="TRANSACTION")
    group = tls_cluster.create_group(unique("GoTxG"))
    result = _run(tls_cluster, tmp_path, "transaction", "-topic", topic, "-group", group, "-prefix", "gt",
                  "-timeout", "30s", "-linger", "2s")
    assert result.returncode == 0, explain(result)
    sent = {key: (msg_id, tx_id) for key, msg_id, tx_id in rows(result, "SENT")}
    assert sorted(sent) == ["gt-commit", "gt-rollback", "gt-unknown"], explain(result)
    assert all(tx_id and tx_id != msg_id for msg_id, tx_id in sent.values())
    checks = rows(result, "CHECK")
    assert ["gt-unknown", "COMMIT"] in checks, explain(result)
    assert all(key == "gt-unknown" for key, _ in checks), explain(result)
    recv = [(key, msg_id) for key, msg_id, *_ in rows(result, "RECV")]
    assert sorted(recv) == [(key, sent[key][0]) for key in ("gt-commit", "gt-unknown")], explain(result)


def test_bad_input_codes(tls_cluster: Cluster, tmp_path: Path) -> None:
    """The codes Apache's proxy answers, as the client reports them: a body over the proxy's
    maxMessageSize is refused by the client itself, with the limit the proxy's Settings gave;
    ILLEGAL_TOPIC, TOPIC_NOT_FOUND, ILLEGAL_CONSUMER_GROUP; an expired receipt handle is
    INVALID_RECEIPT_HANDLE for ChangeInvisibleDuration. SimpleConsumer.Ack of v5.1.2 drops the
    response's status and returns nil, so the expired ack shows as the message coming again."""
    topic = tls_cluster.create_topic(unique("GoBadT"), queues=1, message_type="NORMAL")
    group = tls_cluster.create_group(unique("GoBadG"))
    result = _run(tls_cluster, tmp_path, "bad", "-topic", topic, "-group", group, "-prefix", "gx",
                  "-invisible", "1s", "-timeout", "20s")
    assert result.returncode == 0, explain(result)
    got = cases(result)
    assert got["body-too-large"] == (-1, "message body size exceeds the threshold, max size=4194304 bytes"), \
        explain(result)
    assert got["illegal-topic"][0] == 40002, explain(result)        # ILLEGAL_TOPIC
    assert got["topic-not-found"][0] == 40402, explain(result)      # TOPIC_NOT_FOUND
    assert got["illegal-group"][0] == 40003, explain(result)        # ILLEGAL_CONSUMER_GROUP
    assert got["expired-change-invisible"][0] == 40013, explain(result)  # INVALID_RECEIPT_HANDLE
    assert got["expired-ack"] == (0, "ok"), explain(result)
    attempts = [attempt for key, _id, _group, attempt, *_ in rows(result, "RECV") if key == "gx-expire"]
    assert attempts == ["1", "2"], explain(result)
