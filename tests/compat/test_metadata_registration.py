"""Increment and split registrations across kinds (issue 26 item 6), real processes on loopback:

- OrbitMQ's broker under Apache RocketMQ 5.5.0's NameServer: a topic created on it is routed
  by Apache's NameServer when UPDATE_AND_CREATE_TOPIC returns (registerIncrementBrokerData's
  one-topic REGISTER_BROKER), and with enableSplitRegistration (splitRegistrationSize=4) its
  whole table arrives in chunks that Apache's NameServer merges without dropping a topic.
- Apache's broker with enableSplitRegistration under OrbitMQ's NameServer: its chunked
  registrations and its increment after a create are merged the same way.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.common.topic_config import TopicConfig
from tests.support import ProcessRunner, boot_broker, start_namesrv, write_broker_conf
from tests.support.apache import Apache
from tests.support.net import free_port_pair

pytestmark = pytest.mark.timeout(420)


async def _routed(api: MQClientAPI, namesrv: str, topic: str, broker_name: str) -> bool:
    try:
        route = await api.get_topic_route(namesrv, topic)
    except Exception:
        return False
    return any(q.broker_name == broker_name for q in route.queue_datas)


async def _wait_routed(api: MQClientAPI, namesrv: str, topics: list[str], broker_name: str,
                       timeout: float = 60.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    missing = list(topics)
    while missing:
        missing = [t for t in missing if not await _routed(api, namesrv, t, broker_name)]
        if missing and time.monotonic() > deadline:
            raise AssertionError(f"{namesrv} does not route {missing[:5]} to {broker_name}")
        if missing:
            await asyncio.sleep(0.3)


def test_orbitmq_broker_increments_and_split_under_apache_namesrv(procs: ProcessRunner) -> None:
    apache = Apache(procs)
    _ns, namesrv = apache.namesrv()
    port = free_port_pair()
    conf = write_broker_conf(procs.workdir / "orbit.conf", port, procs.workdir / "orbit-store",
                             brokerName="orbit-a", namesrvAddr=namesrv, enableSplitRegistration="true",
                             splitRegistrationSize=4, registerNameServerPeriod=1000)
    broker = boot_broker(procs, conf, port)
    addr = f"127.0.0.1:{port}"

    async def run() -> None:
        api = MQClientAPI(timeout=10.0)
        try:
            topics = [f"OrbitIncrement-{i}" for i in range(9)]
            for topic in topics:
                await api.create_topic(addr, TopicConfig(topic, read_queue_nums=4, write_queue_nums=4))
                assert await _routed(api, namesrv, topic, "orbit-a"), topic  # on return
            # Several periodic split registrations later, everything is still routed.
            await asyncio.sleep(3.5)
            await _wait_routed(api, namesrv, [*topics, "TBW102", "SCHEDULE_TOPIC_XXXX"], "orbit-a", timeout=10)
        finally:
            await api.close()

    asyncio.run(run())
    assert "chunks of 4 topics" in broker.log_text()


def test_apache_broker_split_and_increment_under_orbitmq_namesrv(procs: ProcessRunner) -> None:
    _ns, namesrv = start_namesrv(procs)
    apache = Apache(procs)
    broker = apache.broker(namesrv, broker_name="apache-a", enableSplitRegistration="true",
                           splitRegistrationSize=4)

    async def run() -> None:
        api = MQClientAPI(timeout=10.0)
        try:
            # Its first registration was split (it has more than 4 system topics).
            await _wait_routed(api, namesrv, ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"],
                               "apache-a")
            await api.create_topic(broker.addr, TopicConfig("ApacheIncrement", read_queue_nums=2,
                                                            write_queue_nums=2))
            await _wait_routed(api, namesrv, ["ApacheIncrement"], "apache-a", timeout=15)
            route = await api.get_topic_route(namesrv, "ApacheIncrement")
            assert [q.write_queue_nums for q in route.queue_datas] == [2]
            assert await _routed(api, namesrv, "TBW102", "apache-a")  # the increment removed nothing
        finally:
            await api.close()

    asyncio.run(run())
