"""IndexFile layout (byte for byte RocketMQ's) and IndexService build/query/roll/reload/expiry."""

from __future__ import annotations

import os
import struct
import tempfile
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.index_file import (
    INDEX_HEADER_SIZE,
    IndexFile,
    IndexFileError,
    index_file_name,
    index_file_size,
    index_key_hash,
    java_string_hash,
)
from orbitmq.broker.store.index_service import IndexService
from orbitmq.broker.store.running_flags import RunningFlags
from orbitmq.common import sysflag

SLOTS = 4
ITEMS = 8


def _config(tmp_path, slots=SLOTS, items=ITEMS) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(tmp_path), max_hash_slot_num=slots, max_index_num=items)


def _req(offset: int, ts: int, keys: str = "", uniq: str | None = None, topic: str = "T", flag: int = 0):
    return DispatchRequest(
        topic=topic,
        queue_id=0,
        commit_log_offset=offset,
        msg_size=100,
        tags_code=0,
        store_timestamp=ts,
        consume_queue_offset=0,
        keys=keys,
        uniq_key=uniq,
        sys_flag=flag,
    )


def test_java_hash_matches_values_computed_by_java():
    # Values printed by a JVM's String.hashCode.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 1772899  # surrogate pair, as Java's char[] sees it
    assert java_string_hash("TopicTest#KEY-1") == 173552481
    assert index_key_hash("Hello World") == 862545276
    assert index_key_hash("polygenelubricants") == 0  # Math.abs(MIN_VALUE) stays negative -> 0


def test_byte_exact_layout(tmp_path):
    slots, items = 8, 8
    path = str(tmp_path / "20240101000000000")
    f = IndexFile(path, slots, items)
    assert os.path.getsize(path) == index_file_size(slots, items) == 40 + 8 * 4 + 8 * 20
    t0 = 1_700_000_000_000
    assert f.put_key("hello", 1000, t0)  # hash 99162322 -> slot 2
    assert f.put_key("Hello World", 2000, t0 + 5_500)  # hash 862545276 -> slot 4; 5.5 s -> timeDiff 5
    assert f.put_key("Aa", 3000, t0 + 9_000)  # hash 2112 -> slot 0
    assert f.put_key("BB", 4000, t0 + 12_000)  # same hash as "Aa": chains to item 3
    f.flush()
    with open(path, "rb") as fh:
        raw = fh.read()

    # Header: beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount.
    assert raw[:INDEX_HEADER_SIZE] == struct.pack(">qqqqii", t0, t0 + 12_000, 1000, 4000, 3, 5)
    expected_slots = [4, 0, 1, 0, 2, 0, 0, 0]
    assert raw[40 : 40 + slots * 4] == struct.pack(">8i", *expected_slots)
    items_at = 40 + slots * 4
    expected_items = (
        bytes(20)  # item 0 is never used: 0 means "no item"
        + struct.pack(">iqii", 99162322, 1000, 0, 0)
        + struct.pack(">iqii", 862545276, 2000, 5, 0)
        + struct.pack(">iqii", 2112, 3000, 9, 0)
        + struct.pack(">iqii", 2112, 4000, 12, 3)
    )
    assert raw[items_at : items_at + 5 * 20] == expected_items
    assert raw[items_at + 5 * 20 :] == bytes(3 * 20)
    f.close()


def test_hash_collisions_chain_newest_first(tmp_path):
    f = IndexFile(str(tmp_path / "20240101000000000"), SLOTS, ITEMS)
    t0 = 1_700_000_000_000
    f.put_key("Aa", 100, t0)
    f.put_key("BB", 200, t0 + 1000)
    f.put_key("Aa", 300, t0 + 2000)
    # Equal Java hashes are indistinguishable in the index: the caller checks real keys.
    assert f.select_phy_offset("Aa", 10, 0, 2**62) == [300, 200, 100]
    assert f.select_phy_offset("BB", 2, 0, 2**62) == [300, 200]
    assert f.select_phy_offset("hello", 10, 0, 2**62) == []
    # Time range: only the middle item's timestamp is inside.
    assert f.select_phy_offset("Aa", 10, t0 + 500, t0 + 1500) == [200]
    assert f.is_time_matched(t0 + 500, t0 + 1500)
    assert not f.is_time_matched(t0 + 5000, t0 + 6000)
    f.close()


