"""Behaviours that used to differ from RocketMQ (issue 13, item 6), each through the proxy with
real processes: QueryRoute of a missing topic, ChangeInvisibleDuration of an acked handle,
switching a group to orderly with messages in flight, and `orbitmq local`'s defaults and
unknown-key warning."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique
from tests.support import ProcessRunner, free_port

Code = pb.Code


def _route(stub, topic: str) -> spb.QueryRouteResponse:
    return stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=rawgrpc.metadata(),
                           timeout=10)


def test_query_route_not_found_when_brokers_refuse_auto_create(cluster: Cluster) -> None:
    """A proxy with autoCreateTopicEnable=true creates topics only on brokers that allow it
    (their autoCreateTopicEnable, seen as TBW102's route): with none, TOPIC_NOT_FOUND as upstream."""
    port = free_port()
    cluster.runner.start("proxy", ["-n", cluster.namesrv, "--port", str(port), "autoCreateTopicEnable=true"],
                         ready_port=port, name="proxy-autocreate")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        missing = unique("NoAuto")
        response = _route(stub, missing)
        assert response.status.code == Code.TOPIC_NOT_FOUND, response.status
        assert "autoCreateTopicEnable" in response.status.message
    # and nothing was created behind the client's back
    _, stub = cluster.stub()
    assert _route(stub, missing).status.code == Code.TOPIC_NOT_FOUND


def test_change_invisible_duration_of_an_acked_handle_fails(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("CidAckT"), queues=1)
    group = cluster.create_group(unique("CidAckG"))
    channel, stub = cluster.stub()
    with channel:
        assert rawgrpc.send(stub, rawgrpc.message(topic, b"once")).status.code == Code.OK
        messages: list[pb.Message] = []
        end = time.monotonic() + 15
        while not messages and time.monotonic() < end:
            _, messages, _ = rawgrpc.receive(stub, topic, group, batch=1, invisible_ms=20_000, polling_ms=1000)
        (msg,) = messages
        assert rawgrpc.ack(stub, topic, group, msg).status.code == Code.OK
        response = stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic),
            receipt_handle=msg.system_properties.receipt_handle, invisible_duration=rawgrpc.duration(1000),
            message_id=msg.system_properties.message_id), metadata=rawgrpc.metadata(), timeout=10)
        assert response.status.code == Code.INVALID_RECEIPT_HANDLE, response.status
        # and the acked message does not come back once the asked-for second has passed
        time.sleep(2.5)
        _, again, _ = rawgrpc.receive(stub, topic, group, batch=1, invisible_ms=20_000, polling_ms=2000)
        assert again == []


def test_switch_to_orderly_with_messages_in_flight_strands_none(cluster: Cluster) -> None:
    """Messages popped while the group was concurrent and never acked are revived into the pop
    retry topic; after updateSubGroup -o true they must still be delivered (and acked)."""
    topic = cluster.create_topic(unique("SwitchT"), queues=2)
    group = cluster.create_group(unique("SwitchG"))
    channel, stub = cluster.stub()
    with channel:
        sent = set()
        for i in range(10):
            response = rawgrpc.send(stub, rawgrpc.message(topic, f"m{i}".encode()))
            assert response.status.code == Code.OK
            sent.add(response.entries[0].message_id)
        in_flight: list[pb.Message] = []
        end = time.monotonic() + 15
        while len(in_flight) < 4 and time.monotonic() < end:  # popped concurrently, left unacked
            _, got, _ = rawgrpc.receive(stub, topic, group, batch=4 - len(in_flight), invisible_ms=2000,
                                        polling_ms=1000)
            in_flight += got
        assert len(in_flight) == 4
        cluster.create_group(group, orderly=True)  # updateSubGroup -o true
        time.sleep(3.5)  # past the proxy's group cache (3 s): the proxy pops orderly from now on
        acked: set[str] = set()
        end = time.monotonic() + 60
        while acked != sent and time.monotonic() < end:
            _, got, _ = rawgrpc.receive(stub, topic, group, batch=8, invisible_ms=5000, polling_ms=1000)
            if got:
                assert rawgrpc.ack(stub, topic, group, *got).status.code in (Code.OK, Code.MULTIPLE_RESULTS)
                acked |= {m.system_properties.message_id for m in got}
        assert acked == sent, f"stranded: {sent - acked}"


def test_orbitmq_local_auto_creates_topics_and_warns_of_unknown_keys(tmp_path: Path) -> None:
    """`orbitmq local` (a quick start) creates a topic on first use, and says so when a key on its
    command line is known to none of its services."""
    runner = ProcessRunner(tmp_path)
    ns, broker, proxy = free_port(), free_port(), free_port()
    try:
        proc = runner.start("local", ["--data-dir", str(tmp_path / "data"), "--namesrv-port", str(ns),
                                      "--broker-port", str(broker), "--proxy-port", str(proxy), "--one-process",
                                      "metricsExporterType=DISABLE", "fooBarKey=1", "traceEnable=true"],
                            ready_port=proxy, ready_text="OrbitMQ is running", timeout=60, name="local")
        log = proc.log_text()
        assert "unknown config keys ignored" in log and "fooBarKey" in log, log
        with grpc.insecure_channel(f"127.0.0.1:{proxy}") as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            response = _route(stub, "TopicTest")
            assert response.status.code == Code.OK, response.status
            assert len(response.message_queues) == 4
            sent = rawgrpc.send(stub, rawgrpc.message("TopicTest", b"hello"))
            assert sent.status.code == Code.OK
        # traceEnable=true alone is enough: `orbitmq local` turns the broker's traceTopicEnable on for it
        msg_id = sent.entries[0].message_id
        end = time.monotonic() + 20
        out = None
        while time.monotonic() < end:
            out = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "queryMsgTraceById", "-i", msg_id,
                                  "-n", f"127.0.0.1:{ns}", "--json"], capture_output=True, text=True, timeout=60)
            if out.returncode == 0 and '"Pub"' in out.stdout:
                break
            time.sleep(0.5)
        assert out is not None and '"Pub"' in out.stdout, (out.stdout, out.stderr)
    finally:
        runner.stop_all()
