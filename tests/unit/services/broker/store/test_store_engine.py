"""CommitLog / ConsumeQueue / MessageStore behaviour on small segments."""

import asyncio
import os
import struct
import time
from pathlib import Path

import pytest

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.consume_queue import CQ_ENTRY
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import (
    AppendMessageStatus,
    GetMessageStatus,
    MessageExtBrokerInner,
    PutMessageStatus,
)
from orbitmq.common.message_codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, decode_record, tags_hash_code

CL_SIZE = 8192


def make_config(tmp_path, **kw) -> MessageStoreConfig:
    base = dict(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=CL_SIZE,
        mapped_file_size_consume_queue=20 * 50,
        message_index_enable=False,
        max_hash_slot_num=64,
        max_index_num=256,
    )
    base.update(kw)
    return MessageStoreConfig(**base)


def msg(topic="T", qid=0, body=b"x" * 100, tags="A", **kw) -> MessageExtBrokerInner:
    props = {"TAGS": tags} if tags else {}
    props.update(kw.pop("props", {}))
    kw.setdefault("born_host", ("10.1.2.3", 4000))
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=body, properties=props,
                                 born_timestamp=int(time.time() * 1000), **kw)


@pytest.fixture
async def store(tmp_path):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    yield s
    await s.shutdown()


async def settle(s: MessageStore) -> None:
    for _ in range(200):
        if s.dispatch_behind_bytes() == 0:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("reput did not catch up")


def segment_files(s: MessageStore) -> list[str]:
    return sorted(os.listdir(s.config.commit_log_dir))


async def test_rollover_across_many_segments_writes_blank_records(store):
    offsets = []
    for i in range(200):
        r = await store.put_message(msg(body=bytes([i % 251]) * 300))
        assert r.status is PutMessageStatus.PUT_OK
        assert r.append_message_result.logics_offset == i
        offsets.append(r.append_message_result.wrote_offset)
    files = segment_files(store)
    assert len(files) >= 8
    assert files[0] == "00000000000000000000" and files[1] == f"{CL_SIZE:020d}"
    # No record crosses a segment boundary; each segment ends with a blank record.
    for off in offsets:
        assert off // CL_SIZE == (off + 391 - 1) // CL_SIZE
    mfs = store.commit_log.mapped_file_queue.mapped_files
    for mf in mfs[:-1]:
        pos = 0
        while True:
            total, magic = struct.unpack_from(">iI", mf.mm, pos)
            if magic == BLANK_MAGIC_CODE:
                assert pos + total == CL_SIZE
                break
            assert magic == MESSAGE_MAGIC_CODE
            pos += total
    await settle(store)
    got = []
    offset = 0
    while True:
        res = store.get_message("g", "T", 0, offset)
        if res.status is not GetMessageStatus.FOUND:
            break
        got += [decode_record(b).body[0] for b in res.message_buffer_list]
        offset = res.next_begin_offset
    assert got == [i % 251 for i in range(200)]


async def test_batch_crossing_a_segment_end_continues_in_next_segment(store):
    await store.put_message(msg(body=b"a" * 7000))
    batch = [msg(qid=1, body=bytes([i]) * 200) for i in range(10)]
    r = await store.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK
    ar = r.append_message_result
    assert ar.msg_num == 10 and ar.logics_offset == 0
    phys = [p for p, _ in ar.offsets]
    assert [q for _, q in ar.offsets] == list(range(10))
    assert phys[0] < CL_SIZE <= phys[-1]
    assert len(ar.msg_id.split(",")) == 10
    # All records of the batch share one store timestamp.
    await settle(store)
    res = store.get_message("g", "T", 1, 0)
    assert [decode_record(b).body[0] for b in res.message_buffer_list] == list(range(10))
    assert len({decode_record(b).store_timestamp for b in res.message_buffer_list}) == 1


