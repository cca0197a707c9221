"""`orbitmq local`: one process serving official clients, auto-creating topics, stopping cleanly."""

from __future__ import annotations

import signal

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from tests.support import ProcessRunner, free_port


def test_local_cluster_serves_clients_and_stops_on_sigterm(procs: ProcessRunner, tmp_path) -> None:
    ports = [free_port() for _ in range(3)]
    data = tmp_path / "data"
    proc = procs.start("local", ["--data-dir", str(data), "--namesrv-port", str(ports[0]),
                                 "--broker-port", str(ports[1]), "--proxy-port", str(ports[2])],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=30)
    endpoint = f"127.0.0.1:{ports[2]}"
    assert f"gRPC endpoint: {endpoint}" in proc.log_text()
    assert "from rocketmq import" in proc.log_text()

    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), ("LocalTopic",))
    producer.startup()
    try:
        msg = Message()
        msg.topic = "LocalTopic"  # created on first use
        msg.body = b"hello local"
        message_id = producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(), request_timeout=5), "LocalGroup",
                              {"LocalTopic": FilterExpression()}, await_duration=5)
    consumer.startup()
    try:
        got = []
        for _ in range(5):
            got += consumer.receive(16, 20)
            if got:
                break
        assert [(m.message_id, m.body) for m in got] == [(message_id, b"hello local")]
        consumer.ack(got[0])
    finally:
        consumer.shutdown()

    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(timeout=20) == 0
    assert "OrbitMQ stopped." in proc.log_text()
    assert (data / "store" / "commitlog").is_dir()
