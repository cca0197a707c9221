"""Reads from a slave through the proxy (issue 28, item 1): the proxy's PullMessage follows the
broker's suggestWhichBrokerId as the Remoting client's PullAPIWrapper does, and reads from a slave
while a classic set has no master.

A classic master/slave pair with slaveReadEnable and accessMessageInMemoryMaxRatio=0 (the master
suggests the slave whenever a pull leaves a backlog behind), an `orbitmq proxy` in front, and the
SDK's pull consumer through it: the slave hands out messages (its msgGetTotalTodayNow grows) while
the master lives, and after a kill -9 of the master the consumer reads the rest from the slave.
"""

from __future__ import annotations

import time
from pathlib import Path

from orbitmq import AsyncPullConsumer, ClientConfig
from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import ProcessRunner, astart_broker, free_port, start_namesrv
from tests.support.ha_cluster import PROXY_BOOT_TEXT
from tests.support.waiting import wait_until

TOPIC, GROUP = "ProxySlaveReadTopic", "ProxySlaveReadGroup"


async def test_proxy_pulls_from_the_suggested_slave_and_while_the_master_is_down(tmp_path: Path) -> None:
    runner = ProcessRunner(tmp_path)
    api = MQClientAPI(timeout=5)
    try:
        _, namesrv = start_namesrv(runner, name="namesrv")
        ports = {"master": free_port(), "slave": free_port()}
        roles = {"slave": {"brokerId": 1, "brokerRole": "SLAVE"},
                 "master": {"brokerId": 0, "brokerRole": "ASYNC_MASTER", "accessMessageInMemoryMaxRatio": 0,
                            "haListenPort": free_port()}}
        procs = {}
        for name in ("slave", "master"):
            procs[name], _ = await astart_broker(
                runner, tmp_path, namesrv, name, port=ports[name], store=tmp_path / f"store-{name}",
                brokerClusterName="ProxySrCluster", brokerName="broker-psr", registerNameServerPeriod=1000,
                slaveReadEnable="true", **roles[name])
        master, slave = f"127.0.0.1:{ports['master']}", f"127.0.0.1:{ports['slave']}"
        await api.create_topic(master, TopicConfig(TOPIC, 1, 1))
        await api.create_subscription_group(master, SubscriptionGroupConfig(GROUP))

        async def both_routed() -> bool:
            route = await api.get_topic_route(namesrv, TOPIC)
            return bool(route.broker_datas) and route.broker_datas[0].broker_addrs == {0: master, 1: slave}
        await wait_until(both_routed, "master and slave in the route")

        bodies = [f"psr-{i}".encode() for i in range(40)]
        for body in bodies[:30]:
            await api.send_message(master, "broker-psr", Message(TOPIC, body), "PsrPG", 0)

        async def on_slave(count: int) -> bool:
            return await api.get_max_offset(slave, TOPIC, 0) >= count
        await wait_until(lambda: on_slave(30), "30 messages replicated")

        async def slave_knows_the_topic() -> bool:  # SlaveSynchronize copies the table every 10 s
            response = await api.invoke(slave, RequestCode.GET_ALL_TOPIC_CONFIG)
            return response.code == ResponseCode.SUCCESS and TOPIC in response.body.decode()
        await wait_until(slave_knows_the_topic, "the topic on the slave", timeout=60)

        proxy_port = free_port()
        await runner.astart("proxy", ["-n", namesrv, "--port", str(proxy_port)], ready_port=proxy_port,
                            ready_text=PROXY_BOOT_TEXT, timeout=30, name="proxy")
        config = ClientConfig(f"127.0.0.1:{proxy_port}")
        slave_handed_out = int((await api.get_broker_runtime_info(slave))["msgGetTotalTodayNow"])
        got: list[bytes] = []
        async with AsyncPullConsumer(config, GROUP, batch_size=4, long_polling_timeout=1) as consumer:
            queues = await consumer.queues(TOPIC)
            await consumer.assign(queues)
            end = time.monotonic() + 30
            while len(got) < 30 and time.monotonic() < end:
                got += [m.body for m in await consumer.poll(1.0, max_messages=4)]
            assert got == bodies[:30]
            served = int((await api.get_broker_runtime_info(slave))["msgGetTotalTodayNow"]) - slave_handed_out
            assert served > 0, "the master suggested the slave, the proxy never read from it"

            for body in bodies[30:]:
                await api.send_message(master, "broker-psr", Message(TOPIC, body), "PsrPG", 0)
            await wait_until(lambda: on_slave(40), "the last 10 replicated")
            procs["master"].kill()
            end = time.monotonic() + 45
            while len(got) < 40 and time.monotonic() < end:
                got += [m.body for m in await consumer.poll(1.0, max_messages=4)]
            assert got == bodies, "the rest read from the slave while the set has no master"
    finally:
        await api.close()
        runner.stop_all()