async def test_batch_is_all_or_nothing(store):
    before = store.get_max_phy_offset()
    r = await store.put_messages([msg(), msg(body=b"x" * (5 * 1024 * 1024))])
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_phy_offset() == before


async def test_store_timestamps_never_go_backwards(store, monkeypatch):
    import orbitmq.broker.store.commit_log as cl_mod

    real = time.time_ns
    skew = {"v": 0}
    monkeypatch.setattr(cl_mod.time, "time_ns", lambda: real() - skew["v"])
    stamps = []
    for i in range(20):
        skew["v"] = 5_000_000_000 if i % 2 else 0  # the clock jumps back 5 s every other put
        r = await store.put_message(msg())
        stamps.append(r.append_message_result.store_timestamp)
    assert stamps == sorted(stamps)


async def test_max_message_size_is_rejected(tmp_path):
    s = MessageStore(make_config(tmp_path, mapped_file_size_commit_log=1 << 20, max_message_size=4096))
    await s.start()
    try:
        r = await s.put_message(msg(body=b"x" * 5000))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert r.append_message_result.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
        r = await s.put_message(msg(topic="t" * 128))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        r = await s.put_message(msg(props={"big": "v" * 40000}))
        assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        bad = [msg(qid=-1), msg(qid=1 << 31), msg(flag=1 << 40), msg(born_host=("not-an-ip", 1)),
               msg(born_host=("10.0.0.1", 70000)), msg(flag="7"), msg(born_host=("10.0.0.1",)),
               msg(reconsume_times=1 << 33), msg(qid="1"), msg(body="text")]
        for m in bad:
            assert (await s.put_message(m)).status is PutMessageStatus.MESSAGE_ILLEGAL
            assert (await s.put_messages([msg(), m])).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert s.get_max_phy_offset() == 0
        r = await s.put_message(msg(body=b"x" * 3000))
        assert r.status is PutMessageStatus.PUT_OK and r.append_message_result.logics_offset == 0
        # The limit is on the body; the record may take 64 KiB more (RocketMQ 5's encoder).
        r = await s.put_message(msg(body=b"x" * 4096, props={"p": "v" * 20000}))
        assert r.status is PutMessageStatus.PUT_OK
        r = await s.put_message(msg(body=b"x" * 4097))
        assert r.append_message_result.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
    finally:
        await s.shutdown()


