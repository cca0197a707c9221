"""A slave joining a multi-file CommitLog (issue 24, item 2), across kinds: an Apache RocketMQ 5.5.0
slave (tests/support/apache.py) of an OrbitMQ master, and an OrbitMQ slave of an Apache master.

Both masters (ASYNC_MASTER, 1 MiB CommitLog files) take more than three files of messages before
their slave starts. A new slave reports its CommitLog max offset 0, and the master then streams
from the start of its last CommitLog file (DefaultHAConnection.WriteSocketService: ``masterOffset -
masterOffset % mappedFileSizeCommitLog``), so the slave's first CommitLog file is named by that
offset, not 0, and the files before it are not copied; the slave's ConsumeQueues start at the
queue offset of the first message it has (ConsumeQueue#putMessagePositionInfoWrapper's
fillPreBlank, minLogicOffset). More messages then take both into further files.

Once the slave holds the master's max offset (every byte acknowledged: the confirmed offset), each
of its CommitLog files equals the master's file of the same name byte for byte up to it. With the
master killed, the NameServer's route names the slave alone, and a consumer pulls from each queue's
min offset on the slave (slaveReadEnable) every message the slave holds: the last pre-join file's
and every later one, in order, and nothing from the files before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.client.results import SendStatus
from orbitmq.common.message import Message
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.topic_config import TopicConfig
from tests.compat.test_replication_across_kinds import _commit_log_max, _ha_connections
from tests.support import ManagedProcess, ProcessRunner, running, start_broker, start_namesrv
from tests.support.apache import Apache
from tests.support.net import free_port_pair
from tests.support.pulling import pull_queue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

SEGMENT = 1024 * 1024  # both kinds: CommitLog files named by the same start offsets
TOPIC = "HaMultiFile"
GROUP = "HaMultiFileReader"
SET_KEYS = {"mappedFileSizeCommitLog": SEGMENT, "slaveReadEnable": "true"}
MASTER_KEYS = {**SET_KEYS, "brokerRole": "ASYNC_MASTER"}
SIZES = [16, 700, 4096, 40_000, 90_000, 200_000]  # the larger span several HA transfers (32 KiB)
BEFORE_JOIN = 72  # about 3.9 MiB: four files, the last one partly filled
AFTER_JOIN = 36  # about 1.9 MiB more: two further files
TIMEOUT = 10.0  # Apache's first GET_BROKER_RUNTIME_INFO can take seconds on two busy cores


@dataclass
class Sent:
    queue: int
    body: bytes
    phy_offset: int  # where the master's CommitLog holds it (the offset message id)


@dataclass
class BrokerSet:
    name: str
    master: ManagedProcess
    master_addr: str
    master_store: Path
    apache_slave: bool
    slave_addr: str = ""
    slave_store: Path = Path()
    join_offset: int = -1  # the start of the master's last CommitLog file when the slave joined
    sent: list[Sent] = field(default_factory=list)


@dataclass
class Cluster:
    namesrv: str
    orbit_master: BrokerSet  # an OrbitMQ master, an Apache slave
    apache_master: BrokerSet  # an Apache master, an OrbitMQ slave


def _orbitmq(runner: ProcessRunner, namesrv: str, name: str, broker_name: str, broker_id: int,
             keys: dict[str, object]) -> tuple[ManagedProcess, str, Path]:
    store = runner.workdir / name / "store"
    proc, addr = start_broker(runner, runner.workdir / name, namesrv, name, port=free_port_pair(), store=store,
                              brokerName=broker_name, brokerId=broker_id, **keys)
    return proc, addr, store


def _body(i: int) -> bytes:
    return (b"%03d:" % i) + bytes([65 + i % 26]) * SIZES[i % len(SIZES)]


async def _send(api: MQClientAPI, s: BrokerSet, first: int, count: int) -> None:
    for i in range(first, first + count):
        body = _body(i)
        result = await api.send_message(s.master_addr, s.name, Message(topic=TOPIC, body=body, properties={
            "KEYS": f"mf-{i}"}), "HaMultiFilePG", i % 2)
        assert result.status == SendStatus.SEND_OK, f"message {i}: {result.status}"
        s.sent.append(Sent(i % 2, body, decode_offset_message_id(result.offset_msg_id)[2]))


def _write_before_join(s: BrokerSet) -> None:
    async def body() -> None:
        api = MQClientAPI(timeout=TIMEOUT)
        try:
            await api.create_topic(s.master_addr, TopicConfig(topic_name=TOPIC, read_queue_nums=2,
                                                              write_queue_nums=2))
            await _send(api, s, 0, BEFORE_JOIN)
            max_offset = await _commit_log_max(api, s.master_addr)
            assert max_offset > 3 * SEGMENT, f"the master's CommitLog ends at {max_offset}: not past 3 files"
            s.join_offset = max_offset - max_offset % SEGMENT
        finally:
            await api.close()

    # In a thread with a loop of its own: a fixture may run inside pytest-asyncio's loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, body()).result()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Both masters filled past three files, then both slaves started (the Apache JVMs boot side by
    side); a slave starts once its master is registered, so that its first registration answer names
    the master."""
    with running(tmp_path_factory.mktemp("ha-multi-file")) as runner:
        _, namesrv = start_namesrv(runner)
        apache = Apache(runner)
        a_master = apache.broker(namesrv, "apache-master", broker_name="mf-apache", broker_id=0, wait=False,
                                 **MASTER_KEYS)
        o_master, o_master_addr, o_master_store = _orbitmq(runner, namesrv, "orbit-master", "mf-orbit", 0,
                                                           MASTER_KEYS)
        apache.wait_broker(a_master, namesrv)
        orbit_set = BrokerSet("mf-orbit", o_master, o_master_addr, o_master_store, apache_slave=True)
        apache_set = BrokerSet("mf-apache", a_master.process, a_master.addr, a_master.store, apache_slave=False)
        for s in (orbit_set, apache_set):
            _write_before_join(s)
        a_slave = apache.broker(namesrv, "apache-slave", broker_name="mf-orbit", broker_id=1, brokerRole="SLAVE",
                                wait=False, **SET_KEYS)
        _, apache_set.slave_addr, apache_set.slave_store = _orbitmq(runner, namesrv, "orbit-slave", "mf-apache", 1,
                                                                    {**SET_KEYS, "brokerRole": "SLAVE"})
        apache.wait_broker(a_slave, namesrv)
        orbit_set.slave_addr, orbit_set.slave_store = a_slave.addr, a_slave.store
        yield Cluster(namesrv, orbit_set, apache_set)


