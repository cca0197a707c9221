"""A NameServer killed and restarted under a running producer and push consumer (issue 25's faults).

While the NameServer is down, both clients live on their cached routes: sends still land and
messages are still consumed, the failed route polls are only logged. Once it is back on the same
address and the brokers have registered again, the clients' next polls refresh their routes: a
queue set the topic gains on broker-b afterwards is used by the producer and pulled by the
consumer. Own cluster (it restarts a process); brokers register every second.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator

import pytest

from orbitmq.common.message import Message, MessageExt
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import (
    AsyncDefaultMQPushConsumer,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
)
from orbitmq.remoting_client.producer.producer import AsyncDefaultMQProducer
from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_remoting_cluster, unique


@pytest.fixture(scope="module")
def ns_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    cluster = start_remoting_cluster(tmp_path_factory.mktemp("remoting-ns-fault"), registerNameServerPeriod="1000")
    yield from serve_cluster(request, cluster)


async def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:  # noqa: ANN001, ASYNC109
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_clients_outlive_a_namesrv_restart_and_refresh_routes(ns_cluster: RemotingCluster) -> None:
    cluster = ns_cluster
    topic = cluster.create_topic(unique("NsFault"), queues=2, brokers=["broker-a"])
    group = cluster.create_group(unique("CG"))
    cfg = {"namesrv_addr": cluster.namesrv, "client_ip": "127.0.0.1", "rebalance_interval": 1.0,
           "persist_consumer_offset_interval": 1.0, "heartbeat_broker_interval": 2.0,
           "poll_name_server_interval": 1.0}
    got: dict[bytes, str] = {}  # body -> the broker it was pulled from

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got[m.body] = ctx.message_queue.broker_name
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncDefaultMQPushConsumer(group, RemotingClientConfig(**cfg, instance_name="ns-c"),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    producer = AsyncDefaultMQProducer(unique("PG"), RemotingClientConfig(**cfg, instance_name="ns-p"))
    await producer.start()
    await consumer.start()
    sent: dict[bytes, str] = {}  # body -> the broker it went to
    failures: list[str] = []
    counter = itertools.count()
    stop = asyncio.Event()

    async def produce() -> None:
        while not stop.is_set():
            body = f"n{next(counter)}".encode()
            try:
                sent[body] = (await producer.send(Message(topic, body))).broker_name
            except Exception as exc:  # noqa: BLE001  (counted: the test asserts there were none)
                failures.append(f"{body!r}: {exc}")
            await asyncio.sleep(0.02)

    task = asyncio.create_task(produce())
    try:
        await wait_for(lambda: len(got) >= 20, what="consumption before the fault")
        ns_proc = cluster.processes["namesrv"]
        await asyncio.to_thread(ns_proc.kill)
        down_sent, down_got = len(sent), len(got)
        await asyncio.sleep(3.0)  # three route polls and heartbeats fail meanwhile
        assert len(sent) > down_sent + 20 and len(got) > down_got + 20  # cached routes carry both on
        assert cluster.restart_namesrv is not None
        cluster.processes["namesrv"] = await asyncio.to_thread(cluster.restart_namesrv)
        # broker-b gets queues of the topic only now: clients can learn of them from the new NameServer alone
        await asyncio.to_thread(cluster.create_topic, topic, 2)
        await wait_for(lambda: "broker-b" in sent.values(), what="a send to broker-b after the restart")
        await wait_for(lambda: sum(mq.topic == topic for mq in consumer.rebalance.process_queue_table) == 4,
                       what="the consumer pulling broker-b's queues too")
        stop.set()
        await task
        await wait_for(lambda: set(got) == set(sent), what="every message consumed")
        assert "broker-b" in got.values()
        assert failures == []
    finally:
        stop.set()
        await task
        await consumer.shutdown()
        await producer.shutdown()