async def test_get_message_status_codes(store):
    assert store.get_message("g", "nope", 0, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for _ in range(5):
        await store.put_message(msg())
    await settle(store)
    r = store.get_message("g", "T", 0, 5)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 5
    r = store.get_message("g", "T", 0, 9)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 5  # the max offset (DefaultMessageStore#getMessage)
    r = store.get_message("g", "T", 0, 2)
    assert r.status is GetMessageStatus.FOUND and r.message_queue_offset == [2, 3, 4]
    assert r.min_offset == 0 and r.max_offset == 5 and r.next_begin_offset == 5
    # Offsets below the min once old queue segments are gone.
    cq = store.get_consume_queue("T", 0)
    cq.min_logic_offset = 3 * 20
    r = store.get_message("g", "T", 0, 1)
    assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == 3


async def test_get_message_caps_and_tag_filter(store):
    for i in range(40):
        await store.put_message(msg(body=b"y" * 50, tags="A" if i % 2 else "B"))
    await settle(store)
    r = store.get_message("g", "T", 0, 0)
    assert r.message_count == 32 and r.next_begin_offset == 32
    r = store.get_message("g", "T", 0, 0, max_msg_nums=5)
    assert r.message_count == 5 and r.next_begin_offset == 5
    r = store.get_message("g", "T", 0, 0, max_total_size=3 * 172)
    assert r.message_count == 3

    class TagFilter:
        def __init__(self, tag):
            self.code = tags_hash_code(tag)

        def is_matched_by_consume_queue(self, tags_code):
            return tags_code == self.code

        def is_matched_by_commit_log(self, properties):
            return True

    r = store.get_message("g", "T", 0, 0, message_filter=TagFilter("A"))
    assert r.message_queue_offset == list(range(1, 40, 2))
    r = store.get_message("g", "T", 0, 0, message_filter=TagFilter("none"))
    assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset == 40


async def test_in_disk_cap_applies_when_data_is_not_in_memory(tmp_path):
    cfg = make_config(tmp_path, mapped_file_size_commit_log=1 << 20, access_message_in_memory_max_ratio=0)
    s = MessageStore(cfg)
    await s.start()
    try:
        for _ in range(20):
            await s.put_message(msg(body=b"z" * 100))
        await settle(s)
        r = s.get_message("g", "T", 0, 0)
        # maxTransferCountOnMessageInDisk (8) once data is "on disk"; the newest record is in memory.
        assert r.message_count == 8
        assert r.suggest_pulling_from_slave
    finally:
        await s.shutdown()


async def test_search_offset_by_timestamp_and_queue_queries(store, monkeypatch):
    import orbitmq.broker.store.commit_log as cl_mod

    base = 1_800_000_000_000
    clock = {"t": base}
    monkeypatch.setattr(cl_mod.time, "time_ns", lambda: clock["t"] * 1_000_000)
    for i in range(30):
        clock["t"] = base + i * 1000
        await store.put_message(msg())
    await settle(store)
    assert store.get_offset_in_queue_by_time("T", 0, base - 5) == 0
    assert store.get_offset_in_queue_by_time("T", 0, base + 10_000) == 10
    assert store.get_offset_in_queue_by_time("T", 0, base + 10_500) == 11
    assert store.get_offset_in_queue_by_time("T", 0, base + 99_000) == 30
    assert store.get_earliest_message_time("T", 0) == base
    assert store.get_message_store_timestamp("T", 0, 7) == base + 7000
    assert store.get_message_store_timestamp("T", 0, 99) == -1
    assert store.get_min_offset_in_queue("T", 0) == 0 and store.get_max_offset_in_queue("T", 0) == 30
    phy = store.get_commit_log_offset_in_queue("T", 0, 4)
    assert store.look_message_by_offset(phy).queue_offset == 4


async def test_lookup_by_offset_message_id(store):
    r = await store.put_message(msg(body=b"find me"))
    msg_id = r.append_message_result.msg_id
    assert len(msg_id) == 32 and msg_id.startswith("7F000001" + "00002A9F")
    found = store.look_message_by_msg_id(msg_id)
    assert found.body == b"find me" and found.msg_id == msg_id
    assert store.look_message_by_msg_id("7F00000100002A9F" + f"{1 << 30:016X}") is None
    assert store.look_message_by_msg_id("zz") is None


async def test_consume_queue_entries_are_twenty_bytes(store):
    r1 = await store.put_message(msg(tags="TagA"))
    r2 = await store.put_message(msg(tags=None))
    await settle(store)
    cq = store.get_consume_queue("T", 0)
    mf = cq.mapped_file_queue.mapped_files[0]
    raw = mf.mm[0:40]
    a1 = r1.append_message_result
    assert raw[:20] == struct.pack(">qiq", a1.wrote_offset, a1.wrote_bytes, 2598919)
    assert CQ_ENTRY.unpack(raw[20:40]) == (r2.append_message_result.wrote_offset, r2.append_message_result.wrote_bytes, 0)
    assert sorted(os.listdir(os.path.join(store.config.consume_queue_dir, "T", "0"))) == ["00000000000000000000"]


async def test_arrival_listener_and_extra_dispatcher(store):
    arrivals, dispatched = [], []
    store.add_arrival_listener(lambda *a: arrivals.append(a))
    store.add_dispatcher(lambda req: dispatched.append(req.commit_log_offset))
    r = await store.put_message(msg(qid=2, tags="X", props={"k": "v"}))
    await settle(store)
    topic, qid, logic, tags_code, ts, props = arrivals[0]
    assert (topic, qid, logic, tags_code) == ("T", 2, 1, tags_hash_code("X"))
    assert ts == r.append_message_result.store_timestamp and props["k"] == "v"
    assert dispatched == [r.append_message_result.wrote_offset]


async def test_sync_flush_timeout_keeps_the_message(tmp_path):
    cfg = make_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=100)
    s = MessageStore(cfg)
    await s.start()
    try:
        ok = await s.put_message(msg(body=b"fast"))
        assert ok.status is PutMessageStatus.PUT_OK
        s.commit_log.before_flush_hook = lambda: time.sleep(0.4)
        slow = await s.put_message(msg(body=b"slow"))
        assert slow.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert slow.is_ok()
        s.commit_log.before_flush_hook = None
        await settle(s)
        r = s.get_message("g", "T", 0, 0)
        assert [decode_record(b).body for b in r.message_buffer_list] == [b"fast", b"slow"]
    finally:
        await s.shutdown()