def test_write_full_and_size_mismatch(tmp_path):
    path = str(tmp_path / "20240101000000000")
    f = IndexFile(path, SLOTS, 3)
    assert f.put_key("a", 1, 1000) and f.put_key("b", 2, 1000)
    assert f.is_write_full()  # indexCount starts at 1: 3 items hold 2 keys
    assert not f.put_key("c", 3, 1000)
    f.close()
    with pytest.raises(IndexFileError):
        IndexFile(path, SLOTS, 4)


def test_file_name_is_creation_time():
    name = index_file_name(1_700_000_000_123)
    assert len(name) == 17 and name.endswith("123") and name.isdigit()


def test_service_builds_keys_and_uniq_key_and_queries_newest_first(tmp_path):
    svc = IndexService(_config(tmp_path, slots=16, items=64))
    assert svc.load(True)
    t0 = 1_700_000_000_000
    svc.build_index(_req(0, t0, keys="order-1 order-2", uniq="UNIQ0"))
    svc.build_index(_req(100, t0 + 1000, keys="order-1"))
    svc.build_index(_req(200, t0 + 2000, keys="order-1", topic="Other"))
    svc.build_index(_req(300, t0 + 3000, keys="order-1"))

    r = svc.query_offset("T", "order-1", 10, 0, 2**62)
    assert [o for o in r.phy_offsets] == [300, 100, 0]
    assert r.index_last_update_phyoffset == 300 and r.index_last_update_timestamp == t0 + 3000
    assert svc.query_offset("T", "order-1", 2, 0, 2**62).phy_offsets == [300, 100]
    assert svc.query_offset("T", "order-1", 10, t0 + 500, t0 + 1500).phy_offsets == [100]
    assert svc.query_offset("T", "UNIQ0", 10, 0, 2**62).phy_offsets == [0]
    assert svc.query_offset("T", "order-2", 10, 0, 2**62).phy_offsets == [0]
    assert svc.query_offset("Other", "order-1", 10, 0, 2**62).phy_offsets == [200]
    svc.shutdown()


def test_service_skips_rollback_and_reindexing(tmp_path):
    svc = IndexService(_config(tmp_path, slots=16, items=64))
    svc.load(True)
    svc.build_index(_req(0, 1000, keys="k", flag=sysflag.TRANSACTION_ROLLBACK_TYPE))
    svc.build_index(_req(50, 1000, keys="k", flag=sysflag.TRANSACTION_PREPARED_TYPE))
    svc.build_index(_req(100, 2000, keys="k"))
    svc.build_index(_req(50, 1000, keys="k"))  # re-dispatch below the last indexed offset
    assert svc.query_offset("T", "k", 10, 0, 2**62).phy_offsets == [100, 50]
    svc.shutdown()


def test_rollover_flushes_full_file_and_queries_span_files(tmp_path):
    flushed: list[int] = []
    done = threading.Event()

    def on_flushed(ts: int) -> None:
        flushed.append(ts)
        done.set()

    svc = IndexService(_config(tmp_path, slots=4, items=4), on_index_file_flushed=on_flushed)
    svc.load(True)
    t0 = 1_700_000_000_000
    for i in range(7):  # 3 keys per file (indexCount starts at 1 of 4)
        svc.build_index(_req(i * 100, t0 + i * 1000, keys="k"))
    files = svc.files
    assert len(files) == 3
    assert [f.file_name for f in files] == sorted(f.file_name for f in files)
    assert files[1].begin_phy_offset == 300 and files[2].begin_phy_offset == 600
    assert done.wait(10)
    assert flushed[0] == t0 + 2000  # endTimestamp of the first full file, flushed first
    assert svc.query_offset("T", "k", 64, 0, 2**62).phy_offsets == [600, 500, 400, 300, 200, 100, 0]
    assert svc.query_offset("T", "k", 4, 0, 2**62).phy_offsets == [600, 500, 400, 300]
    # The newest file is skipped when the range ends before it begins.
    assert svc.query_offset("T", "k", 64, t0 + 1000, t0 + 3500).phy_offsets == [300, 200, 100]
    svc.shutdown()  # waits for the flush worker
    assert flushed == [t0 + 2000, t0 + 5000]  # in file order, so the checkpoint never runs ahead


