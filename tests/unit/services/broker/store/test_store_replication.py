"""Store side of replication: append_to_commit_log, truncate_files, confirm offset gating,
its persistence, truncate_invalid_msg, and the send-ack pre-check (no sockets here)."""

import asyncio
import time

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.ha.epoch_file import EpochFileCache
from orbitmq.broker.ha.ha_service import AutoSwitchHAService
from orbitmq.broker.processors.store_results import map_put_result
from orbitmq.broker.store.config import SLAVE, SYNC_MASTER, MessageStoreConfig
from orbitmq.broker.store.consume_queue import is_blank_entry
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message_codec import decode_record
from orbitmq.remoting.codes import ResponseCode

CL_SIZE = 8192


def make_config(root, **kw) -> MessageStoreConfig:
    base = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=CL_SIZE,
                mapped_file_size_consume_queue=20 * 50, message_index_enable=False)
    base.update(kw)
    return MessageStoreConfig(**base)


def msg(i: int, topic: str = "T", qid: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=f"body-{i:04d}".encode() * 20,
                                 properties={"TAGS": "A"}, born_timestamp=int(time.time() * 1000),
                                 born_host=("10.1.2.3", 4000))


async def settle(s: MessageStore) -> None:
    for _ in range(1000):
        if s.dispatch_behind_bytes() == 0:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("reput did not catch up")


def raw_log(s: MessageStore) -> bytes:
    """The CommitLog bytes from the min offset to the max, segment after segment."""
    out = []
    for mf in s.commit_log.mapped_file_queue.mapped_files:
        out.append(mf.read(0, mf.wrote_position))
    return b"".join(out)


def bodies(s: MessageStore, topic: str = "T", qid: int = 0) -> list[bytes]:
    """Every message a consumer can pull from the queue."""
    out: list[bytes] = []
    offset = 0
    while True:
        res = s.get_message("g", topic, qid, offset, max_msg_nums=1000, max_total_size=1 << 30)
        if res.status is not GetMessageStatus.FOUND:
            return out
        out.extend(decode_record(r, 0, check_crc=False).body for r in res.message_buffer_list)
        offset = res.next_begin_offset


@pytest.fixture
async def stores(tmp_path):
    made: list[MessageStore] = []

    async def make(name: str, **kw) -> MessageStore:
        s = MessageStore(make_config(tmp_path / name, **kw))
        await s.start()
        made.append(s)
        return s

    yield make
    for s in made:
        await s.shutdown()


def slave_ha(store: MessageStore, tmp_path, name: str) -> AutoSwitchHAService:
    """A real AutoSwitchHAService in the slave role (never started: no socket needed)."""
    cache = EpochFileCache(str(tmp_path / f"{name}-epoch"))
    ha = AutoSwitchHAService(store, BrokerConfig(ha_listen_port=0), store.config, cache)
    store.replication.attach_ha_service(ha)
    return ha


async def test_append_to_commit_log_across_segments_then_dispatch(stores):
    master = await stores("m")
    for i in range(60):  # ~18 KiB: three 8 KiB segments with blank ends
        assert (await master.put_message(msg(i))).status is PutMessageStatus.PUT_OK
    await settle(master)
    data = raw_log(master)
    assert len(master.commit_log.mapped_file_queue.mapped_files) >= 3
    slave = await stores("s", broker_role=SLAVE)
    offset = 0
    for step in (3000, 5000, 7000, 1, 10_000):  # chunks straddling the segment ends
        chunk = data[offset: offset + step]
        assert slave.replication.append_to_commit_log(offset, chunk)
        offset += len(chunk)
    assert slave.replication.append_to_commit_log(offset, data[offset:])
    assert not slave.replication.append_to_commit_log(5, b"xx")  # not at the local max
    await settle(slave)
    assert slave.get_max_phy_offset() == master.get_max_phy_offset()
    assert raw_log(slave) == data
    assert bodies(slave) == bodies(master)
    assert slave.get_max_offset_in_queue("T", 0) == 60


