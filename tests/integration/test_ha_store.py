"""Replication between MessageStores in one process over real HA sockets on 127.0.0.1.

AutoSwitch (controller mode) and classic HA: byte-identical logs, acks and confirm offsets,
SYNC_MASTER waits and FLUSH_SLAVE_TIMEOUT, SyncStateSet expand/shrink listener calls, an
epoch change that truncates a slave's divergent tail, and a malformed frame closing only its
own connection.
"""

import asyncio
import struct
import time

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.ha.classic_ha import DefaultHAService
from orbitmq.broker.ha.epoch_file import EpochFileCache
from orbitmq.broker.ha.ha_service import AutoSwitchHAService
from orbitmq.broker.store.config import ASYNC_MASTER, SLAVE, SYNC_MASTER, MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message_codec import decode_record

CL_SIZE = 16 * 1024


def msg(i: int, topic: str = "T", qid: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=f"m{i:05d}".encode() * 40,
                                 properties={"TAGS": "A"}, born_timestamp=int(time.time() * 1000),
                                 born_host=("10.1.2.3", 4000))


def raw_log(s: MessageStore) -> bytes:
    return b"".join(mf.read(0, mf.wrote_position) for mf in s.commit_log.mapped_file_queue.mapped_files)


def bodies(s: MessageStore, topic: str = "T", qid: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        res = s.get_message("g", topic, qid, offset, max_msg_nums=1000, max_total_size=1 << 30)
        if res.status is not GetMessageStatus.FOUND:
            return out
        out.extend(decode_record(r, 0, check_crc=False).body for r in res.message_buffer_list)
        offset = res.next_begin_offset


async def wait_until(pred, what: str, limit_s: float = 15.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class Node:
    """One replica: a MessageStore and its HA service."""

    def __init__(self, store: MessageStore, ha) -> None:
        self.store = store
        self.ha = ha

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.ha.listen_port}"


@pytest.fixture
async def cluster(tmp_path):
    nodes: list[Node] = []

    async def make(name: str, *, broker_id: int | None = None, classic: bool = False, **kw) -> Node:
        base = dict(store_path_root_dir=str(tmp_path / name), mapped_file_size_commit_log=CL_SIZE,
                    mapped_file_size_consume_queue=20 * 100, message_index_enable=False,
                    ha_connect_retry_interval=100, slave_timeout=10_000)
        base.update(kw)
        cfg = MessageStoreConfig(**base)
        store = MessageStore(cfg)
        await store.start()
        bcfg = BrokerConfig(ha_listen_port=0)
        if classic:
            ha = DefaultHAService(store, bcfg, cfg, listen_host="127.0.0.1")
        else:
            cache = EpochFileCache(cfg.epoch_file_path)
            cache.load()
            ha = AutoSwitchHAService(store, bcfg, cfg, cache, listen_host="127.0.0.1")
            ha.local_broker_id = broker_id
        store.replication.attach_ha_service(ha)
        await ha.start()
        node = Node(store, ha)
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        await node.ha.shutdown()
        await node.store.shutdown()


async def promote(node: Node, epoch: int, sss: set[int]) -> None:
    node.store.config.broker_role = SYNC_MASTER
    assert await node.ha.change_to_master(epoch)
    node.ha.set_sync_state_set(sss, epoch)


async def demote(node: Node, master: Node, epoch: int, my_id: int) -> None:
    node.store.config.broker_role = SLAVE
    assert await node.ha.change_to_slave(master.addr, epoch, my_id)


def caught_up(master: Node, *slaves: Node):
    return lambda: all(s.store.get_max_phy_offset() == master.store.get_max_phy_offset() for s in slaves)


async def test_autoswitch_replication_is_byte_identical_and_visible(cluster):
    m = await cluster("m", broker_id=1)
    s = await cluster("s", broker_id=2)
    expanded: list[tuple[set[int], int]] = []

    async def listener(proposed: set[int], epoch: int) -> None:
        expanded.append((proposed, epoch))

    m.ha.sync_state_set_listener = listener
    await promote(m, 1, {1})
    for i in range(50):  # several segments before the slave connects: it starts at the min offset
        assert (await m.store.put_message(msg(i))).status is PutMessageStatus.PUT_OK
    await demote(s, m, 1, 2)
    await wait_until(caught_up(m, s), "the slave to catch up")
    for i in range(50, 80):  # and while it is connected
        await m.store.put_message(msg(i))
    await wait_until(caught_up(m, s), "the slave to catch up again")
    assert raw_log(s.store) == raw_log(m.store)
    assert [(e.epoch, e.start_offset) for e in s.ha.epoch_cache.all_entries()] == [(1, 0)]
    # The master's SSS is {1}: its confirm offset is its max; the slave takes it from the header.
    await wait_until(lambda: s.store.replication.get_confirm_offset() == m.store.get_max_phy_offset(), "the confirm offset")
    await wait_until(lambda: len(bodies(s.store)) == 80, "the slave to dispatch")
    assert bodies(s.store) == bodies(m.store)
    # The caught-up slave was proposed for the SyncStateSet (expand), with the current sssEpoch.
    await wait_until(lambda: expanded, "the expand listener")
    assert expanded[0] == ({1, 2}, 1)
    assert m.ha.is_synchronizing and m.ha.get_sync_state_set() == {1, 2}
    conns = m.ha.connections()
    assert len(conns) == 1 and conns[0].slave_id == 2
    await wait_until(lambda: m.ha.connections()[0].ack_offset == m.store.get_max_phy_offset(), "the ack")


async def test_sync_master_all_ack_waits_then_times_out_when_the_slave_is_gone(cluster):
    m = await cluster("m", broker_id=1, all_ack_in_sync_state_set=True)
    s = await cluster("s", broker_id=2)
    calls: list[set[int]] = []

    async def listener(proposed: set[int], epoch: int) -> None:
        calls.append(proposed)

    m.ha.sync_state_set_listener = listener
    await promote(m, 1, {1})
    await m.store.put_message(msg(0))
    await demote(s, m, 1, 2)
    await wait_until(caught_up(m, s), "the slave to catch up")
    m.ha.set_sync_state_set({1, 2}, 2)  # the controller applied the expand
    res = await m.store.put_message(msg(1))
    assert res.status is PutMessageStatus.PUT_OK
    end = res.append_message_result.wrote_offset + res.append_message_result.wrote_bytes
    assert min(c.ack_offset for c in m.ha.connections()) >= end  # acked before the answer
    await wait_until(lambda: m.store.replication.get_confirm_offset() == end, "the master's confirm offset")
    assert len(bodies(m.store)) == 2

    await s.ha.shutdown()  # the slave goes away: its connection closes
    await wait_until(lambda: m.ha.connection_count() == 0, "the master to notice")
    await wait_until(lambda: calls and calls[-1] == {1}, "the shrink proposal")  # immediate, on close
    m.store.config.slave_timeout = 300
    res = await m.store.put_message(msg(2))
    assert res.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT  # stored, replica missing
    assert m.store.get_max_phy_offset() > end
    # Still in the (synchronizing) SSS without a connection: the confirm offset is frozen (#6662).
    m.store.reput_service.do_reput()
    assert m.store.replication.get_confirm_offset() == end
    assert len(bodies(m.store)) == 2
    m.ha.set_sync_state_set({1}, 3)  # the controller applied the shrink
    await wait_until(lambda: len(bodies(m.store)) == 3, "the master alone to confirm")


async def test_all_ack_with_three_member_sync_state_set(cluster):
    m = await cluster("m", broker_id=1, all_ack_in_sync_state_set=True)
    a = await cluster("a", broker_id=2)
    b = await cluster("b", broker_id=3)
    await promote(m, 1, {1, 2, 3})
    await demote(a, m, 1, 2)
    await demote(b, m, 1, 3)
    await wait_until(lambda: m.ha.connection_count() == 2, "two slaves")
    results = await asyncio.gather(*(m.store.put_message(msg(i)) for i in range(20)))
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    last_end = max(r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes for r in results)
    assert all(c.ack_offset >= last_end for c in m.ha.connections())
    await wait_until(caught_up(m, a, b), "both slaves")
    assert raw_log(a.store) == raw_log(m.store) == raw_log(b.store)
    await wait_until(lambda: len(bodies(b.store)) == 20, "slave dispatch")
    # inSyncReplicas=3 without all-ack: counts any connection's ack.
    m.store.config.all_ack_in_sync_state_set = False
    m.store.config.in_sync_replicas = 3
    assert (await m.store.put_message(msg(99))).status is PutMessageStatus.PUT_OK


async def test_new_master_epoch_truncates_a_divergent_slave_tail(cluster):
    a = await cluster("a", broker_id=1)
    b = await cluster("b", broker_id=2)
    await promote(a, 1, {1})
    await demote(b, a, 1, 2)
    for i in range(5):
        await a.store.put_message(msg(i))
    await wait_until(caught_up(a, b), "b to catch up")
    common = a.store.get_max_phy_offset()
    await b.ha.shutdown()  # b is cut off; a keeps writing under epoch 1
    for i in range(5, 9):
        await a.store.put_message(msg(i))
    assert a.store.get_max_phy_offset() > common
    # The controller elects b (epoch 2); a comes back as its slave with 4 records b never had.
    b.store.config.broker_role = SYNC_MASTER
    assert await b.ha.change_to_master(2)
    b.ha.set_sync_state_set({2}, 2)
    await b.ha.start()
    await demote(a, b, 2, 1)
    await wait_until(lambda: a.store.get_max_phy_offset() == common, "a to truncate its tail")
    # Epoch 1's entry is cut back to the common point; epoch 2 starts there, recorded from the
    # first transfer frame, empty or not (AutoSwitchHAClient), so it may be in already.
    assert [(e.epoch, e.start_offset) for e in a.ha.epoch_cache.all_entries()] in ([(1, 0)], [(1, 0), (2, common)])
    for i in range(100, 103):
        await b.store.put_message(msg(i))
    await wait_until(caught_up(b, a), "a to catch up with b")
    assert raw_log(a.store) == raw_log(b.store)
    assert [(e.epoch, e.start_offset) for e in a.ha.epoch_cache.all_entries()] == [(1, 0), (2, common)]
    await wait_until(lambda: len(bodies(a.store)) == 8, "a to dispatch")
    assert bodies(a.store) == [msg(i).body for i in (0, 1, 2, 3, 4, 100, 101, 102)]
    assert a.store.get_max_offset_in_queue("T", 0) == 8  # the queue offsets of 5..8 were reused


async def test_change_to_master_refuses_an_older_epoch(cluster):
    a = await cluster("a", broker_id=1)
    await promote(a, 3, {1})
    assert not await a.ha.change_to_master(2)
    assert not await a.ha.change_to_slave(None, 2, 1)
    assert await a.ha.change_to_master(3)  # the same master again (fast path)
    assert a.ha.epoch_cache.last_epoch() == 3


async def test_malformed_frame_closes_only_that_connection(cluster):
    m = await cluster("m", broker_id=1)
    s = await cluster("s", broker_id=2)
    await promote(m, 1, {1})
    await demote(s, m, 1, 2)
    await m.store.put_message(msg(0))
    await wait_until(caught_up(m, s), "the slave")
    for frame in (struct.pack(">i", 7) + bytes(12),  # unknown state
                  struct.pack(">iq", 2, 5),  # an ack before any handshake
                  struct.pack(">ihhq", 1, 0, 0, -4)):  # negative broker id
        reader, writer = await asyncio.open_connection("127.0.0.1", m.ha.listen_port)
        writer.write(frame)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the master
        writer.close()
    await m.store.put_message(msg(1))
    await wait_until(caught_up(m, s), "the slave after the bad frames")
    assert m.ha.connection_count() == 1


async def test_malformed_transfer_frame_makes_the_slave_reconnect(cluster):
    s = await cluster("s", broker_id=2)
    server_conns: list[bytes] = []

    async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server_conns.append(await reader.readexactly(16))
        writer.write(struct.pack(">iiqi", 1, 0, 0, -1))  # handshake reply, no epochs
        writer.write(struct.pack(">iiqiqq", 2, 1 << 30, 0, 1, 0, 0))  # absurd body size
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    s.store.config.broker_role = SLAVE
    assert await s.ha.change_to_slave(f"127.0.0.1:{port}", 1, 2)
    await wait_until(lambda: len(server_conns) >= 2, "a reconnect after the bad frame")
    state, from_last, learner, slave_id = struct.unpack(">ihhq", server_conns[0])
    assert (state, from_last, learner, slave_id) == (1, 0, 0, 2)
    assert s.store.get_max_phy_offset() == 0
    server.close()


async def test_classic_ha_replication_and_sync_master_acks(cluster):
    m = await cluster("m", classic=True, broker_role=SYNC_MASTER, in_sync_replicas=2)
    s = await cluster("s", classic=True, broker_role=SLAVE)
    m.store.config.in_sync_replicas = 1
    for i in range(10):
        await m.store.put_message(msg(i))
    s.ha.update_master_address(m.addr)
    await wait_until(lambda: m.ha.connection_count() == 1, "the slave connection")
    m.store.config.in_sync_replicas = 2
    res = await m.store.put_message(msg(10))
    assert res.status is PutMessageStatus.PUT_OK
    end = res.append_message_result.wrote_offset + res.append_message_result.wrote_bytes
    assert m.ha.connections()[0].ack_offset >= end
    await wait_until(caught_up(m, s), "the classic slave")
    assert raw_log(s.store) == raw_log(m.store)  # one segment: the slave started at the last file
    await wait_until(lambda: len(bodies(s.store)) == 11, "the classic slave dispatch")
    await s.ha.shutdown()
    await wait_until(lambda: m.ha.connection_count() == 0, "the master to notice")
    m.store.config.slave_timeout = 300
    res = await m.store.put_message(msg(11))
    assert res.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    m.store.config.broker_role = ASYNC_MASTER
    assert (await m.store.put_message(msg(12))).status is PutMessageStatus.PUT_OK


async def test_classic_slave_starts_at_the_masters_last_file(cluster):
    m = await cluster("m", classic=True)
    s = await cluster("s", classic=True, broker_role=SLAVE)
    for i in range(60):
        await m.store.put_message(msg(i))
    last = m.store.commit_log.mapped_file_queue.mapped_files[-1].file_from_offset
    assert last > 0
    s.ha.update_master_address(m.addr)
    await wait_until(caught_up(m, s), "the classic slave")
    assert s.store.get_min_phy_offset() == last
    mf = m.store.commit_log.mapped_file_queue.mapped_files[-1]
    assert raw_log(s.store) == mf.read(0, mf.wrote_position)


async def test_sync_from_last_file_and_async_learner(cluster):
    m = await cluster("m", broker_id=1)
    s = await cluster("s", broker_id=2, sync_from_last_file=True, async_learner=True)
    proposals: list[set[int]] = []

    async def listener(proposed: set[int], epoch: int) -> None:
        proposals.append(proposed)

    m.ha.sync_state_set_listener = listener
    await promote(m, 1, {1})
    for i in range(60):
        await m.store.put_message(msg(i))
    last = m.store.commit_log.mapped_file_queue.mapped_files[-1].file_from_offset
    assert last > 0
    await demote(s, m, 1, 2)
    await wait_until(caught_up(m, s), "the learner")
    assert s.store.get_min_phy_offset() == last  # an empty slave asked for the last file only
    await m.store.put_message(msg(60))
    await wait_until(caught_up(m, s), "the learner again")
    conn = m.ha.connections()[0]
    assert conn.is_async_learner and not conn.in_sync
    assert proposals == [] and m.ha.get_sync_state_set() == {1}  # a learner never joins


async def test_shrink_drops_never_caught_up_and_lagging_slaves(cluster):
    m = await cluster("m", broker_id=1, ha_max_time_slave_not_catchup=200)
    await promote(m, 1, {1, 2, 3})
    for i in range(5):
        await m.store.put_message(msg(i))
    # Slave 3 is a raw socket: it catches up once, then stops acking while the master writes on.
    reader, writer = await asyncio.open_connection("127.0.0.1", m.ha.listen_port)
    writer.write(struct.pack(">ihhq", 1, 0, 0, 3))
    await writer.drain()
    head = await reader.readexactly(20)
    _state, body_size, master_max, _epoch = struct.unpack(">iiqi", head)
    await reader.readexactly(body_size)
    writer.write(struct.pack(">iq", 2, master_max))  # everything already: caught up now
    await writer.drain()
    await wait_until(lambda: 3 in m.ha._caught_up_time, "slave 3 to be caught up")
    # Slave 2 never connected: it leaves at once; slave 3 stays while it is recent.
    shrunk = m.ha.maybe_shrink_sync_state_set()
    assert shrunk == {1, 3} and m.ha.is_synchronizing
    m.ha.set_sync_state_set(shrunk, 2)
    for i in range(5, 10):
        await m.store.put_message(msg(i))  # slave 3 does not ack these
    await wait_until(lambda: m.ha.maybe_shrink_sync_state_set() == {1}, "slave 3 to fall out", 5)
    writer.close()


async def test_confirm_offset_reaches_the_slave_without_waiting_for_a_heartbeat(cluster):
    # No periodic heartbeat within the test: only the confirm push can update the slave.
    m = await cluster("m", broker_id=1, all_ack_in_sync_state_set=True, in_sync_replicas=2,
                      ha_send_heartbeat_interval=600_000)
    s = await cluster("s", broker_id=2)
    await promote(m, 1, {1})
    await demote(s, m, 1, 2)
    await m.store.put_message(msg(0))
    await wait_until(caught_up(m, s), "the slave")
    m.ha.set_sync_state_set({1, 2}, 2)
    for i in range(1, 4):
        assert (await m.store.put_message(msg(i))).status is PutMessageStatus.PUT_OK
    # Data frames carry the confirm offset of their send time; the ack that moves it is
    # followed by a header with the new value, not left to the next periodic heartbeat.
    await wait_until(lambda: len(bodies(s.store)) == 4, "the slave's readers")


async def test_re_elected_master_keeps_its_slaves_and_adds_the_epoch(cluster):
    m = await cluster("m", broker_id=1)
    s = await cluster("s", broker_id=2)
    await promote(m, 1, {1})
    await demote(s, m, 1, 2)
    await m.store.put_message(msg(0))
    await wait_until(caught_up(m, s), "the slave")
    start2 = m.store.get_max_phy_offset()
    assert await m.ha.change_to_master(2)  # same broker elected again
    assert await m.ha.change_to_master(2)  # and told twice
    assert m.ha.connection_count() == 1
    assert [(e.epoch, e.start_offset) for e in m.ha.epoch_cache.all_entries()] == [(1, 0), (2, start2)]
    await m.store.put_message(msg(1))
    await wait_until(caught_up(m, s), "the slave under epoch 2")
    assert [(e.epoch, e.start_offset) for e in s.ha.epoch_cache.all_entries()] == [(1, 0), (2, start2)]


async def test_slave_catching_up_in_batches_that_end_inside_records_loses_nothing(cluster):
    """The chaos-test loss: a slave behind the master's confirm offset (a restarted replica
    catching up) takes it clamped to its own max, which a batch ending inside a record puts
    inside that record. Dispatch used to skip that record "as corrupt" to the written end,
    then every record up to a batch ending on a record boundary, and blank-filled the queues
    over the skipped messages: on a new master they were never delivered."""
    m = await cluster("m", broker_id=1, ha_transfer_batch_size=1000)  # records are ~350 bytes
    s = await cluster("s", broker_id=2)
    await promote(m, 1, {1})  # SSS {1}: the master's confirm offset is its max, ahead of the slave
    for i in range(120):
        assert (await m.store.put_message(msg(i, qid=i % 3))).status is PutMessageStatus.PUT_OK
    await demote(s, m, 1, 2)
    await wait_until(caught_up(m, s), "the slave to catch up")
    await wait_until(lambda: s.store.dispatch_behind_bytes() == 0
                     and s.store.replication.get_confirm_offset() == m.store.get_max_phy_offset(), "the slave to dispatch")
    for qid in range(3):
        cq = s.store.get_consume_queue("T", qid)
        entries = [cq.get_entry(i) for i in range(cq.get_max_offset_in_queue())]
        assert [e for e in entries if e[1] == 0x7FFFFFFF] == [], f"queue {qid} has blank entries"
        assert len(bodies(s.store, qid=qid)) == 40
        assert bodies(s.store, qid=qid) == bodies(m.store, qid=qid)


@pytest.mark.parametrize("classic", [False, True])
async def test_ha_flow_control_caps_each_seconds_transfer(cluster, classic: bool):
    """haFlowControlEnable with maxHaTransferByteInSecond=8 KiB: a slave catching up on ~21 KB gets
    at most 8 KiB per second (so it takes over two seconds), and every byte arrives intact."""
    budget = 8 * 1024
    big = {"mapped_file_size_commit_log": 64 * 1024}  # one segment: the classic slave starts at the last file
    if classic:
        m = await cluster("m", classic=True, ha_flow_control_enable=True, max_ha_transfer_byte_in_second=budget, **big)
        s = await cluster("s", classic=True, broker_role=SLAVE, **big)
    else:
        m = await cluster("m", broker_id=1, ha_flow_control_enable=True, max_ha_transfer_byte_in_second=budget, **big)
        s = await cluster("s", broker_id=2, **big)
        await promote(m, 1, {1})
    for i in range(60):
        assert (await m.store.put_message(msg(i))).status is PutMessageStatus.PUT_OK
    assert len(m.store.commit_log.mapped_file_queue.mapped_files) == 1
    assert m.store.get_max_phy_offset() > 2 * budget
    started = time.monotonic()
    if classic:
        s.ha.update_master_address(m.addr)
    else:
        await demote(s, m, 1, 2)
    await wait_until(lambda: s.store.get_max_phy_offset() > s.store.get_min_phy_offset(), "the first batch")
    await asyncio.sleep(0.3)  # well inside the first second: one budget's worth at most
    assert s.store.get_max_phy_offset() - s.store.get_min_phy_offset() <= budget
    await wait_until(caught_up(m, s), "the slave to catch up")
    assert time.monotonic() - started >= 2.0  # three windows at least: 8 KiB, 8 KiB, the rest
    assert raw_log(s.store) == raw_log(m.store)


def test_ha_flow_control_needs_a_positive_budget():
    with pytest.raises(ValueError, match="maxHaTransferByteInSecond"):
        MessageStoreConfig(ha_flow_control_enable=True, max_ha_transfer_byte_in_second=0)
