"""Quick end-to-end: produce with the sync Producer, receive with the SimpleConsumer."""

from __future__ import annotations

from orbitmq import ClientConfig, Message, Producer, SimpleConsumer
from tests.interop.harness import unique
from tests.sdk.conftest import SdkEnv


def test_send_and_receive(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkSmoke"), queues=2)
    group = env.cluster.create_group(unique("SdkSmokeG"))
    config = ClientConfig(env.endpoints, request_timeout=5)
    with Producer(config, [topic], linger=0.01) as producer:
        receipt = producer.send(Message(topic, b"one", tag="t1", keys=["k1"], properties={"a": "b"}))
        assert receipt.message_id
    with SimpleConsumer(config, group, {topic: "*"}, long_polling_timeout=2) as consumer:
        got = []
        for _ in range(5):
            got += consumer.receive(16, 10)
            if got:
                break
        assert [(m.body, m.tag, m.keys, m.properties.get("a"), m.message_id) for m in got] == [
            (b"one", "t1", ["k1"], "b", receipt.message_id)]
        consumer.ack(got[0])
