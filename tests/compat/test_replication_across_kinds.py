"""Classic HA across kinds (issue 24, part 2): an Apache RocketMQ 5.5.0 slave (tests/support/apache.py)
of an OrbitMQ master, and an OrbitMQ slave of an Apache master.

Each broker set (brokerName, brokerId 0 SYNC_MASTER and brokerId 1 SLAVE, slaveReadEnable) registers
with one OrbitMQ NameServer, from whose registration answer the slave learns its master's HA and
broker addresses (RegisterBrokerResult), as a classic slave does. The slave reports its CommitLog
max offset as 8 bytes, the master streams ``[offset 8][size 4][data]`` (DefaultHAConnection /
DefaultHAClient): so every SYNC_MASTER send answered SEND_OK was acked by the other kind's slave,
and the slave's CommitLog must then equal the master's byte for byte up to the master's max offset
(the confirmed offset: every byte was acked). With the master killed, a consumer pulls every
message from the slave, which the NameServer's route now names alone.

Messages of several sizes (some over haTransferBatchSize, 32 KiB, so that transfers are split)
and a batch go to a topic of two queues.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.client.errors import MQBrokerError
from orbitmq.client.results import SendStatus
from orbitmq.common import fastjson
from orbitmq.common.message import Message
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import ManagedProcess, ProcessRunner, running, start_broker, start_namesrv
from tests.support.apache import Apache
from tests.support.net import free_port_pair
from tests.support.pulling import pull_queue

SEGMENT = 4 * 1024 * 1024  # both kinds: CommitLog files named by the same start offsets
TOPIC = "HaAcrossKinds"
GROUP = "HaReader"
MESSAGES = 40
SET_KEYS = {"mappedFileSizeCommitLog": SEGMENT, "slaveReadEnable": "true"}
# A SYNC_MASTER send waits for inSyncReplicas copies, the master's included; at the default 1 it
# waits for none (CommitLog#handleHA on both kinds).
MASTER_KEYS = {**SET_KEYS, "inSyncReplicas": 2}
TIMEOUT = 10.0  # Apache's first GET_BROKER_RUNTIME_INFO can take seconds on two busy cores


@dataclass
class BrokerSet:
    name: str
    master: ManagedProcess
    master_addr: str
    master_store: Path
    slave_addr: str
    slave_store: Path
    apache_slave: bool


@dataclass
class Cluster:
    namesrv: str
    orbit_master: BrokerSet  # an OrbitMQ master, an Apache slave
    apache_master: BrokerSet  # an Apache master, an OrbitMQ slave


def _orbitmq(runner: ProcessRunner, namesrv: str, name: str, broker_name: str, broker_id: int,
             role: str) -> tuple[ManagedProcess, str, Path]:
    store = runner.workdir / name / "store"
    proc, addr = start_broker(runner, runner.workdir / name, namesrv, name, port=free_port_pair(), store=store,
                              brokerName=broker_name, brokerId=broker_id, brokerRole=role,
                              **(SET_KEYS if role == "SLAVE" else MASTER_KEYS))
    return proc, addr, store


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Both broker sets at once: the two Apache JVMs boot side by side. A slave starts once its
    master is registered, so that its first registration answer names the master."""
    with running(tmp_path_factory.mktemp("ha-across-kinds")) as runner:
        _, namesrv = start_namesrv(runner)
        apache = Apache(runner)
        o_master, o_master_addr, o_master_store = _orbitmq(runner, namesrv, "orbit-master", "ha-orbit", 0,
                                                           "SYNC_MASTER")
        a_slave = apache.broker(namesrv, "apache-slave", broker_name="ha-orbit", broker_id=1, brokerRole="SLAVE",
                                wait=False, **SET_KEYS)
        a_master = apache.broker(namesrv, "apache-master", broker_name="ha-apache", broker_id=0,
                                 brokerRole="SYNC_MASTER", wait=False, **MASTER_KEYS)
        apache.wait_broker(a_master, namesrv)
        _, o_slave_addr, o_slave_store = _orbitmq(runner, namesrv, "orbit-slave", "ha-apache", 1, "SLAVE")
        apache.wait_broker(a_slave, namesrv)
        yield Cluster(namesrv,
                      BrokerSet("ha-orbit", o_master, o_master_addr, o_master_store, a_slave.addr, a_slave.store,
                                apache_slave=True),
                      BrokerSet("ha-apache", a_master.process, a_master.addr, a_master.store, o_slave_addr,
                                o_slave_store, apache_slave=False))


def _bodies() -> list[bytes]:
    sizes = [16, 700, 4096, 40_000, 90_000]  # the last two span several HA transfers
    return [(b"%03d:" % i) + bytes([65 + i % 26]) * sizes[i % len(sizes)] for i in range(MESSAGES)]


