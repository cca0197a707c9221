"""Slave Acting Master (issue 28, item 1): a classic master/slave set with enableSlaveActingMaster,
enableRemoteEscape and totalReplicas=2, a second broker set to escape to, and a NameServer with
supportActingMaster and notifyMinBrokerIdChanged.

The master is killed with kill -9. The NameServer drops it after brokerNotActiveTimeoutMillis and
routes the slave as broker-a's brokerId 0 with read-only queues; the slave acts as master: a push
consumer keeps receiving from it where the group had got to (offsets copied from the master), and
commits its offsets there; delayed messages sent before the kill come due on the slave and escape
to broker-b, where the consumer receives them. When the master returns, BrokerPreOnlineService
takes the slave's offsets back before it registers, so the group goes on from where it was on the
slave and nothing it consumed is delivered again.
"""

from __future__ import annotations

import time
from pathlib import Path

from orbitmq import AsyncSimpleConsumer, ClientConfig
from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import AsyncDefaultMQPushConsumer, ConsumeConcurrentlyStatus
from tests.support import ProcessRunner, astart_broker, free_port, start_namesrv
from tests.support.ha_cluster import PROXY_BOOT_TEXT
from tests.support.process import ManagedProcess
from tests.support.waiting import wait_until

TOPIC, GROUP, CLUSTER = "ActingTopic", "ActingGroup", "ActingCluster"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
REVIVE_TOPIC = f"rmq_sys_REVIVE_LOG_{CLUSTER}"
DELAY_LEVEL = 3  # 10 s


# slaveReadEnable: without it a slave refuses every pull (PullMessageProcessor#rejectRequest), acting or not.
ACTING = {"enableSlaveActingMaster": "true", "enableRemoteEscape": "true", "totalReplicas": 2, "slaveReadEnable": "true",
          "brokerNotActiveTimeoutMillis": 3000, "registerNameServerPeriod": 1000, "brokerClusterName": CLUSTER}


class ActingSets:
    """broker-a (master + slave, acting master on) and broker-b (a master to escape to), one
    NameServer with supportActingMaster and notifyMinBrokerIdChanged, the topic and group on both."""

    def __init__(self, runner: ProcessRunner, tmp_path: Path, api: MQClientAPI) -> None:
        self.runner, self.tmp_path, self.api = runner, tmp_path, api
        self.ports = {name: free_port() for name in ("master", "slave", "b")}
        self.ha_port = free_port()
        self.procs: dict[str, ManagedProcess] = {}
        self.namesrv = ""
        self.master, self.slave, self.broker_b = (f"127.0.0.1:{self.ports[n]}" for n in ("master", "slave", "b"))

    ROLES = {"slave": {"brokerName": "broker-a", "brokerId": 1, "brokerRole": "SLAVE"},
             "master": {"brokerName": "broker-a", "brokerId": 0, "brokerRole": "ASYNC_MASTER"},
             "b": {"brokerName": "broker-b", "brokerId": 0, "brokerRole": "ASYNC_MASTER", "totalReplicas": 1}}

    async def start_broker(self, name: str) -> None:
        keys = {**ACTING, **self.ROLES[name]}
        if name == "master":
            keys["haListenPort"] = self.ha_port
        self.procs[name], _ = await astart_broker(self.runner, self.tmp_path, self.namesrv, name,
                                                  port=self.ports[name], store=self.tmp_path / f"store-{name}",
                                                  **keys)

    async def start(self) -> None:
        _, self.namesrv = start_namesrv(self.runner, "supportActingMaster=true", "notifyMinBrokerIdChanged=true",
                                        "scanNotActiveBrokerInterval=1000", name="namesrv")
        # Pre-online: the slave, alone, starts at once; the master takes its (empty) offsets first.
        for name in ("slave", "master", "b"):
            await self.start_broker(name)
        for addr in (self.master, self.broker_b):
            await self.api.create_topic(addr, TopicConfig(TOPIC, 1, 1))
            await self.api.create_subscription_group(addr, SubscriptionGroupConfig(GROUP))
        await wait_until(self.both_in_route, "master and slave of broker-a in the route")

    async def broker_a_addrs(self) -> dict[int, str]:
        route = await self.api.get_topic_route(self.namesrv, TOPIC)
        return next((bd.broker_addrs for bd in route.broker_datas if bd.broker_name == "broker-a"), {})

    async def both_in_route(self) -> bool:
        return await self.broker_a_addrs() == {0: self.master, 1: self.slave}

    async def slave_routed_as_master(self) -> bool:
        return await self.broker_a_addrs() == {0: self.slave}

    async def send(self, body: bytes, delay_level: int = 0) -> None:
        msg = Message(TOPIC, body)
        if delay_level:
            msg.properties[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)
        await self.api.send_message(self.master, "broker-a", msg, "ActingPG", 0)

    async def kill_master(self) -> None:
        self.procs["master"].kill()
        await wait_until(self.slave_routed_as_master, "the slave routed as broker-a's brokerId 0", timeout=30)