async def test_sync_flush_group_commit_shares_fsyncs(tmp_path):
    s = MessageStore(make_config(tmp_path, flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=1 << 20))
    await s.start()
    calls = []
    s.commit_log.before_flush_hook = lambda: calls.append(1)
    try:
        results = await asyncio.gather(*(s.put_message(msg(qid=i % 4)) for i in range(64)))
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert s.commit_log.mapped_file_queue.flushed_where >= max(
            r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes for r in results)
        assert len(calls) < 64
    finally:
        s.commit_log.before_flush_hook = None
        await s.shutdown()


async def test_restart_keeps_offsets_and_delete_topics(tmp_path):
    cfg = make_config(tmp_path)
    s = MessageStore(cfg)
    await s.start()
    for i in range(30):
        await s.put_message(msg(qid=i % 3, body=b"k" * 400))
    await s.shutdown()
    assert not await asyncio.to_thread(os.path.exists, cfg.abort_path)
    s = MessageStore(cfg)
    await s.start()
    try:
        assert s.last_exit_ok
        assert [s.get_max_offset_in_queue("T", q) for q in range(3)] == [10, 10, 10]
        r = await s.put_message(msg(qid=1))
        assert r.append_message_result.logics_offset == 10
        assert await s.delete_topics(["T"]) == 3
        assert s.get_message("g", "T", 0, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        r = await s.put_message(msg(qid=1))
        assert r.append_message_result.logics_offset == 0
        assert int(s.runtime_info()["commitLogMaxOffset"]) == s.get_max_phy_offset()
    finally:
        await s.shutdown()


async def test_slave_and_disk_full_refuse_writes(tmp_path):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    try:
        s.running_flags.make_disk_full()
        assert (await s.put_message(msg())).status is PutMessageStatus.DISK_FULL
        s.running_flags.make_disk_ok()
        s.config.broker_role = "SLAVE"
        assert (await s.put_message(msg())).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        s.config.broker_role = "ASYNC_MASTER"
        assert (await s.put_message(msg())).status is PutMessageStatus.PUT_OK
    finally:
        await s.shutdown()


async def test_second_store_on_same_directory_is_refused(tmp_path):
    cfg = make_config(tmp_path)
    s = MessageStore(cfg)
    await s.start()
    try:
        with pytest.raises(RuntimeError, match="locked"):
            await MessageStore(cfg).start()
    finally:
        await s.shutdown()


async def test_index_is_built_through_the_dispatch_chain_and_rebuilt_after_a_crash(tmp_path):
    cfg = make_config(tmp_path, message_index_enable=True)
    s = MessageStore(cfg)
    await s.start()
    offsets = {}
    for i in range(20):
        r = await s.put_message(msg(props={"KEYS": f"order-{i}", "UNIQ_KEY": f"U{i:04d}"}))
        offsets[i] = r.append_message_result.wrote_offset
    await settle(s)
    found = s.index_service.query_offset("T", "order-7", 10, 0, 2**62)
    assert found.phy_offsets == [offsets[7]]
    # Simulate a crash: the abort marker stays, so the next start recovers abnormally.
    await s.shutdown()
    await asyncio.to_thread(Path(cfg.abort_path).touch)
    s = MessageStore(cfg)
    await s.start()
    try:
        assert not s.last_exit_ok
        for i in (0, 7, 19):
            assert s.index_service.query_offset("T", f"order-{i}", 10, 0, 2**62).phy_offsets == [offsets[i]]
            assert s.index_service.query_offset("T", f"U{i:04d}", 10, 0, 2**62).phy_offsets == [offsets[i]]
    finally:
        await s.shutdown()


async def test_retention_pass_moves_queue_min_offsets(tmp_path):
    cfg = make_config(tmp_path, file_reserved_time=0, delete_commit_log_files_interval=0,
                      delete_consume_queue_files_interval=0)
    s = MessageStore(cfg)
    await s.start()
    try:
        for _ in range(120):
            await s.put_message(msg(body=b"r" * 300))
        await settle(s)
        assert s.retention_service is not None
        s.retention_service.execute_delete_files_manually()
        await s.retention_service.run_once()
        min_phy = s.get_min_phy_offset()
        assert min_phy > 0
        low = s.get_min_offset_in_queue("T", 0)
        assert low > 0
        assert s.get_commit_log_offset_in_queue("T", 0, low) >= min_phy
        r = s.get_message("g", "T", 0, 0)
        assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == low
        r = s.get_message("g", "T", 0, low)
        assert r.status is GetMessageStatus.FOUND and r.message_queue_offset[0] == low
    finally:
        await s.shutdown()


async def test_start_fails_clearly_on_mismatched_segment_size_and_releases_the_lock(tmp_path):
    cfg = make_config(tmp_path)
    s = MessageStore(cfg)
    await s.start()
    await s.put_message(msg())
    await s.shutdown()
    wrong = make_config(tmp_path, mapped_file_size_commit_log=CL_SIZE * 2)
    with pytest.raises(OSError, match="segment size"):
        await MessageStore(wrong).start()
    s = MessageStore(cfg)  # the failed start left the directory unlocked
    await s.start()
    try:
        assert s.get_max_offset_in_queue("T", 0) == 1
    finally:
        await s.shutdown()


async def test_lost_consume_queues_are_rebuilt_from_the_commit_log(tmp_path):
    import shutil

    cfg = make_config(tmp_path)
    s = MessageStore(cfg)
    await s.start()
    for i in range(90):
        await s.put_message(msg(qid=i % 3, body=bytes([i]) * 200))
    await s.shutdown()
    await asyncio.to_thread(shutil.rmtree, cfg.consume_queue_dir)
    for crashed in (False, True):
        if crashed:
            await asyncio.to_thread(Path(cfg.abort_path).touch)
        s = MessageStore(cfg)
        await s.start()
        try:
            assert s.last_exit_ok is not crashed
            for q in range(3):
                r = s.get_message("g", "T", q, 0, max_msg_nums=64)
                assert [decode_record(b).body[0] for b in r.message_buffer_list][:30] == list(range(q, 90, 3))
            r = await s.put_message(msg(qid=2))
            assert r.append_message_result.logics_offset == 30 + crashed
        finally:
            await s.shutdown()


async def test_sync_flush_put_without_wait_returns_at_once(tmp_path):
    s = MessageStore(make_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=100))
    await s.start()
    s.commit_log.before_flush_hook = lambda: time.sleep(0.3)
    try:
        r = await s.put_message(msg(props={"WAIT": "false"}))
        assert r.status is PutMessageStatus.PUT_OK
    finally:
        s.commit_log.before_flush_hook = None
        await s.shutdown()
