"""ConsumeQueueExt (enableConsumeQueueExt): upstream's unit layout, addresses, segments, recovery,
and the store's SQL92 pre-match by the bloom bit maps the ConsumeQueue extension keeps."""

import asyncio
import os
import struct
import time

import pytest

from orbitmq.broker.filter import (
    CommitLogDispatcherCalcBitMap,
    ConsumerFilterManager,
    ExpressionMessageFilter,
)
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.consume_queue import CQ_ENTRY
from orbitmq.broker.store.consume_queue_ext import (
    END_BLANK_DATA_LENGTH,
    MAX_ADDR,
    MIN_EXT_UNIT_SIZE,
    ConsumeQueueExt,
    CqExtUnit,
    decorate,
    is_ext_addr,
    undecorate,
)
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.message_codec import decode_record, tags_hash_code

LONG_MIN = -(1 << 63)


# ---- layout and addresses -------------------------------------------------------------------

def test_unit_layout_is_upstreams():
    unit = CqExtUnit(tags_code=0x0102030405060708, msg_store_time=1_700_000_000_123, filter_bit_map=b"\x01\x80\x00")
    raw = unit.encode()
    # CqExtUnit#write: size short, tagsCode long, msgStoreTime long, bitMapSize short, bit map
    assert raw == (struct.pack(">h", 23) + bytes.fromhex("0102030405060708") + struct.pack(">q", 1_700_000_000_123)
                   + struct.pack(">h", 3) + b"\x01\x80\x00")
    assert MIN_EXT_UNIT_SIZE == 20 and unit.size == 23
    assert CqExtUnit.decode(raw) == unit
    bare = CqExtUnit(-5, 7, None)
    assert bare.encode() == struct.pack(">hqqh", 20, -5, 7, 0)
    assert CqExtUnit.decode(bare.encode()) == bare
    assert CqExtUnit.decode(b"\x00\x00" + bytes(30)) is None  # size < 1: nothing there


def test_address_encoding():
    assert MAX_ADDR == -(2**31) - 1
    assert decorate(0) == LONG_MIN and decorate(123) == LONG_MIN + 123
    assert undecorate(decorate(4096)) == 4096
    assert is_ext_addr(decorate(0)) and is_ext_addr(MAX_ADDR)
    # a tag hash code is an int widened to a long: never an address
    assert not is_ext_addr(-(2**31)) and not is_ext_addr(0) and not is_ext_addr(tags_hash_code("TagA"))
    assert decorate(decorate(5)) == decorate(5) and undecorate(77) == 77


def test_put_get_and_segment_end(tmp_path):
    size = 200
    ext = ConsumeQueueExt("T", 0, str(tmp_path / "consumequeue_ext"), size, 16)
    units = [CqExtUnit(i, 1000 + i, bytes([i]) * 2) for i in range(20)]
    addrs = [ext.put(u) for u in units]
    assert all(is_ext_addr(a) for a in addrs)
    # 22-byte units: 8 fit in 200 - END_BLANK_DATA_LENGTH (8 * 22 = 176, a 9th needs 198 > 196)
    assert [undecorate(a) for a in addrs[:9]] == [22 * i for i in range(8)] + [200]
    assert [ext.get(a) for a in addrs] == units
    first = ext.mapped_file_queue.mapped_files[0]
    assert first.mm[176:178] == b"\xff\xff"  # fullFillToEnd: a short -1 closes the segment
    assert 200 - 176 >= END_BLANK_DATA_LENGTH
    assert os.path.isfile(tmp_path / "consumequeue_ext" / "T" / "0" / "00000000000000000000")
    assert os.path.isfile(tmp_path / "consumequeue_ext" / "T" / "0" / "00000000000000000200")
    assert ext.get(1) is None and ext.get(decorate(10_000)) is None
    assert ext.put(CqExtUnit(0, 0, b"x" * 40_000)) == 1  # over MAX_EXT_UNIT_SIZE: not written
    ext.shutdown()