def test_reload_from_disk_and_abnormal_exit(tmp_path):
    cfg = _config(tmp_path, slots=4, items=4)
    svc = IndexService(cfg)
    svc.load(True)
    t0 = 1_700_000_000_000
    for i in range(7):
        svc.build_index(_req(i * 100, t0 + i * 1000, keys="k"))
    svc.shutdown()

    again = IndexService(cfg)
    assert again.load(True)
    assert len(again.files) == 3
    assert again.query_offset("T", "k", 64, 0, 2**62).phy_offsets == [600, 500, 400, 300, 200, 100, 0]
    again.build_index(_req(700, t0 + 7000, keys="k"))  # continues in the last, non-full file
    assert len(again.files) == 3
    again.shutdown()

    # Abnormal exit: files newer than the checkpoint's indexMsgTimestamp are dropped.
    crashed = IndexService(cfg)
    assert crashed.load(False, index_msg_timestamp=t0 + 2000)
    assert len(crashed.files) == 1
    assert crashed.query_offset("T", "k", 64, 0, 2**62).phy_offsets == [200, 100, 0]
    assert len(os.listdir(cfg.index_dir)) == 1
    crashed.build_index(_req(300, t0 + 3000, keys="k"))  # the dispatcher rebuilds from here
    assert crashed.query_offset("T", "k", 64, 0, 2**62).phy_offsets == [300, 200, 100, 0]
    assert crashed.destroy_after(t0 + 2000) == 1
    assert crashed.query_offset("T", "k", 64, 0, 2**62).phy_offsets == [200, 100, 0]
    crashed.shutdown()


def test_delete_expired_files_behind_commitlog_min_offset(tmp_path):
    svc = IndexService(_config(tmp_path, slots=4, items=4))
    svc.load(True)
    for i in range(7):
        svc.build_index(_req(i * 100, 1_700_000_000_000 + i, keys="k"))
    assert svc.delete_expired_file(200) == 0  # the first file's last item points at 200 itself
    assert svc.delete_expired_file(250) == 1
    assert svc.query_offset("T", "k", 64, 0, 2**62).phy_offsets == [600, 500, 400, 300]
    assert svc.delete_expired_file(10_000) == 1  # the file being written is never deleted
    assert len(svc.files) == 1 and len(os.listdir(svc.store_path)) == 1
    svc.shutdown()


def test_unwritable_index_dir_flags_the_store_instead_of_raising(tmp_path):
    blocker = tmp_path / "index"
    blocker.write_text("not a directory")
    flags = RunningFlags()
    svc = IndexService(_config(tmp_path), str(blocker), running_flags=flags)
    svc.build_index(_req(0, 1000, keys="k"))
    assert not flags.is_writeable()
    assert svc.query_offset("T", "k", 10, 0, 2**62).phy_offsets == []
    svc.shutdown()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["Aa", "BB", "k1", "k2", "order-7", "\u00e9t\u00e9"]), min_size=1, max_size=30))
def test_queries_match_a_reference_model(keys):
    """Across rollovers, a query returns every item whose key hashes equal, newest first."""
    with tempfile.TemporaryDirectory() as d:
        svc = IndexService(_config(d, slots=3, items=5))
        svc.load(True)
        t0 = 1_700_000_000_000
        for i, k in enumerate(keys):
            svc.build_index(_req(i * 10, t0 + i * 1000, keys=k))
        for k in set(keys):
            expected = [i * 10 for i, other in reversed(list(enumerate(keys)))
                        if java_string_hash(other) == java_string_hash(k)]
            assert svc.query_offset("T", k, 64, 0, 2**62).phy_offsets == expected[:64]
            assert svc.query_offset("T", k, 2, 0, 2**62).phy_offsets == expected[:2]
        svc.shutdown()