async def test_slave_acts_as_master_and_the_master_takes_its_offsets_back(tmp_path: Path) -> None:
    runner = ProcessRunner(tmp_path)
    api = MQClientAPI(timeout=5)
    try:
        sets = ActingSets(runner, tmp_path, api)
        await sets.start()
        namesrv, master, slave, broker_b = sets.namesrv, sets.master, sets.slave, sets.broker_b
        both_in_route = sets.both_in_route

        bodies = [f"m-{i}".encode() for i in range(10)]
        for body in bodies:
            await sets.send(body)
        await api.update_consumer_offset(master, GROUP, TOPIC, 0, 5)  # the group is at m-5

        async def slave_has_offset() -> bool:  # SlaveSynchronize copies every 10 s
            return await api.query_consumer_offset(slave, GROUP, TOPIC, 0) == 5
        await wait_until(slave_has_offset, "the group's offset copied to the slave", timeout=40)

        delayed = [f"d-{i}".encode() for i in range(3)]
        for body in delayed:
            await sets.send(body, DELAY_LEVEL)

        async def delayed_on_slave() -> bool:
            return await api.get_max_offset(slave, SCHEDULE_TOPIC, DELAY_LEVEL - 1) >= 3
        await wait_until(delayed_on_slave, "the delayed messages replicated to the slave", timeout=20)

        await sets.kill_master()

        got: list[bytes] = []

        def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        cfg = RemotingClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", poll_name_server_interval=1.0,
                                   rebalance_interval=1.0, persist_consumer_offset_interval=1.0,
                                   heartbeat_broker_interval=1.0)
        consumer = AsyncDefaultMQPushConsumer(GROUP, cfg, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            async def received_backlog_and_delayed() -> bool:
                return set(got) >= set(bodies[5:]) | set(delayed)
            await wait_until(received_backlog_and_delayed, "m-5..m-9 from the slave and the delayed messages",
                             timeout=60, seen=lambda: got)
            assert not set(got) & set(bodies[:5]), "messages before the group's offset delivered again"
            assert sorted(b for b in got if b.startswith(b"m-")) == bodies[5:], got

            async def slave_offset_committed() -> bool:
                return await api.query_consumer_offset(slave, GROUP, TOPIC, 0) == 10
            await wait_until(slave_offset_committed, "the consumer's offset committed to the acting slave")
            b_delivered = await api.get_max_offset(broker_b, TOPIC, 0)
            assert b_delivered >= 3, "the delayed messages escaped to broker-b"
        finally:
            await consumer.shutdown()

        await sets.start_broker("master")  # isolated until BrokerPreOnlineService took the slave's offsets back
        await wait_until(both_in_route, "the master back in the route", timeout=40)
        assert await api.query_consumer_offset(master, GROUP, TOPIC, 0) == 10

        got.clear()
        late = b"m-late"
        await sets.send(late)
        consumer = AsyncDefaultMQPushConsumer(GROUP, cfg, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            async def received_late() -> bool:
                return late in got
            await wait_until(received_late, "a message sent after the master's return")
            assert not set(got) & set(bodies), f"consumed messages delivered again after the return: {got}"
        finally:
            await consumer.shutdown()
    finally:
        await api.close()
        runner.stop_all()


async def test_pop_through_the_proxy_on_an_acting_slave_and_its_revive_elsewhere(tmp_path: Path) -> None:
    """gRPC consumers (POP through the proxy) keep receiving and acking from the acting slave. Its
    checkpoints and acks escape to broker-b's revive log (EscapeBridge#putMessageToSpecificQueue);
    a message left un-acked is revived by broker-b, which reads it back from broker-a's acting
    slave, into its retry topic, and received again."""
    runner = ProcessRunner(tmp_path)
    api = MQClientAPI(timeout=5)
    try:
        sets = ActingSets(runner, tmp_path, api)
        await sets.start()
        bodies = [f"p-{i}".encode() for i in range(6)]
        for body in bodies:
            await sets.send(body)

        async def on_slave() -> bool:
            return await api.get_max_offset(sets.slave, TOPIC, 0) >= len(bodies)
        await wait_until(on_slave, "the messages replicated to the slave")

        async def slave_knows_the_topic_and_group() -> bool:  # SlaveSynchronize copies every 10 s
            topics = await api.invoke(sets.slave, RequestCode.GET_ALL_TOPIC_CONFIG)
            groups = await api.invoke(sets.slave, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            return TOPIC in topics.body.decode() and GROUP in groups.body.decode()
        await wait_until(slave_knows_the_topic_and_group, "the topic and group on the slave", timeout=40)
        await sets.kill_master()

        proxy_port = free_port()
        await runner.astart("proxy", ["-n", sets.namesrv, "--port", str(proxy_port)], ready_port=proxy_port,
                            ready_text=PROXY_BOOT_TEXT, timeout=30, name="proxy")
        received: list[bytes] = []
        async with AsyncSimpleConsumer(ClientConfig(f"127.0.0.1:{proxy_port}"), GROUP, {TOPIC: "*"},
                                       long_polling_timeout=1) as consumer:
            end = time.monotonic() + 40
            while len(received) < len(bodies) and time.monotonic() < end:
                for message in await consumer.receive(16, invisible_duration=10):
                    received.append(message.body)
                    if message.body != b"p-0":  # p-0 stays un-acked: it must come back
                        await consumer.ack(message)
            assert sorted(received) == bodies, "every message popped from the acting slave once"
            escaped_to_b = await api.get_max_offset(sets.broker_b, REVIVE_TOPIC, 0)
            for queue_id in range(1, 8):
                escaped_to_b += await api.get_max_offset(sets.broker_b, REVIVE_TOPIC, queue_id)
            # at least one checkpoint and the five acks
            assert escaped_to_b >= len(bodies), "checkpoints and acks written to broker-b's revive log"

            again: list[bytes] = []
            end = time.monotonic() + 60
            while b"p-0" not in again and time.monotonic() < end:
                for message in await consumer.receive(16, invisible_duration=30):
                    again.append(message.body)
                    await consumer.ack(message)
            assert again == [b"p-0"], f"only the un-acked message comes back, once: {again}"
    finally:
        await api.close()
        runner.stop_all()