def _files(store: Path) -> dict[int, Path]:
    return {int(p.name): p for p in (store / "commitlog").iterdir() if p.name.isdigit()}


async def _pull_from_min(api: MQClientAPI, addr: str, queue: int) -> list[bytes]:
    """Every message of the queue from its min offset (the slave's first ConsumeQueue entry) on."""
    offset = await api.get_min_offset(addr, TOPIC, queue)
    return [m.body for m in await pull_queue(api, addr, GROUP, TOPIC, queue, offset=offset)]


async def _join_then_read_from_slave(namesrv: str, s: BrokerSet) -> None:
    api = MQClientAPI(timeout=TIMEOUT)
    try:
        if s.apache_slave:
            # Apache's classic slave copies its master's topics on a timer (SlaveSynchronize): the
            # topic is created on it as `mqadmin updateTopic -b <slave>` would.
            await api.create_topic(s.slave_addr, TopicConfig(topic_name=TOPIC, read_queue_nums=2,
                                                             write_queue_nums=2))
        await wait_until(lambda: _ha_connections(api, s.master_addr), "the slave on the master's HA port", 30)
        await _send(api, s, BEFORE_JOIN, AFTER_JOIN)

        confirmed = await _commit_log_max(api, s.master_addr)
        assert confirmed - s.join_offset > SEGMENT, "the slave's data spans more than one file"

        async def caught_up() -> bool:
            return await _commit_log_max(api, s.slave_addr) >= confirmed
        await wait_until(caught_up, "the slave at the master's max offset", 40)

        master_files, slave_files = _files(s.master_store), _files(s.slave_store)
        held = sorted(start for start in slave_files if start < confirmed)
        assert held == list(range(s.join_offset, confirmed, SEGMENT)), (
            f"the slave's CommitLog files {held}: from the master's last file at the join ({s.join_offset}) on")
        assert min(master_files) == 0 and len([f for f in master_files if f < confirmed]) >= 5
        for start in held:
            length = min(SEGMENT, confirmed - start)
            master_bytes = master_files[start].read_bytes()[:length]
            slave_bytes = slave_files[start].read_bytes()[:length]
            assert len(master_bytes) == length
            assert slave_bytes == master_bytes, f"the slave's CommitLog file {start:020d} differs from its master's"

        async def slave_has_topic() -> bool:  # SlaveSynchronize's copy on an OrbitMQ slave
            return await api.get_topic_config(s.slave_addr, TOPIC) is not None
        await wait_until(slave_has_topic, "the topic on the slave", 30)
        await asyncio.to_thread(s.master.kill)  # down at once (an Apache broker takes ~10 s to stop)

        async def slave_alone() -> bool:  # the NameServer saw the master's channel close
            route = await api.get_topic_route(namesrv, TOPIC)
            return {b.broker_name: b.broker_addrs for b in route.broker_datas}.get(s.name) == {1: s.slave_addr}
        await wait_until(slave_alone, "the route naming the slave alone", 15)
        assert any(m.phy_offset >= s.join_offset for m in s.sent[:BEFORE_JOIN]), (
            "some messages written before the join are in the master's last file")
        assert any(m.phy_offset < s.join_offset for m in s.sent), "and others in the files before it"
        for queue in (0, 1):
            want = [m.body for m in s.sent if m.queue == queue and m.phy_offset >= s.join_offset]
            got = await _pull_from_min(api, s.slave_addr, queue)
            assert len(got) == len(want) and got == want, f"queue {queue} read from the slave"
    finally:
        await api.close()


def test_apache_slave_joins_orbitmq_multi_file_commit_log(cluster: Cluster) -> None:
    asyncio.run(_join_then_read_from_slave(cluster.namesrv, cluster.orbit_master))


def test_orbitmq_slave_joins_apache_multi_file_commit_log(cluster: Cluster) -> None:
    asyncio.run(_join_then_read_from_slave(cluster.namesrv, cluster.apache_master))
