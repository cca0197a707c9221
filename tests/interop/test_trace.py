"""Message trace: the proxy's records for gRPC clients (traceEnable), a Remoting client's own
trace message stored in RMQ_SYS_TRACE_TOPIC (traceTopicEnable), and queryMsgTraceById reading
a message's whole path back. Real processes; the official Python client drives the gRPC side.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, start_cluster, unique
from tests.support import free_port


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A broker with traceTopicEnable and one proxy with traceEnable (small batches)."""
    workdir = tmp_path_factory.mktemp("trace-cluster")
    c = start_cluster(workdir, proxies=0, broker_extra={"traceTopicEnable": "true"})
    try:
        port = free_port()
        c.runner.start("proxy", ["-n", c.namesrv, "--port", str(port), "traceEnable=true", "traceMsgBatchNum=2",
                                 "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                                 "grpcClientConsumerMaxLongPollingTimeoutMillis=3000",
                                 "minInvisibleTimeMillsForRecv=1000"], ready_port=port, name="proxy-trace")
        c.proxies.append(f"127.0.0.1:{port}")
        yield c
    finally:
        c.runner.stop_all()


def admin(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", cluster.namesrv],
                          capture_output=True, text=True, timeout=60)


def trace_rows(cluster: Cluster, msg_id: str, until, deadline_s: float = 30.0) -> list[dict]:
    """queryMsgTraceById --json, polled until ``until(rows)`` holds (trace writes are asynchronous)."""
    end = time.monotonic() + deadline_s
    rows: list[dict] = []
    while time.monotonic() < end:
        out = admin(cluster, "queryMsgTraceById", "-i", msg_id, "--json")
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        if until(rows):
            return rows
        time.sleep(0.5)
    raise AssertionError(f"trace of {msg_id} incomplete: {rows}")


