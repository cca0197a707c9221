"""A broker group killed under a Remoting producer: sync and async sends move to the other group,
latency fault tolerance isolates the dead one, and with every group gone the error says so.
Before that (this module's brokers create topics on first send), a topic without a route is sent
through TBW102's route, as upstream's producer does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from orbitmq.client import MQClientError, SendStatus
from orbitmq.common.message import Message
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.instance import CONNECT_BROKER_EXCEPTION
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer
from tests.sdk.remoting_client.cluster import RemotingCluster, start_remoting_cluster, unique


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    c = start_remoting_cluster(tmp_path_factory.mktemp("remoting-failover"), autoCreateTopicEnable="true")
    try:
        yield c
    finally:
        c.runner.stop_all()


class Attempts:
    """A send hook recording (broker group, failed) of every attempt."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []

    def before(self, msg: object, mq: object, addr: str) -> None:
        return None

    def after(self, msg: object, mq: object, addr: str, result: object, error: object, cost: int) -> None:
        self.seen.append((mq.broker_name, error is not None))  # type: ignore[attr-defined]


async def test_a_new_topic_goes_through_the_default_route(cluster: RemotingCluster) -> None:
    topic = unique("RcAuto")
    cfg = RemotingClientConfig(namesrv_addr=cluster.namesrv, client_ip="127.0.0.1")
    async with AsyncDefaultMQProducer(unique("PG"), cfg) as producer:
        first = await producer.send(Message(topic, b"first"))
        assert first.status == SendStatus.SEND_OK and first.topic == topic
        # the broker created it and registered it: the real route replaces TBW102's
        deadline = asyncio.get_running_loop().time() + 10
        while not await producer.instance.update_topic_route(topic):
            assert asyncio.get_running_loop().time() < deadline, producer.instance.last_route_error
            await asyncio.sleep(0.2)
        queues = await producer.fetch_publish_message_queues(topic)
        assert {q.broker_name for q in queues} == {first.broker_name}


async def test_sends_move_to_the_live_broker_group(cluster: RemotingCluster) -> None:
    topic = cluster.create_topic(unique("RcFail"))
    cfg = RemotingClientConfig(namesrv_addr=cluster.namesrv, client_ip="127.0.0.1")
    sync_p = AsyncDefaultMQProducer(unique("PG"), cfg, send_latency_fault_enable=True)
    async_p = AsyncDefaultMQProducer(unique("PG"), cfg)
    sync_hook, async_hook = Attempts(), Attempts()
    sync_p.send_hooks.append(sync_hook)
    async_p.send_hooks.append(async_hook)
    await sync_p.start()
    await async_p.start()
    try:
        warm = [await p.send(Message(topic, b"warm")) for p in (sync_p, async_p) for _ in range(8)]
        assert {r.broker_name for r in warm} == {"broker-a", "broker-b"}
        cluster.processes["broker-b"].kill()
        sync_results = [await sync_p.send(Message(topic, f"s{i}".encode())) for i in range(6)]
        async_results = await asyncio.gather(*(async_p.send_async(Message(topic, f"a{i}".encode()))
                                               for i in range(6)))
        for results in (sync_results, async_results):
            assert all(r.status == SendStatus.SEND_OK and r.broker_name == "broker-a" for r in results)
        for hook in (sync_hook, async_hook):  # the dead group was tried, failed, and the retry went to the other
            assert ("broker-b", True) in hook.seen
        assert not sync_p.fault_strategy.tolerance.is_available("broker-b")
        assert sync_p.fault_strategy.tolerance.is_available("broker-a")
        # isolated: after the first failure no sync send tries broker-b again (for 10 s)
        first_failure = sync_hook.seen.index(("broker-b", True))
        assert all(name == "broker-a" for name, _ in sync_hook.seen[first_failure + 1:])

        cluster.processes["broker-a"].kill()
        with pytest.raises(MQClientError) as gone:
            await async_p.send(Message(topic, b"nowhere"))
        assert gone.value.code == CONNECT_BROKER_EXCEPTION
        assert "Send [3] times, still failed" in str(gone.value)
    finally:
        await sync_p.shutdown()
        await async_p.shutdown()