async def test_empty_slave_starts_at_a_later_segment(stores):
    master = await stores("m")
    for i in range(60):
        await master.put_message(msg(i))
    await settle(master)
    files = master.commit_log.mapped_file_queue.mapped_files
    start = files[-1].file_from_offset
    tail = files[-1].read(0, files[-1].wrote_position)
    slave = await stores("s", broker_role=SLAVE)
    assert not slave.replication.append_to_commit_log(start + 10, tail[10:])  # an empty store needs a segment start
    assert slave.replication.append_to_commit_log(start, tail)
    await settle(slave)
    assert slave.get_min_phy_offset() == start
    assert slave.get_max_phy_offset() == master.get_max_phy_offset()
    assert slave.get_max_offset_in_queue("T", 0) == 60  # queue offsets come from the records


async def test_truncate_files_rolls_queue_offsets_back(stores):
    s = await stores("a")
    results = [await s.put_message(msg(i)) for i in range(10)]
    await settle(s)
    cut = results[6].append_message_result.wrote_offset
    assert not s.replication.truncate_files(cut + 3)  # not a record boundary
    assert s.replication.truncate_files(cut)
    assert s.get_max_phy_offset() == cut
    assert s.get_max_offset_in_queue("T", 0) == 6
    assert s.get_reput_from_offset() == cut
    again = await s.put_message(msg(99))
    assert again.append_message_result.logics_offset == 6  # the truncated queue offset (#7689)
    assert again.append_message_result.wrote_offset == cut
    await settle(s)
    assert bodies(s)[-1] == msg(99).body
    assert len(bodies(s)) == 7


async def test_truncate_across_segments(stores):
    s = await stores("a")
    results = [await s.put_message(msg(i)) for i in range(60)]
    await settle(s)
    cut = results[5].append_message_result.wrote_offset
    assert s.replication.truncate_files(cut)
    assert len(s.commit_log.mapped_file_queue.mapped_files) == 1
    assert s.get_max_offset_in_queue("T", 0) == 5
    for i in range(40):
        await s.put_message(msg(100 + i))
    await settle(s)
    assert len(bodies(s)) == 45


async def test_confirm_offset_gates_dispatch(stores, tmp_path):
    s = await stores("a")
    ha = slave_ha(s, tmp_path, "a")
    assert not ha.is_master
    results = [await s.put_message(msg(i)) for i in range(8)]
    ends = [r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes for r in results]
    s.reput_service.do_reput()
    assert s.get_max_offset_in_queue("T", 0) == 0  # nothing confirmed yet
    assert bodies(s) == []
    s.replication.set_confirm_offset(ends[2] + 5)  # inside record 3: it stays invisible
    s.reput_service.do_reput()
    assert s.get_max_offset_in_queue("T", 0) == 3
    assert s.get_reput_from_offset() == ends[2]
    assert s.dispatch_caught_up() and s.dispatch_behind_bytes() == 5  # a confirm inside a record
    s.replication.set_confirm_offset(ends[4])
    await settle(s)
    assert s.get_max_offset_in_queue("T", 0) == 5
    s.replication.set_confirm_offset(ends[7])
    await settle(s)
    assert len(bodies(s)) == 8
    s.config.read_un_committed = True
    s.replication.apply_confirm_gating()
    await s.put_message(msg(9))
    await settle(s)
    assert s.get_max_offset_in_queue("T", 0) == 9


