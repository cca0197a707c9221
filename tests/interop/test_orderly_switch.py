"""A group consumed concurrently, its push consumers stopped, switched to orderly (updateSubGroup
-o true), new push consumers started: what is sent after the switch arrives in order per message
group (issue 22, item 6). The stopped consumers' long polls still wait in the broker; before the
fix one of them took each queue's first new message, and its nack revived it behind the later
ones (bodies 1, 2, 3, 4, 0)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
)

from tests.interop.harness import Cluster, unique
from tests.interop.test_python_push_consumer import _send
from tests.support import free_port

GROUPS = ["g-a", "g-b", "g-c", "g-d"]
PER_GROUP = 5


class _ByGroup(MessageListener):
    """Bodies "<message group>:<index>", in the order they were consumed, per message group."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, list[str]] = defaultdict(list)

    def consume(self, message) -> ConsumeResult:
        group, index = message.body.decode().split(":")
        with self.lock:
            self.seen[group].append(index)
        return ConsumeResult.SUCCESS

    def wait_for(self, count: int, timeout: float) -> dict[str, list[str]]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if sum(len(v) for v in self.seen.values()) >= count:
                    break
            time.sleep(0.1)
        with self.lock:
            return {g: list(v) for g, v in self.seen.items()}


def _consumers(proxy: str, group: str, topic: str, listener: MessageListener) -> list[PushConsumer]:
    consumers = []
    for _ in range(2):
        consumer = PushConsumer(ClientConfiguration(proxy, Credentials(), request_timeout=5), group, listener,
                                {topic: FilterExpression()}, consumption_thread_count=4)
        consumer.startup()
        consumers.append(consumer)
    return consumers


def _send_round(cluster: Cluster, topic: str, prefix: str) -> None:
    bodies = [f"{g}:{prefix}{i}".encode() for i in range(PER_GROUP) for g in GROUPS]
    _send(cluster, topic, bodies, [b.decode().split(":")[0] for b in bodies])


def test_messages_sent_after_the_switch_to_orderly_arrive_in_order(cluster: Cluster) -> None:
    # RocketMQ's default long polling (20 s), so the stopped consumers' polls outlive the switch.
    port = free_port()
    proxy_proc = cluster.runner.start("proxy", ["-n", cluster.namesrv, "--port", str(port)], ready_port=port,
                                      name="proxy-orderly-switch")
    proxy = f"127.0.0.1:{port}"
    try:
        topic = cluster.create_topic(unique("SwitchOrderT"), queues=2, message_type="FIFO")
        group = cluster.create_group(unique("SwitchOrderG"))
        before = _ByGroup()
        consumers = _consumers(proxy, group, topic, before)
        try:
            _send_round(cluster, topic, "p")
            assert sum(map(len, before.wait_for(len(GROUPS) * PER_GROUP, 30).values())) == len(GROUPS) * PER_GROUP
        finally:
            for consumer in consumers:
                consumer.shutdown()
        cluster.create_group(group, orderly=True)  # updateSubGroup -o true
        time.sleep(3.5)  # past the proxy's group cache (3 s): new consumers are told fifo
        after = _ByGroup()
        consumers = _consumers(proxy, group, topic, after)
        try:
            _send_round(cluster, topic, "")
            seen = after.wait_for(len(GROUPS) * PER_GROUP, 30)
        finally:
            for consumer in consumers:
                consumer.shutdown()
        expected = [str(i) for i in range(PER_GROUP)]
        assert {g: [i for i in seen.get(g, []) if not i.startswith("p")] for g in GROUPS} \
            == {g: expected for g in GROUPS}, seen
    finally:
        proxy_proc.stop()