def test_recover_and_truncate(tmp_path):
    root = str(tmp_path / "consumequeue_ext")
    ext = ConsumeQueueExt("T", 1, root, 200, 16)
    addrs = [ext.put(CqExtUnit(i, i, b"ab")) for i in range(12)]
    ext.flush_all()
    ext.shutdown()
    again = ConsumeQueueExt("T", 1, root, 200, 16)
    again.load()
    again.recover()
    assert again.get_max_address() == ext.get_max_address()
    assert [again.get(a).tags_code for a in addrs] == list(range(12))
    again.truncate_by_max_address(addrs[9])  # units after the 10th go
    assert again.get(addrs[10]) is None and again.get(addrs[9]).tags_code == 9
    nxt = again.put(CqExtUnit(99, 99, b"cd"))
    assert nxt == addrs[10]
    again.truncate_by_min_address(addrs[10])  # in the second segment: the first one goes
    assert len(again.mapped_file_queue.mapped_files) == 1 and again.get(addrs[0]) is None
    again.destroy()


# ---- the store with the extension ------------------------------------------------------------

def make_config(tmp_path, **kw) -> MessageStoreConfig:
    base = dict(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=64 * 1024,
                mapped_file_size_consume_queue=20 * 500, message_index_enable=False,
                enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=4096,
                bit_map_length_consume_queue_ext=112)
    base.update(kw)
    return MessageStoreConfig(**base)


def msg(i: int, topic="T", tags="A") -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, queue_id=0, body=b"m%d" % i,
                                 properties={"TAGS": tags, "a": str(i % 10)},
                                 born_timestamp=int(time.time() * 1000), born_host=("10.0.0.1", 1))


async def settle(s: MessageStore) -> None:
    for _ in range(500):
        if s.dispatch_behind_bytes() == 0:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("reput did not catch up")


def drain(store: MessageStore, message_filter, topic="T") -> tuple[list[int], int]:
    """Every message of queue 0 the filter passes (their "a" ... by body index), and the pulls."""
    got, offset, pulls = [], 0, 0
    while True:
        res = store.get_message("G", topic, 0, offset, 32, 1 << 20, message_filter)
        pulls += 1
        for buf in res.message_buffer_list:
            got.append(int(decode_record(bytes(buf), 0, check_crc=False).body[1:]))
        if res.next_begin_offset == offset or res.status in (GetMessageStatus.OFFSET_OVERFLOW_ONE,):
            return got, pulls
        offset = res.next_begin_offset


def filter_manager(tmp_path) -> ConsumerFilterManager:
    manager = ConsumerFilterManager(str(tmp_path / "cfg"))
    manager.register("T", "G", "a = '3'", "SQL92", 1)
    manager.get("T", "G").born_time = 0  # registered before every message here
    return manager


async def test_store_entries_point_to_units_with_bit_maps(tmp_path):
    manager = filter_manager(tmp_path)
    store = MessageStore(make_config(tmp_path))
    store.add_first_dispatcher(CommitLogDispatcherCalcBitMap(manager))
    await store.start()
    try:
        for i in range(50):
            assert (await store.put_message(msg(i))).is_ok()
        await settle(store)
        cq = store.get_consume_queue("T", 0)
        raw = [CQ_ENTRY.unpack_from(cq.mapped_file_queue.mapped_files[0].mm, 20 * i)[2] for i in range(50)]
        assert all(is_ext_addr(t) for t in raw)
        units = [cq.get_ext(t) for t in raw]
        assert {u.tags_code for u in units} == {tags_hash_code("A")}
        masks = manager.get("T", "G").masks
        hit = [all(u.filter_bit_map[b] & m for b, m in masks) for u in units]
        assert hit == [i % 10 == 3 for i in range(50)]
        assert all(len(u.filter_bit_map) == 14 and u.msg_store_time > 0 for u in units)
        # readers see the real tag code
        assert cq.get_entry(7)[2] == tags_hash_code("A")
        data = manager.get("T", "G")
        sub = SubscriptionData(topic="T", sub_string="a = '3'", expression_type="SQL92")
        got, _ = drain(store, ExpressionMessageFilter(sub, data, manager))
        assert got == [i for i in range(50) if i % 10 == 3]
        # the CQ stage alone rejects the rest: no CommitLog read for them
        reads = []
        real = store.commit_log.get_message
        store.commit_log.get_message = lambda o, s: reads.append(o) or real(o, s)
        drain(store, ExpressionMessageFilter(sub, data, manager))
        assert len(reads) == 5
    finally:
        await store.shutdown()


