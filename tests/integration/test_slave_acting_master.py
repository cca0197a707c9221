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

from pathlib import Path

from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import AsyncDefaultMQPushConsumer, ConsumeConcurrentlyStatus
from tests.support import ProcessRunner, astart_broker, free_port, start_namesrv
from tests.support.waiting import wait_until

TOPIC, GROUP, CLUSTER = "ActingTopic", "ActingGroup", "ActingCluster"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DELAY_LEVEL = 3  # 10 s


# slaveReadEnable: without it a slave refuses every pull (PullMessageProcessor#rejectRequest), acting or not.
ACTING = {"enableSlaveActingMaster": "true", "enableRemoteEscape": "true", "totalReplicas": 2, "slaveReadEnable": "true",
          "brokerNotActiveTimeoutMillis": 3000, "registerNameServerPeriod": 1000, "brokerClusterName": CLUSTER}


async def test_slave_acts_as_master_and_the_master_takes_its_offsets_back(tmp_path: Path) -> None:
    runner = ProcessRunner(tmp_path)
    api = MQClientAPI(timeout=5)
    try:
        _, namesrv = start_namesrv(runner, "supportActingMaster=true", "notifyMinBrokerIdChanged=true",
                                   "scanNotActiveBrokerInterval=1000", name="namesrv")
        ports = {name: free_port() for name in ("master", "slave", "b")}
        roles = {"slave": {"brokerName": "broker-a", "brokerId": 1, "brokerRole": "SLAVE"},
                 "master": {"brokerName": "broker-a", "brokerId": 0, "brokerRole": "ASYNC_MASTER"},
                 "b": {"brokerName": "broker-b", "brokerId": 0, "brokerRole": "ASYNC_MASTER", "totalReplicas": 1}}
        ha_port = free_port()
        procs = {}

        async def start(name: str) -> None:
            keys = {**ACTING, **roles[name]}
            if name == "master":
                keys["haListenPort"] = ha_port
            procs[name], _ = await astart_broker(runner, tmp_path, namesrv, name, port=ports[name],
                                                 store=tmp_path / f"store-{name}", **keys)

        for name in ("slave", "master", "b"):
            await start(name)
        master, slave, broker_b = (f"127.0.0.1:{ports[n]}" for n in ("master", "slave", "b"))

        async def broker_a_addrs() -> dict[int, str]:
            route = await api.get_topic_route(namesrv, TOPIC)
            return next((bd.broker_addrs for bd in route.broker_datas if bd.broker_name == "broker-a"), {})

        # Pre-online: with no slave online yet the master starts at once; the slave then copies.
        for addr in (master, broker_b):
            await api.create_topic(addr, TopicConfig(TOPIC, 1, 1))
            await api.create_subscription_group(addr, SubscriptionGroupConfig(GROUP))

        async def both_in_route() -> bool:
            return await broker_a_addrs() == {0: master, 1: slave}
        await wait_until(both_in_route, "master and slave of broker-a in the route")

        bodies = [f"m-{i}".encode() for i in range(10)]
        for body in bodies:
            await api.send_message(master, "broker-a", Message(TOPIC, body), "ActingPG", 0)
        await api.update_consumer_offset(master, GROUP, TOPIC, 0, 5)  # the group is at m-5

        async def slave_has_offset() -> bool:  # SlaveSynchronize copies every 10 s
            return await api.query_consumer_offset(slave, GROUP, TOPIC, 0) == 5
        await wait_until(slave_has_offset, "the group's offset copied to the slave", timeout=40)

        delayed = [f"d-{i}".encode() for i in range(3)]
        for body in delayed:
            msg = Message(TOPIC, body)
            msg.properties[MessageConst.DELAY_TIME_LEVEL] = str(DELAY_LEVEL)
            await api.send_message(master, "broker-a", msg, "ActingPG", 0)

        async def delayed_on_slave() -> bool:
            return await api.get_max_offset(slave, SCHEDULE_TOPIC, DELAY_LEVEL - 1) >= 3
        await wait_until(delayed_on_slave, "the delayed messages replicated to the slave", timeout=20)

        procs["master"].kill()

        async def slave_routed_as_master() -> bool:
            return await broker_a_addrs() == {0: slave}
        await wait_until(slave_routed_as_master, "the slave routed as broker-a's brokerId 0", timeout=30)

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

        await start("master")  # isolated until BrokerPreOnlineService took the slave's offsets back
        await wait_until(both_in_route, "the master back in the route", timeout=40)
        assert await api.query_consumer_offset(master, GROUP, TOPIC, 0) == 10

        got.clear()
        late = b"m-late"
        await api.send_message(master, "broker-a", Message(TOPIC, late), "ActingPG", 0)
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