def test_grpc_producer_and_consumer_traced_by_the_proxy(traced: Cluster) -> None:
    topic = traced.create_topic(unique("TrT"), queues=2)
    group = traced.create_group(unique("TrG"))
    producer = Producer(ClientConfiguration(traced.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body, msg.tag, msg.keys = topic, b"traced body", "TagA", "order-42"
        msg_id = producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(ClientConfiguration(traced.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    try:
        got = []
        end = time.monotonic() + 20
        while not got and time.monotonic() < end:
            got = consumer.receive(1, 10)
        assert [m.message_id for m in got] == [msg_id]
        consumer.ack(got[0])
    finally:
        consumer.shutdown()

    rows = trace_rows(traced, msg_id, lambda rs: {"Pub", "SubBefore", "SubAfter"} <= {r["type"] for r in rs})
    pub = next(r for r in rows if r["type"] == "Pub")
    assert (pub["topic"], pub["tags"], pub["keys"], pub["status"]) == (topic, "TagA", "order-42", "success")
    assert pub["storeHost"] == traced.broker and pub["offsetMsgId"] and pub["bodyLength"] == len(b"traced body")
    before = next(r for r in rows if r["type"] == "SubBefore")
    after = next(r for r in rows if r["type"] == "SubAfter")
    assert before["group"] == after["group"] == group
    assert before["retryTimes"] == 0 and before["requestId"] == after["requestId"]
    assert after["status"] == "success" and after["detail"] == "acked"
    assert before["clientHost"].startswith("127.0.0.1:")  # the consuming client, not the proxy
    # time order: sent, delivered, acked
    assert [r["type"] for r in rows].index("Pub") < [r["type"] for r in rows].index("SubAfter")
    text = admin(traced, "queryMsgTraceById", "-i", msg_id)
    assert text.returncode == 0 and "acked" in text.stdout and group in text.stdout, text.stdout


def test_dead_lettered_message_shows_retries_and_dlq(traced: Cluster) -> None:
    topic = traced.create_topic(unique("TrDlqT"), queues=1)
    group = traced.create_group(unique("TrDlqG"), retry_max_times=1)
    producer = Producer(ClientConfiguration(traced.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body = topic, b"never acked"
        msg_id = producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(ClientConfiguration(traced.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    try:
        deliveries = 0
        end = time.monotonic() + 40
        while deliveries < 2 and time.monotonic() < end:
            deliveries += len(consumer.receive(1, 1))  # never acked: back after 1 s, then dead-lettered
        assert deliveries == 2
        end = time.monotonic() + 20
        while time.monotonic() < end:  # the third attempt exceeds retryMaxTimes=1: the proxy moves it to the DLQ
            assert consumer.receive(1, 1) == []
            rows = trace_rows(traced, msg_id, lambda rs: True)
            if any(r["type"] == "DLQ" for r in rows):
                break
    finally:
        consumer.shutdown()
    rows = trace_rows(traced, msg_id, lambda rs: any(r["type"] == "DLQ" for r in rs)
                      and sum(r["type"] == "SubBefore" for r in rs) >= 2)
    retries = sorted(r["retryTimes"] for r in rows if r["type"] == "SubBefore")
    assert retries == [0, 1]
    # never acked: no successful SubAfter (a proxy-side dead-lettering writes a failed one)
    assert all(r["status"] == "failed" for r in rows if r["type"] == "SubAfter")
    dlq = next(r for r in rows if r["type"] == "DLQ")
    assert dlq["group"] == group and dlq["status"] == "dead-lettered"


def test_transaction_end_traced(traced: Cluster) -> None:
    """A half message's Pub (msgType Trans_Msg_Half) and its EndTransaction commit record."""
    topic = traced.create_topic(unique("TrTxT"), queues=1, message_type="TRANSACTION")
    channel, stub = traced.stub()
    with channel:
        sent = rawgrpc.send(stub, rawgrpc.message(topic, b"tx", message_type=pb.MessageType.TRANSACTION))
        assert sent.status.code == pb.Code.OK, sent.status
        entry = sent.entries[0]
        ended = stub.EndTransaction(spb.EndTransactionRequest(
            topic=pb.Resource(name=topic), message_id=entry.message_id, transaction_id=entry.transaction_id,
            resolution=pb.TransactionResolution.COMMIT, source=pb.TransactionSource.SOURCE_CLIENT),
            metadata=rawgrpc.metadata(), timeout=10)
        assert ended.status.code == pb.Code.OK, ended.status
    rows = trace_rows(traced, entry.message_id, lambda rs: {"Pub", "EndTransaction"} <= {r["type"] for r in rs})
    pub = next(r for r in rows if r["type"] == "Pub")
    end = next(r for r in rows if r["type"] == "EndTransaction")
    assert pub["msgType"] == "TRANS_HALF"
    assert end["status"] == "COMMIT_MESSAGE" and end["transactionId"] == entry.transaction_id
    assert end["fromTransactionCheck"] is False


def test_remoting_client_trace_message_stored_in_trace_topic(traced: Cluster) -> None:
    """`orbitmq admin sendMessage -m true` is a Remoting producer with message trace on: it sends
    the message, then its Pub record to RMQ_SYS_TRACE_TOPIC, where the broker stores and indexes it."""
    topic = traced.create_topic(unique("TrRemT"), queues=1)
    sent = admin(traced, "sendMessage", "-t", topic, "-p", "hello", "-k", "rk1", "-c", "TagR", "-m", "true",
                 "--json")
    assert sent.returncode == 0, sent.stderr
    msg_id = json.loads(sent.stdout)["msgId"]
    stored = admin(traced, "queryMsgByKey", "-t", "RMQ_SYS_TRACE_TOPIC", "-k", msg_id, "--json")
    assert stored.returncode == 0, stored.stderr
    docs = json.loads(stored.stdout)
    assert docs and all(d["topic"] == "RMQ_SYS_TRACE_TOPIC" for d in docs)
    rows = trace_rows(traced, msg_id, lambda rs: any(r["type"] == "Pub" for r in rs), deadline_s=5)
    pub = rows[0]
    assert (pub["topic"], pub["tags"], pub["keys"], pub["status"]) == (topic, "TagR", "rk1", "success")
    assert pub["clientHost"].startswith("127.0.0.1")  # the trace message's bornHost: the Remoting client


def test_trace_topic_missing_without_trace_topic_enable(tmp_path: Path) -> None:
    """No traceTopicEnable: no RMQ_SYS_TRACE_TOPIC, and queryMsgTraceById says how to get one."""
    c = start_cluster(tmp_path, proxies=0)
    try:
        out = admin(c, "queryMsgTraceById", "-i", "0A0000000000000000000000000")
        assert out.returncode == 1 and "traceTopicEnable=true" in out.stderr, out.stderr
        # a proxy with traceEnable but nowhere to write: clients' sends still succeed, the loss is logged
        port = free_port()
        proxy = c.runner.start("proxy", ["-n", c.namesrv, "--port", str(port), "traceEnable=true",
                                         "traceMsgBatchNum=1"], ready_port=port, name="proxy-trace-nowhere")
        topic = c.create_topic(unique("TrNoTopic"), queues=1)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            for _ in range(3):
                assert rawgrpc.send(stub, rawgrpc.message(topic)).status.code == pb.Code.OK
        end = time.monotonic() + 15
        while "message trace: sending" not in proxy.log_text() and time.monotonic() < end:
            time.sleep(0.2)
        assert "lost so far" in proxy.log_text()
    finally:
        c.runner.stop_all()