async def test_restart_recovers_ext_and_abnormal_truncation(tmp_path):
    manager = filter_manager(tmp_path)
    cfg = make_config(tmp_path)
    store = MessageStore(cfg)
    store.add_first_dispatcher(CommitLogDispatcherCalcBitMap(manager))
    await store.start()
    for i in range(300):  # several 4 KiB extension segments
        assert (await store.put_message(msg(i))).is_ok()
    await settle(store)
    before = store.get_consume_queue("T", 0).ext.get_max_address()
    await store.shutdown()
    ext_dir = tmp_path / "store" / "consumequeue_ext" / "T" / "0"
    assert len(os.listdir(ext_dir)) > 1

    store = MessageStore(make_config(tmp_path))
    store.add_first_dispatcher(CommitLogDispatcherCalcBitMap(manager))
    await store.start()
    try:
        cq = store.get_consume_queue("T", 0)
        assert cq.ext.get_max_address() == before
        data = manager.get("T", "G")
        sub = SubscriptionData(topic="T", sub_string="a = '3'", expression_type="SQL92")
        assert drain(store, ExpressionMessageFilter(sub, data, manager))[0] == [i for i in range(300) if i % 10 == 3]
        for i in range(300, 320):  # appended after the recovered end, no gap
            assert (await store.put_message(msg(i))).is_ok()
        await settle(store)
        assert drain(store, ExpressionMessageFilter(sub, data, manager))[0] == [i for i in range(320) if i % 10 == 3]
        # garbage after the last unit (a crash mid-write) is cut by recovery
        cq.ext.put(CqExtUnit(1, 1, b"z" * 14))
        dangling = cq.ext.get_max_address()
    finally:
        await store.shutdown()
    store = MessageStore(make_config(tmp_path))
    await store.start()
    try:
        cq = store.get_consume_queue("T", 0)
        assert cq.ext.get_max_address() < dangling
        assert cq.get_entry(319)[2] == tags_hash_code("A")
    finally:
        await store.shutdown()


async def test_extension_off_keeps_plain_tag_codes(tmp_path):
    store = MessageStore(make_config(tmp_path, enable_consume_queue_ext=False))
    await store.start()
    try:
        for i in range(5):
            assert (await store.put_message(msg(i))).is_ok()
        await settle(store)
        cq = store.get_consume_queue("T", 0)
        assert cq.ext is None
        assert CQ_ENTRY.unpack_from(cq.mapped_file_queue.mapped_files[0].mm, 0)[2] == tags_hash_code("A")
        assert "consumequeue_ext" not in os.listdir(tmp_path / "store")
    finally:
        await store.shutdown()


async def test_tag_filter_and_no_bitmap_with_extension(tmp_path):
    """Without enableCalcFilterBitMap the units carry no bit map: SQL92 filters fall back to the
    CommitLog check, TAG filters use the unit's tag code."""
    from orbitmq.common.filter import build_message_filter

    store = MessageStore(make_config(tmp_path))
    await store.start()
    try:
        for i in range(20):
            assert (await store.put_message(msg(i, tags="A" if i % 2 else "B"))).is_ok()
        await settle(store)
        assert drain(store, build_message_filter("TAG", "B"))[0] == list(range(0, 20, 2))
        manager = filter_manager(tmp_path)
        sub = SubscriptionData(topic="T", sub_string="a = '3'", expression_type="SQL92")
        got, _ = drain(store, ExpressionMessageFilter(sub, manager.get("T", "G"), manager))
        assert got == [3, 13]
    finally:
        await store.shutdown()


@pytest.mark.parametrize("born_after", [True])
async def test_message_before_the_filter_was_born_passes_the_cq_stage(tmp_path, born_after):
    manager = filter_manager(tmp_path)
    store = MessageStore(make_config(tmp_path))
    store.add_first_dispatcher(CommitLogDispatcherCalcBitMap(manager))
    await store.start()
    try:
        for i in range(10):
            assert (await store.put_message(msg(i))).is_ok()
        await settle(store)
        data = manager.get("T", "G")
        data.born_time = 2**62  # isMsgInLive false: the bit maps predate the filter
        sub = SubscriptionData(topic="T", sub_string="a = '3'", expression_type="SQL92")
        flt = ExpressionMessageFilter(sub, data, manager)
        cq = store.get_consume_queue("T", 0)
        raw = CQ_ENTRY.unpack_from(cq.mapped_file_queue.mapped_files[0].mm, 0)[2]
        assert flt.is_matched_by_consume_queue_ext(tags_hash_code("A"), cq.get_ext(raw))
        assert drain(store, flt)[0] == [3]
    finally:
        await store.shutdown()
