"""Prometheus metrics and readiness of real processes (namesrv, broker, proxy) with
metricsExporterType=PROM: a live scrape after sends, receives, acks, a retry and a DLQ move
through the official Python client, checked against what the test did and against
`orbitmq admin consumerProgress`; gRPC health on the proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop.harness import CLUSTER_BROKER_KEYS, Cluster, unique
from tests.support import free_port, running, start_broker
from tests.support.prom import get, scrape, wait_ready

# the broker runs with metricsLabel=env:test: one more constant label on every series
IN_LABELS = {"cluster", "node_type", "node_id", "env", "topic", "message_type", "is_system"}
LAG_LABELS = {"cluster", "node_type", "node_id", "env", "consumer_group", "topic", "is_retry", "is_system"}


@dataclass
class MetricsCluster:
    cluster: Cluster
    namesrv_metrics: str
    broker_metrics: str
    proxy_metrics: str


@pytest.fixture(scope="module")
def mc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    workdir: Path = tmp_path_factory.mktemp("metrics")
    with running(workdir) as runner:
        ns_port, broker_port, proxy_port = free_port(), free_port(), free_port()
        ns_m, broker_m, proxy_m = free_port(), free_port(), free_port()
        namesrv = f"127.0.0.1:{ns_port}"
        runner.start("namesrv", [f"listenPort={ns_port}", "metricsExporterType=PROM",
                                 f"metricsPromExporterPort={ns_m}", "metricsPromExporterHost=127.0.0.1",
                                 f"kvConfigPath={workdir / 'kv.json'}",
                                 f"configStorePath={workdir / 'namesrv.properties'}"],
                     ready_port=ns_port, name="namesrv")
        start_broker(runner, workdir, namesrv, port=broker_port, brokerName="broker-m", **CLUSTER_BROKER_KEYS,
                     metricsExporterType="PROM", metricsPromExporterPort=broker_m, metricsLabel="env:test")
        runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                               "grpcClientConsumerMaxLongPollingTimeoutMillis=3000", "minInvisibleTimeMillsForRecv=1000",
                               "defaultInvisibleTimeMills=3000", "metricsExporterType=PROM",
                               f"metricsPromExporterPort={proxy_m}", "metricsPromExporterHost=127.0.0.1"],
                     ready_port=proxy_port, name="proxy")
        cluster = Cluster(runner, namesrv, f"127.0.0.1:{broker_port}", [f"127.0.0.1:{proxy_port}"])
        yield MetricsCluster(cluster, f"127.0.0.1:{ns_m}", f"127.0.0.1:{broker_m}", f"127.0.0.1:{proxy_m}")


def _admin_json(namesrv: str, *args: str):
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    done = subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", namesrv, "--json"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def _send(producer: Producer, topic: str, body: bytes) -> str:
    msg = Message()
    msg.topic = topic
    msg.body = body
    return producer.send(msg).message_id


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def test_every_process_is_ready_and_serves_metrics(mc: MetricsCluster) -> None:
    for endpoint in (mc.namesrv_metrics, mc.broker_metrics, mc.proxy_metrics):
        assert wait_ready(endpoint).strip() == "ready"
        assert get(f"http://{endpoint}/live")[0] == 200
        assert get(f"http://{endpoint}/nothing")[0] == 404
    s = scrape(mc.broker_metrics)
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-m", "env": "test"}
    assert s.value("rocketmq_broker_permission", **common) == 6
    assert s.family("rocketmq_broker_permission").type == "gauge"
    assert s.value("rocketmq_topic_number", **common) >= 1
    assert s.value("rocketmq_consumer_group_number", **common) >= 1
    assert s.value("rocketmq_processor_watermark", processor="send", **common) == 0
    for name in ("rocketmq_storage_size_bytes", "rocketmq_storage_flush_behind_bytes",
                 "rocketmq_storage_dispatch_behind_bytes", "rocketmq_storage_message_reserve_time_milliseconds"):
        assert s.family(name).type == "gauge"
        assert s.samples(name, storage_type="local", storage_medium="disk", **common), name
    p = scrape(mc.proxy_metrics)
    assert p.value("rocketmq_proxy_up", node_type="proxy", proxy_mode="cluster", cluster="DefaultCluster") == 1
    n = scrape(mc.namesrv_metrics)
    assert n.value("rocketmq_namesrv_live_brokers", cluster="DefaultCluster") == 1


def test_timer_wheel_gauges_count_a_waiting_timer_message(mc: MetricsCluster) -> None:
    """rocketmq_timer_dequeue_lag and rocketmq_timer_message_snapshot{timer_bound_s} (upstream's
    DefaultStoreMetricsManager) see a message due in about 40 minutes: in the 3600 s bound."""
    cluster = mc.cluster
    topic = cluster.create_topic(unique("MetTimerT"), queues=1, message_type="DELAY")
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-m", "env": "test"}

    def snapshot(s) -> dict[str, float]:
        return {x.labels["timer_bound_s"]: x.value for x in s.samples("rocketmq_timer_message_snapshot", **common)}

    before = _wait(lambda: snapshot(scrape(mc.broker_metrics)) and scrape(mc.broker_metrics), 20,
                   "the first wheel scan")
    assert set(snapshot(before)) == {"5", "60", "300", "900", "3600", "14400", "28800", "86400"}
    lag_before = before.value("rocketmq_timer_dequeue_lag", **common)
    in_hour = snapshot(before)["3600"]
    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic = topic
        msg.body = b"in forty minutes"
        msg.delivery_timestamp = int(time.time()) + 2400  # the Python client sends seconds
        producer.send(msg)
    finally:
        producer.shutdown()

    def counted():
        s = scrape(mc.broker_metrics)
        return (s.value("rocketmq_timer_dequeue_lag", **common) == lag_before + 1
                and snapshot(s)["3600"] == in_hour + 1 and s)

    after = _wait(counted, 30, "the timer message in the wheel gauges")
    assert after.family("rocketmq_timer_message_snapshot").type == "gauge"


def test_proxy_grpc_health(mc: MetricsCluster) -> None:
    with grpc.insecure_channel(mc.cluster.proxy) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        serving = health_pb2.HealthCheckResponse.SERVING
        assert stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status == serving
        answer = _wait(lambda: stub.Check(health_pb2.HealthCheckRequest(
            service="apache.rocketmq.v2.MessagingService"), timeout=5).status == serving, 20, "proxy SERVING")
        assert answer
        with pytest.raises(grpc.RpcError) as info:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_live_scrape_matches_sends_receives_acks_retries_and_dlq(mc: MetricsCluster) -> None:
    cluster = mc.cluster
    topic = cluster.create_topic(unique("MetT"), queues=2)
    group = cluster.create_group(unique("MetG"), retry_max_times=1, retry_next_ms=[1000, 1000])
    before = scrape(mc.broker_metrics)
    assert not before.samples("rocketmq_messages_in_total", topic=topic)

    producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    normal_bodies = [f"m{i}".encode() * 50 for i in range(9)]
    try:
        for body in normal_bodies:
            _send(producer, topic, body)
        # 9 received and acked
        acked: set[str] = set()
        deadline = time.monotonic() + 30
        while len(acked) < 9 and time.monotonic() < deadline:
            for m in consumer.receive(32, 15):
                consumer.ack(m)
                acked.add(m.message_id)
        assert len(acked) == 9
        # the proxy sees the simple consumer while it is up
        p = scrape(mc.proxy_metrics)
        assert p.value("rocketmq_proxy_active_clients", client_type="simple_consumer") >= 1
        assert p.value("rocketmq_proxy_active_clients", client_type="producer") >= 1
        # the proxy heartbeats the broker for its clients: the broker counts the connections
        _wait(lambda: scrape(mc.broker_metrics).total("rocketmq_consumer_connections", consumer_group=group,
                                                      consume_mode="pull", protocol_type="remoting") >= 1,
              20, "the consumer connection on the broker")
        assert scrape(mc.broker_metrics).total("rocketmq_producer_connections", protocol_type="remoting") >= 1

        # one poison message: delivered, never acked, retried once, then moved to the DLQ
        poison = _send(producer, topic, b"poison")
        deliveries = 0

        def dlq_moved() -> bool:
            nonlocal deliveries
            for m in consumer.receive(32, 1):
                assert m.message_id == poison, m.body
                deliveries += 1
            return scrape(mc.broker_metrics).total("rocketmq_send_to_dlq_messages_total", consumer_group=group) >= 1

        _wait(dlq_moved, 60, "the poison message in the DLQ")
        assert deliveries == 2  # the first delivery and one retry (retryMaxTimes=1)
    finally:
        consumer.shutdown()
    # three more that nobody consumes: the lag
    try:
        for i in range(3):
            _send(producer, topic, f"late{i}".encode())
    finally:
        producer.shutdown()

    s = scrape(mc.broker_metrics)
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-m", "env": "test"}
    # the topic and the group were created by UPDATE_AND_CREATE_TOPIC / _SUBSCRIPTIONGROUP requests
    assert s.family("rocketmq_topic_create_execution_time_milliseconds").type == "histogram"
    assert s.value("rocketmq_topic_create_execution_time_milliseconds_count", invocation_status="success",
                   is_system="false") >= 1
    assert s.value("rocketmq_consumer_group_create_execution_time_milliseconds_count", invocation_status="success",
                   is_system="false") >= 1
    # in: exactly the 13 messages sent to the topic, as normal messages
    assert s.family("rocketmq_messages_in_total").type == "counter"
    assert s.value("rocketmq_messages_in_total", topic=topic, **common) == 13
    sample = s.samples("rocketmq_messages_in_total", topic=topic)[0]
    assert set(sample.labels) == IN_LABELS
    assert sample.labels["message_type"] == "normal" and sample.labels["is_system"] == "false"
    sizes = [len(b) for b in normal_bodies] + [len(b"poison")] + [len(f"late{i}") for i in range(3)]
    throughput = s.value("rocketmq_throughput_in_total", topic=topic)
    assert throughput > sum(sizes)  # whole CommitLog records: bodies plus headers and properties
    # message size histogram: one observation per put, all below 1 KiB
    assert s.family("rocketmq_message_size_bytes").type == "histogram"
    assert s.value("rocketmq_message_size_bytes_count", topic=topic) == 13
    assert s.value("rocketmq_message_size_bytes_bucket", topic=topic, le="1024.0") == 13
    assert s.value("rocketmq_message_size_bytes_sum", topic=topic) == throughput
    # retry and DLQ topics are not counted as "in"
    assert not s.samples("rocketmq_messages_in_total", topic=f"%RETRY%{group}")
    assert not s.samples("rocketmq_messages_in_total", topic=f"%DLQ%{group}")
    # out: the 10 messages read from the topic (the retry is read from the retry topic, not counted)
    assert s.family("rocketmq_messages_out_total").type == "counter"
    assert s.value("rocketmq_messages_out_total", topic=topic, consumer_group=group, is_system="false") == 10
    assert s.value("rocketmq_throughput_out_total", topic=topic, consumer_group=group) > 0
    # the DLQ move, labelled with the group and the original topic
    assert s.value("rocketmq_send_to_dlq_messages_total", consumer_group=group, topic=topic, is_system="false") == 1
    # POP revive: checkpoints and acks written and read back, the poison message revived into the
    # retry topic exactly once (its second delivery went on to the DLQ)
    assert s.total("rocketmq_pop_revive_in_message_total", consumer_group=group, topic=topic,
                   revive_message_type="CK", put_status="PUT_OK") >= 1
    assert s.total("rocketmq_pop_revive_in_message_total", consumer_group=group, topic=topic,
                   revive_message_type="ACK", put_status="PUT_OK") >= 1
    assert s.total("rocketmq_pop_revive_out_message_total", consumer_group=group, revive_message_type="CK") >= 1
    assert s.value("rocketmq_pop_revive_retry_messages_total", consumer_group=group, topic=topic,
                   put_status="PUT_OK") == 1
    assert s.family("rocketmq_pop_revive_lag").type == "gauge"
    assert {x.labels["queue_id"] for x in s.samples("rocketmq_pop_revive_latency_milliseconds")}
    # RPC latency by request and response code, a histogram with upstream's buckets
    rpc = s.family("rocketmq_rpc_latency_milliseconds")
    assert rpc.type == "histogram"
    pops = s.samples("rocketmq_rpc_latency_milliseconds_count", request_code="pop_message", response_code="success",
                     protocol_type="remoting", result="success")
    assert pops and sum(x.value for x in pops) >= 1
    assert {x.labels["is_long_polling"] for x in pops} == {"true"}  # the proxy pops with a poll time
    assert s.samples("rocketmq_rpc_latency_milliseconds_count", request_code="ack_message")
    buckets = {x.labels["le"] for x in s.samples("rocketmq_rpc_latency_milliseconds_bucket", request_code="pop_message")}
    assert {"1.0", "3.0", "5.0", "7.0", "10.0", "100.0", "1000.0", "2000.0", "3000.0", "+Inf"} <= buckets

    # lag: matches consumerProgress
    progress = _admin_json(cluster.namesrv, "consumerProgress", "-g", group, "-t", topic)
    diff = sum(row["diff"] for row in progress["offsets"] if row["topic"] == topic)
    assert diff == 3
    lag = s.samples("rocketmq_consumer_lag_messages", consumer_group=group, topic=topic)
    assert len(lag) == 1 and set(lag[0].labels) == LAG_LABELS
    assert lag[0].labels["is_retry"] == "false"
    assert lag[0].value == diff
    assert s.value("rocketmq_consumer_ready_messages", consumer_group=group, topic=topic) == 3
    assert s.value("rocketmq_consumer_inflight_messages", consumer_group=group, topic=topic) == 0
    assert s.value("rocketmq_consumer_lag_latency_milliseconds", consumer_group=group, topic=topic) > 0
    assert s.value("rocketmq_consumer_queueing_latency_milliseconds", consumer_group=group, topic=topic) > 0
    for name in ("rocketmq_consumer_lag_messages", "rocketmq_consumer_lag_latency_milliseconds",
                 "rocketmq_consumer_ready_messages", "rocketmq_consumer_inflight_messages",
                 "rocketmq_consumer_queueing_latency_milliseconds"):
        assert s.family(name).type == "gauge"

    # the proxy's own figures
    p = scrape(mc.proxy_metrics)
    pcommon = {"cluster": "DefaultCluster", "node_type": "proxy", "proxy_mode": "cluster"}
    assert p.value("rocketmq_proxy_messages_sent_total", topic=topic, **pcommon) == 13
    assert p.value("rocketmq_proxy_sent_bytes_total", topic=topic) > sum(sizes)  # whole serialized Messages
    assert p.value("rocketmq_proxy_messages_received_total", topic=topic, consumer_group=group) == 11
    assert p.value("rocketmq_proxy_messages_acked_total", topic=topic, consumer_group=group) == 9
    assert p.value("rocketmq_proxy_rpc_total", method="SendMessage", code="OK") >= 13
    assert p.family("rocketmq_proxy_rpc_latency_milliseconds").type == "histogram"
    assert p.value("rocketmq_proxy_rpc_latency_milliseconds_count", method="AckMessage", code="OK") >= 9
    assert p.samples("rocketmq_proxy_rpc_total", method="ReceiveMessage")
    # no client or message ids as label values anywhere
    for text in (s.text, p.text):
        assert poison not in text
        assert "client_id" not in text and "message_id" not in text


def test_push_consumer_retries_and_dead_letters_through_the_proxy(mc: MetricsCluster) -> None:
    """The official PushConsumer nacks a poison message (ChangeInvisibleDuration) until the broker's
    revive moves it to the DLQ; a raw ForwardMessageToDeadLetterQueue moves another one."""
    from tests.interop import rawgrpc
    from tests.interop.test_python_push_consumer import Recorder, _push

    cluster = mc.cluster
    topic = cluster.create_topic(unique("MetPushT"), queues=1)
    group = cluster.create_group(unique("MetPushG"), retry_max_times=1, retry_next_ms=[1000, 1000])
    recorder = Recorder(lambda m: m.body != b"poison")
    consumer = _push(cluster, group, topic, recorder)
    try:
        producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (topic,))
        producer.startup()
        try:
            poison = _send(producer, topic, b"poison")
        finally:
            producer.shutdown()
        _wait(lambda: scrape(mc.broker_metrics).total("rocketmq_send_to_dlq_messages_total",
                                                      consumer_group=group) >= 1, 40, "the DLQ move")
        assert {a for i, _b, a in recorder.seen if i == poison} == {1, 2}
        p = scrape(mc.proxy_metrics)
        assert p.value("rocketmq_proxy_active_clients", client_type="push_consumer") >= 1
        assert p.value("rocketmq_proxy_rpc_total", method="ChangeInvisibleDuration", code="OK") >= 2
        assert scrape(mc.broker_metrics).value("rocketmq_send_to_dlq_messages_total", consumer_group=group,
                                               topic=topic) == 1
    finally:
        consumer.shutdown()

    topic2 = cluster.create_topic(unique("MetFwdT"), queues=1)
    group2 = cluster.create_group(unique("MetFwdG"))
    channel, stub = cluster.stub()
    with channel:
        assert rawgrpc.send(stub, rawgrpc.message(topic2, b"forward me")).status.code == pb.Code.OK
        got: list = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            _status, got, _responses = rawgrpc.receive(stub, topic2, group2, polling_ms=1000)
        assert len(got) == 1
        forwarded = stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=group2), topic=pb.Resource(name=topic2),
            receipt_handle=got[0].system_properties.receipt_handle, message_id=got[0].system_properties.message_id,
            delivery_attempt=1, max_delivery_attempts=1), metadata=rawgrpc.metadata(), timeout=10)
        assert forwarded.status.code == pb.Code.OK, forwarded.status
    p = scrape(mc.proxy_metrics)
    assert p.value("rocketmq_proxy_messages_forwarded_to_dlq_total", topic=topic2, consumer_group=group2) == 1
    assert p.value("rocketmq_proxy_rpc_total", method="ForwardMessageToDeadLetterQueue", code="OK") == 1
    assert scrape(mc.broker_metrics).value("rocketmq_send_to_dlq_messages_total", consumer_group=group2,
                                           topic=topic2) == 1