async def test_confirm_offset_persists_and_attach_rolls_queues_back(tmp_path):
    cfg = make_config(tmp_path / "a")
    s = MessageStore(cfg)
    await s.start()
    ha = slave_ha(s, tmp_path, "a")
    results = [await s.put_message(msg(i)) for i in range(6)]
    confirm = results[3].append_message_result.wrote_offset
    s.replication.set_confirm_offset(confirm)
    await settle(s)
    assert s.get_max_offset_in_queue("T", 0) == 3
    await s.shutdown()
    assert ha.get_confirm_offset() == confirm

    s = MessageStore(make_config(tmp_path / "a"))
    await s.start()  # recovery knows no HA: it dispatches the whole log
    assert s.replication.get_confirm_offset_directly() == confirm
    await settle(s)
    assert s.get_max_offset_in_queue("T", 0) == 6
    slave_ha(s, tmp_path, "a")  # attaching a gating HA service hides what is not confirmed
    assert s.get_max_offset_in_queue("T", 0) == 3
    assert s.get_reput_from_offset() == confirm
    s.replication.attach_ha_service(None)
    await settle(s)
    s.replication.set_confirm_offset(confirm + 7)  # inside record 4: dispatch goes back to its start
    slave_ha(s, tmp_path, "a")
    assert s.get_max_offset_in_queue("T", 0) == 3
    assert s.get_reput_from_offset() == confirm
    s.replication.set_confirm_offset(results[5].append_message_result.wrote_offset)
    await settle(s)
    assert len(bodies(s)) == 5  # decoded from the record start, not from inside it
    s.replication.set_confirm_offset(confirm)
    s.checkpoint.confirm_phy_offset = 10**9  # beyond the log: clamped on the next recovery
    s.replication._confirm_offset = 10**9
    await s.shutdown()
    s = MessageStore(make_config(tmp_path / "a"))
    await s.start()
    try:
        assert s.replication.get_confirm_offset_directly() == s.get_max_phy_offset()
    finally:
        await s.shutdown()


async def test_truncate_invalid_msg_cuts_a_partial_tail(stores, tmp_path):
    master = await stores("m")
    for i in range(5):
        await master.put_message(msg(i))
    data = raw_log(master)
    slave = await stores("s", broker_role=SLAVE)
    slave_ha(slave, tmp_path, "s")
    good = len(data) - 100  # the last record arrives half written
    assert slave.replication.append_to_commit_log(0, data[:good])
    slave.replication.set_confirm_offset(good)
    cut = slave.replication.truncate_invalid_msg()
    assert cut < good
    assert slave.get_max_phy_offset() == cut
    assert slave.replication.get_confirm_offset_directly() == cut
    assert slave.replication.truncate_invalid_msg() == -1 or slave.get_max_phy_offset() == cut
    await settle(slave)
    assert len(bodies(slave)) == 4
    assert slave.replication.append_to_commit_log(cut, data[cut:])
    slave.replication.set_confirm_offset(len(data))
    await settle(slave)
    assert len(bodies(slave)) == 5


