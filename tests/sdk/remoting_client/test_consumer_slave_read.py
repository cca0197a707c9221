"""Reads from a slave, live (issue 25's push consumer; issue 28's slaveReadEnable): a classic
master/slave pair with slaveReadEnable and accessMessageInMemoryMaxRatio=0, so the master suggests
the slave (suggestWhichBrokerId) whenever a pull leaves a backlog behind; the Remoting push
consumer follows the suggestion, and keeps receiving from the slave while the master is down.
Against OrbitMQ's servers and Apache RocketMQ's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message, MessageExt
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import AsyncDefaultMQPushConsumer, ConsumeConcurrentlyStatus
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer
from tests.sdk.remoting_client.cluster import unique
from tests.support import ProcessRunner, astart_broker, free_port, start_namesrv

TOPIC, GROUP = "SlaveReadTopic", "SlaveReadGroup"


async def wait_for(predicate: Callable[[], object], what: str, timeout: float = 30.0,  # noqa: ASYNC109
                   what_else: Callable[[], object] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} {what_else()}")
        await asyncio.sleep(0.1)


ROLES = {"slave": {"brokerId": 1, "brokerRole": "SLAVE"},
         "master": {"brokerId": 0, "brokerRole": "ASYNC_MASTER", "accessMessageInMemoryMaxRatio": 0}}


async def start_orbitmq_pair(runner: ProcessRunner, tmp_path: Path) -> tuple[str, str, str, dict[str, Any]]:
    """NameServer, then slave and master (the slave first: it waits for its master's registration)."""
    _, namesrv = start_namesrv(runner, name="namesrv")
    ports = {"master": free_port(), "slave": free_port()}
    procs = {}
    for name in ("slave", "master"):
        procs[name], _ = await astart_broker(
            runner, tmp_path, namesrv, name, port=ports[name], store=tmp_path / f"store-{name}",
            brokerClusterName="SlaveReadCluster", brokerName="broker-sr", registerNameServerPeriod=1000,
            haListenPort=free_port(), slaveReadEnable="true", **ROLES[name])
    return namesrv, f"127.0.0.1:{ports['master']}", f"127.0.0.1:{ports['slave']}", procs


async def start_apache_pair(runner: ProcessRunner, tmp_path: Path) -> tuple[str, str, str, dict[str, Any]]:
    """The same pair of Apache RocketMQ 5.5.0's servers (tests/support/apache.py)."""
    from tests.support.apache import Apache

    def start() -> tuple[str, str, str, dict[str, Any]]:
        apache = Apache(runner)
        _, namesrv = apache.namesrv()
        brokers = {name: apache.broker(namesrv, name, broker_name="broker-sr", cluster="SlaveReadCluster",
                                       broker_id=int(ROLES[name]["brokerId"]), wait=False, slaveReadEnable="true",
                                       **{k: v for k, v in ROLES[name].items() if k != "brokerId"})
                   for name in ("master", "slave")}
        for broker in brokers.values():
            apache.wait_broker(broker, namesrv)
        return (namesrv, brokers["master"].addr, brokers["slave"].addr,
                {name: b.process for name, b in brokers.items()})

    return await asyncio.to_thread(start)


@pytest.mark.parametrize("kind", ["orbitmq", pytest.param("apache", marks=pytest.mark.xdist_group("slave_read_apache"))])
async def test_push_consumer_follows_the_slave_suggestion_and_outlives_the_master(tmp_path: Path, monkeypatch,
                                                                                  kind: str) -> None:
    runner = ProcessRunner(tmp_path)
    try:
        start = start_orbitmq_pair if kind == "orbitmq" else start_apache_pair
        namesrv, master, slave, procs = await start(runner, tmp_path)
        api = MQClientAPI(timeout=5)
        try:
            await api.create_topic(master, TopicConfig(TOPIC, 1, 1))
            await api.create_subscription_group(master, SubscriptionGroupConfig(GROUP))
            deadline = time.monotonic() + 30
            while True:  # both replicas in the route, the topic on the slave too
                try:
                    route = await api.get_topic_route(namesrv, TOPIC)
                    if route.broker_datas and route.broker_datas[0].broker_addrs == {0: master, 1: slave}:
                        break
                except Exception:  # noqa: BLE001 -- not routed yet
                    pass
                assert time.monotonic() < deadline, "master and slave in the route"
                await asyncio.sleep(0.3)

            cfg = RemotingClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", poll_name_server_interval=1.0,
                                       rebalance_interval=1.0, persist_consumer_offset_interval=1.0,
                                       heartbeat_broker_interval=1.0)

            async def send(bodies: list[bytes]) -> None:
                async with AsyncDefaultMQProducer(unique("SrPG"), cfg) as producer:
                    for body in bodies:
                        await producer.send(Message(TOPIC, body))

            async def on_slave(count: int) -> bool:
                return await api.get_max_offset(slave, TOPIC, 0) >= count

            first = [f"sr-{i}".encode() for i in range(20)]
            await send(first)
            await wait_for_async(lambda: on_slave(20), "the first 20 on the slave")

            async def slave_knows_the_topic() -> bool:  # SlaveSynchronize copied the topic config
                response = await api.invoke(slave, RequestCode.GET_ALL_TOPIC_CONFIG)
                return response.code == ResponseCode.SUCCESS and TOPIC in response.body.decode()
            await wait_for_async(slave_knows_the_topic, "the topic on the slave", timeout=60)

            pulled_from: list[str] = []
            original = MQClientAPI.pull_message

            async def recording(self, broker_addr, header, timeout=None):  # noqa: ASYNC109 (the patched signature)
                if header.topic != TOPIC:
                    return await original(self, broker_addr, header, timeout)
                try:
                    result = await original(self, broker_addr, header, timeout)
                except Exception as exc:
                    pulled_from.append(f"{broker_addr} {type(exc).__name__}: {exc}")
                    raise
                pulled_from.append(f"{broker_addr} {result.status.name} {len(result.messages)}")
                return result

            monkeypatch.setattr(MQClientAPI, "pull_message", recording)
            got: list[bytes] = []

            def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
                got.extend(m.body for m in msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            def consumer() -> AsyncDefaultMQPushConsumer:
                c = AsyncDefaultMQPushConsumer(GROUP, cfg, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                               pull_batch_size=2)
                c.subscribe(TOPIC)
                c.register_message_listener(listener)
                return c

            c = consumer()
            await c.start()
            try:
                await wait_for(lambda: set(got) >= set(first), "the first 20", what_else=lambda: pulled_from[-8:])
            finally:
                await c.shutdown()
            pulled = [p.split(" ")[0] for p in pulled_from]
            assert pulled[0] == master  # the first pull asks the master...
            assert slave in pulled  # ...which, with a backlog behind it, sends the consumer to the slave

            later = [f"sr-late-{i}".encode() for i in range(10)]
            await send(later)
            await wait_for_async(lambda: on_slave(30), "all 30 on the slave")
            procs["master"].kill()
            c = consumer()  # the master is gone: routes, offsets and pulls come from the slave
            await c.start()
            try:
                await wait_for(lambda: set(got) >= set(later), "the 10 sent before the master died", timeout=45)
            finally:
                await c.shutdown()
        finally:
            await api.close()
    finally:
        runner.stop_all()


async def wait_for_async(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():  # type: ignore[misc]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)
