"""`orbitmq local --ha`: the controller quick start serves official clients and stops every child."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from tests.support import ProcessRunner, free_port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A child that exited but was not reaped yet is gone for our purpose.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_local_ha_serves_clients_and_stops_every_child(procs: ProcessRunner, tmp_path, stop_signal: int) -> None:
    ports = {name: [free_port() for _ in range(3)] for name in ("controller", "raft", "broker")}
    namesrv_port, proxy_port = free_port(), free_port()
    data = tmp_path / "data"
    proc = procs.start("local", [
        "--ha", "--data-dir", str(data), "--namesrv-port", str(namesrv_port), "--proxy-port", str(proxy_port),
        "--controller-ports", ",".join(map(str, ports["controller"])),
        "--raft-ports", ",".join(map(str, ports["raft"])), "--broker-ports", ",".join(map(str, ports["broker"]))],
        ready_text="Press Ctrl-C", ready_port=proxy_port, timeout=120)
    text = proc.log_text()
    endpoint = f"127.0.0.1:{proxy_port}"
    assert f"gRPC endpoint: {endpoint}" in text
    for port in ports["controller"] + ports["raft"] + ports["broker"] + [namesrv_port]:
        assert f"127.0.0.1:{port}" in text
    assert "allAckInSyncStateSet=true" in text and "enableControllerMode=true" in text
    pids = [int(p) for p in re.findall(r"\(pid (\d+), log ", text)]
    assert len(pids) == 6 and all(_alive(p) for p in pids)

    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), ("HaLocalTopic",))
    producer.startup()
    try:
        msg = Message()
        msg.topic = "HaLocalTopic"  # created on first use
        msg.body = b"hello ha"
        message_id = producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(), request_timeout=5), "HaLocalGroup",
                              {"HaLocalTopic": FilterExpression()}, await_duration=5)
    consumer.startup()
    try:
        got = []
        for _ in range(6):
            got += consumer.receive(16, 20)
            if got:
                break
        assert [(m.message_id, m.body) for m in got] == [(message_id, b"hello ha")]
        consumer.ack(got[0])
    finally:
        consumer.shutdown()

    proc.popen.send_signal(stop_signal)
    assert proc.popen.wait(timeout=90) == 0
    assert "OrbitMQ stopped." in proc.log_text()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, [p for p in pids if _alive(p)]
        time.sleep(0.1)
    assert (data / "broker-a-0").is_dir() and (data / "controller-n0").is_dir()