async def test_min_in_sync_replicas_refuses_before_append(stores, tmp_path):
    s = await stores("a", broker_role=SYNC_MASTER, min_in_sync_replicas=2)
    ha = AutoSwitchHAService(s, BrokerConfig(ha_listen_port=0), s.config, EpochFileCache(str(tmp_path / "e")))
    ha.local_broker_id = 1
    s.replication.attach_ha_service(ha)
    assert await ha.change_to_master(1)
    ha.set_sync_state_set({1}, 1)
    before = s.get_max_phy_offset()
    res = await s.put_message(msg(1))
    assert res.status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
    assert s.get_max_phy_offset() == before
    code, remark, _ = map_put_result(res, 0, False)
    assert (code, remark) == (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough")
    res = await s.put_messages([msg(2), msg(3)])
    assert res.status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
    ha.set_sync_state_set({1, 2}, 2)  # enough now; inSyncReplicas=1 does not wait for acks
    res = await s.put_message(msg(4))
    assert res.status is PutMessageStatus.PUT_OK


async def test_gate_attached_before_start_applies_to_recovery(tmp_path):
    s = MessageStore(make_config(tmp_path / "a"))
    await s.start()
    slave_ha(s, tmp_path, "a")
    results = [await s.put_message(msg(i)) for i in range(6)]
    s.replication.set_confirm_offset(results[2].append_message_result.wrote_offset)
    await settle(s)
    await s.shutdown()
    s = MessageStore(make_config(tmp_path / "a"))
    slave_ha(s, tmp_path, "a")  # before start, as a broker wiring it early would
    await s.start()
    try:
        assert s.get_max_offset_in_queue("T", 0) == 2
        assert s.get_max_phy_offset() == results[5].append_message_result.wrote_offset + \
            results[5].append_message_result.wrote_bytes
    finally:
        await s.shutdown()


async def test_epoch_prefix_follows_the_commit_log_min_offset(stores, tmp_path):
    from orbitmq.broker.ha.epoch_file import EpochEntry

    master = await stores("m")
    for i in range(60):
        await master.put_message(msg(i))
    last = master.commit_log.mapped_file_queue.mapped_files[-1]
    slave = await stores("s", broker_role=SLAVE)
    assert slave.replication.append_to_commit_log(last.file_from_offset, last.read(0, last.wrote_position))
    ha = slave_ha(slave, tmp_path, "s")
    ha.epoch_cache.set_entries([EpochEntry(1, 0), EpochEntry(2, 100), EpochEntry(3, last.file_from_offset + 10)])
    await ha.truncate_epoch_file_prefix()  # epoch 1 ended at 100, long before the min offset
    assert [e.epoch for e in ha.epoch_cache.all_entries()] == [2, 3]
    await ha.truncate_epoch_file_prefix()
    assert [e.epoch for e in ha.epoch_cache.all_entries()] == [2, 3]


def blank_entries(s: MessageStore, topic: str = "T", qid: int = 0) -> list[int]:
    """Queue offsets whose ConsumeQueue entry is a blank filler."""
    cq = s.get_consume_queue(topic, qid)
    if cq is None:
        return []
    return [i for i in range(cq.get_max_offset_in_queue()) if is_blank_entry(*cq.get_entry(i)[:2])]


def cq_entries(s: MessageStore, topic: str = "T", qid: int = 0) -> list[tuple[int, int, int]]:
    cq = s.get_consume_queue(topic, qid)
    return [cq.get_entry(i) for i in range(cq.get_max_offset_in_queue())] if cq is not None else []


async def test_catching_up_slave_waits_for_a_record_cut_by_a_batch_end(stores, tmp_path):
    """The chaos loss: a slave behind the master's confirm offset takes it clamped to its own max
    (AutoSwitchHAClient: setConfirmOffset(min(the header's confirmOffset, local max))), which a batch ending inside a record puts inside that record. Dispatch
    must wait for the rest of the record, not skip to the written end: that left the reput
    offset inside a record, lost every record up to a batch that happened to end on a record
    boundary, and the records after it then blank-filled the queues over the skipped messages."""
    master = await stores("m", mapped_file_size_commit_log=1 << 20)
    results = [await master.put_message(msg(i, qid=i % 2)) for i in range(40)]
    boundaries = {0} | {r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes for r in results}
    data = raw_log(master)
    slave = await stores("s", broker_role=SLAVE, mapped_file_size_commit_log=1 << 20)
    slave_ha(slave, tmp_path, "s")
    master_confirm = len(data)  # the master's SyncStateSet acked everything: the slave is behind it
    offset = 0
    while offset < len(data):
        chunk = data[offset: offset + 1000]  # records are ~300 bytes: most batches end inside one
        assert slave.replication.append_to_commit_log(offset, chunk)
        offset += len(chunk)
        slave.replication.set_confirm_offset(min(master_confirm, slave.get_max_phy_offset()))  # as the HA client does
        slave.reput_service.do_reput()
        assert slave.get_reput_from_offset() in boundaries  # never inside a record
        assert slave.get_max_phy_offset() - slave.get_reput_from_offset() < 400  # waits on the cut record only
    # Caught up; new records arrive whole from here on.
    for i in range(40, 50):
        await master.put_message(msg(i, qid=i % 2))
    data = raw_log(master)
    assert slave.replication.append_to_commit_log(offset, data[offset:])
    slave.replication.set_confirm_offset(len(data))
    await settle(slave)
    for qid in (0, 1):
        assert blank_entries(slave, qid=qid) == []
        assert cq_entries(slave, qid=qid) == cq_entries(master, qid=qid)
        assert bodies(slave, qid=qid) == bodies(master, qid=qid)
        assert len(bodies(slave, qid=qid)) == 25


async def test_gated_dispatch_waits_quietly_for_a_partial_record(stores, tmp_path, caplog):
    master = await stores("m", mapped_file_size_commit_log=1 << 20)
    for i in range(6):
        await master.put_message(msg(i))
    data = raw_log(master)
    slave = await stores("s", broker_role=SLAVE, mapped_file_size_commit_log=1 << 20)
    slave_ha(slave, tmp_path, "s")
    cut = len(data) - 50  # the last record arrives in two parts
    assert slave.replication.append_to_commit_log(0, data[:cut])
    slave.replication.set_confirm_offset(cut - 10)  # gated: the confirm offset lies inside the partial record
    slave.reput_service.do_reput()
    assert slave.get_max_offset_in_queue("T", 0) == 5
    assert not [r for r in caplog.records if "[BUG]" in r.getMessage()]
    assert slave.replication.append_to_commit_log(cut, data[cut:])
    slave.replication.set_confirm_offset(len(data))
    await settle(slave)
    assert len(bodies(slave)) == 6 and blank_entries(slave) == []


async def test_queue_gap_is_redispatched_from_the_commit_log_not_blank_filled(stores, tmp_path):
    """Defence in depth: should dispatch ever pass records by (here: the reput offset moved past
    three of them by hand), the first record after them finds its queue short. The queue asks
    for a re-dispatch from its last entry, so the skipped records get their real entries."""
    s = await stores("a", broker_role=SLAVE)
    slave_ha(s, tmp_path, "a")
    master = await stores("m")
    results = [await master.put_message(msg(i, qid=i % 2)) for i in range(20)]
    data = raw_log(master)
    assert s.replication.append_to_commit_log(0, data)
    ends = [r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes for r in results]
    s.replication.set_confirm_offset(ends[5])
    s.reput_service.do_reput()
    assert s.get_max_offset_in_queue("T", 0) == 3 and s.get_max_offset_in_queue("T", 1) == 3
    s.reput_service.reput_from_offset = ends[11]  # records 6..11 (queue offsets 3..5 of each) skipped
    s.replication.set_confirm_offset(len(data))
    await settle(s)
    for qid in (0, 1):
        assert blank_entries(s, qid=qid) == []
        assert cq_entries(s, qid=qid) == cq_entries(master, qid=qid)
        assert bodies(s, qid=qid) == bodies(master, qid=qid)


async def test_queue_gap_no_record_owns_is_filled_once(stores, tmp_path):
    """A gap that no record in the CommitLog owns (queue offsets never assigned) still ends in
    blanks after one re-dispatch: dispatch never loops on it."""
    master = await stores("m")
    for i in range(3):
        await master.put_message(msg(i))
    master.commit_log.topic_queue_table[("T", 0)] += 4  # queue offsets 3..6 never used
    for i in range(3, 5):
        await master.put_message(msg(i))
    await settle(master)
    assert blank_entries(master) == [3, 4, 5, 6]
    assert len(bodies(master)) == 5
    s = await stores("s", broker_role=SLAVE)
    slave_ha(s, tmp_path, "s")
    data = raw_log(master)
    assert s.replication.append_to_commit_log(0, data)
    s.replication.set_confirm_offset(len(data))
    await settle(s)
    assert cq_entries(s) == cq_entries(master)