async def _ha_connections(api: MQClientAPI, addr: str) -> list:
    """GET_BROKER_HA_STATUS (907): the master's HARuntimeInfo.haConnectionInfo."""
    response = await api.invoke(addr, RequestCode.GET_BROKER_HA_STATUS)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return fastjson.loads(response.body).get("haConnectionInfo") or []


# Apache's BrokerController#getRuntimeInfo answers SYSTEM_ERROR (NoSuchElementException from
# StoreStatsService's LinkedList#getLast) until its stats were first sampled; a JVM just started on
# two busy cores can take a while to get there.
RUNTIME_INFO_SETTLE_SECONDS = 60.0


async def _commit_log_max(api: MQClientAPI, addr: str) -> int:
    deadline = time.monotonic() + RUNTIME_INFO_SETTLE_SECONDS
    while True:
        try:
            return int((await api.get_broker_runtime_info(addr))["commitLogMaxOffset"])
        except MQBrokerError as e:
            if e.code != ResponseCode.SYSTEM_ERROR or "NoSuchElementException" not in e.remark \
                    or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(0.5)


async def _replicate_then_read_from_slave(namesrv: str, s: BrokerSet) -> None:
    api = MQClientAPI(timeout=TIMEOUT)
    try:
        config = TopicConfig(topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2)
        await api.create_topic(s.master_addr, config)
        if s.apache_slave:
            # Apache's classic slave copies its master's topics once a minute (the slave sync task
            # of BrokerController, first run before the NameServer named the master): the topic is
            # created on it as `mqadmin updateTopic -b <slave>` would.
            await api.create_topic(s.slave_addr, config)
        deadline = time.monotonic() + 30
        while not await _ha_connections(api, s.master_addr):  # the slave dials once registered
            assert time.monotonic() < deadline, "no slave connected to the master's HA port in 30 s"
            await asyncio.sleep(0.2)
        bodies = _bodies()
        sent: dict[int, list[bytes]] = {0: [], 1: []}
        for i, body in enumerate(bodies[:-4]):
            result = await api.send_message(s.master_addr, s.name, Message(topic=TOPIC, body=body, properties={
                "KEYS": f"ha-{i}"}), "HaPG", i % 2)
            assert result.status == SendStatus.SEND_OK, f"message {i}: {result.status} (the slave's ack counts)"
            sent[i % 2].append(body)
        result = await api.send_batch(s.master_addr, s.name, [Message(topic=TOPIC, body=b) for b in bodies[-4:]],
                                      "HaPG", 1)
        assert result.status == SendStatus.SEND_OK
        sent[1].extend(bodies[-4:])

        confirmed = await _commit_log_max(api, s.master_addr)
        deadline = time.monotonic() + 30
        while await _commit_log_max(api, s.slave_addr) < confirmed:  # SYNC_MASTER: already there
            assert time.monotonic() < deadline, "the slave did not catch up in 30 s"
            await asyncio.sleep(0.2)
        first = f"{0:020d}"
        master_bytes = (s.master_store / "commitlog" / first).read_bytes()[:confirmed]
        slave_bytes = (s.slave_store / "commitlog" / first).read_bytes()[:confirmed]
        assert len(master_bytes) == confirmed > sum(map(len, bodies))
        assert slave_bytes == master_bytes, "the slave's CommitLog differs from its master's"

        deadline = time.monotonic() + 30
        while await api.get_topic_config(s.slave_addr, TOPIC) is None:  # SlaveSynchronize's copy
            assert time.monotonic() < deadline, "the slave has not the topic after 30 s"
            await asyncio.sleep(0.5)
        await asyncio.to_thread(s.master.kill)  # down at once (an Apache broker takes ~10 s to stop)
        deadline = time.monotonic() + 15
        while True:  # the NameServer saw the master's channel close: the route names the slave alone
            route = await api.get_topic_route(namesrv, TOPIC)
            addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
            if addrs.get(s.name) == {1: s.slave_addr}:
                break
            assert time.monotonic() < deadline, f"route still {addrs}"
            await asyncio.sleep(0.2)
        for queue in (0, 1):
            assert [m.body for m in await pull_queue(api, s.slave_addr, GROUP, TOPIC, queue)] == sent[queue], f"queue {queue} read from the slave"
    finally:
        await api.close()


def test_apache_slave_of_orbitmq_master(cluster: Cluster) -> None:
    asyncio.run(_replicate_then_read_from_slave(cluster.namesrv, cluster.orbit_master))


def test_orbitmq_slave_of_apache_master(cluster: Cluster) -> None:
    asyncio.run(_replicate_then_read_from_slave(cluster.namesrv, cluster.apache_master))
