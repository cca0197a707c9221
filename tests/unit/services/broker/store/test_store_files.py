"""MappedFile / MappedFileQueue / ConsumeQueue file handling: retention hooks, holes, loading."""

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.broker.store.consume_queue import BLANK_ENTRY_SIZE, CQ_ENTRY, ConsumeQueue
from orbitmq.broker.store.mapped_file import TMP_SUFFIX, MappedFile
from orbitmq.broker.store.mapped_file_queue import MappedFileQueue
from orbitmq.common.message_codec import decode_record, encode_record

SEG = 4096


def fill_queue(tmp_path, n_files: int) -> MappedFileQueue:
    q = MappedFileQueue(str(tmp_path / "log"), SEG)
    for i in range(n_files):
        mf = q.get_last_mapped_file_or_create(0)
        assert mf.file_from_offset == i * SEG
        assert mf.append(bytes([i + 1]) * SEG)
    return q


def test_segments_are_named_by_offset_and_found_by_offset(tmp_path):
    q = fill_queue(tmp_path, 3)
    assert sorted(os.listdir(tmp_path / "log")) == [f"{i * SEG:020d}" for i in range(3)]
    assert q.find_mapped_file_by_offset(SEG + 5).file_from_offset == SEG
    assert q.find_mapped_file_by_offset(10 * SEG) is None
    assert q.get_max_offset() == 3 * SEG and q.get_min_offset() == 0
    assert q.roll_next_file(SEG + 7) == 2 * SEG


def test_flush_tracks_flushed_where(tmp_path):
    q = fill_queue(tmp_path, 2)
    q.flush_until(q.get_max_offset())
    assert q.flushed_where == 2 * SEG
    assert all(mf.flushed_position == SEG for mf in q.mapped_files)


def test_delete_expired_files_by_time_keeps_the_last_and_stops_at_young_files(tmp_path):
    q = fill_queue(tmp_path, 5)
    old = time.time() - 3600
    for mf in q.mapped_files[:2]:
        os.utime(mf.path, (old, old))
    assert q.delete_expired_files_by_time(60_000, 0, 1000, False) == 2
    assert [mf.file_from_offset for mf in q.mapped_files] == [2 * SEG, 3 * SEG, 4 * SEG]
    assert len(os.listdir(tmp_path / "log")) == 3
    # clean_immediately removes everything but the newest segment.
    assert q.delete_expired_files_by_time(10**9, 0, 1000, True) == 2
    assert [mf.file_from_offset for mf in q.mapped_files] == [4 * SEG]


def test_held_file_is_not_deleted_until_released_or_forced(tmp_path):
    q = fill_queue(tmp_path, 2)
    first = q.mapped_files[0]
    assert first.hold()
    assert q.delete_expired_files_by_time(0, 0, 10**9, True) == 0
    first.release()
    assert first.is_cleanup_over() and os.path.exists(first.path)
    assert q.delete_expired_files_by_time(0, 0, 0, True) == 1
    assert not os.path.exists(first.path) and len(q.mapped_files) == 1


def test_consume_queue_delete_expired_by_commit_log_offset(tmp_path):
    cq = ConsumeQueue("T", 0, str(tmp_path / "cq"), 20 * 4)
    for i in range(10):
        cq.put_message_position_info(1000 + i * 100, 100, 0, i)
    assert len(cq.mapped_file_queue.mapped_files) == 3
    # Records below 1500 are gone: the first segment (entries 0-3, last at 1300) goes.
    assert cq.delete_expired_file(1500) == 1
    assert cq.get_min_offset_in_queue() == 5  # first entry whose record is >= 1500
    assert cq.get_max_offset_in_queue() == 10
    assert cq.get_entry(3) is None and cq.get_entry(5)[0] == 1500


def test_consume_queue_starting_mid_way_fills_leading_blanks(tmp_path):
    root = str(tmp_path / "cq")
    cq = ConsumeQueue("T", 1, root, 20 * 10)
    cq.put_message_position_info(5000, 80, 7, 13)
    cq.put_message_position_info(5080, 80, 7, 14)
    assert cq.get_min_offset_in_queue() == 13 and cq.get_max_offset_in_queue() == 15
    mf = cq.mapped_file_queue.mapped_files[0]
    assert mf.file_from_offset == 200
    assert CQ_ENTRY.unpack_from(mf.mm, 0) == (0, BLANK_ENTRY_SIZE, 0)
    assert cq.get_entry(13) == (5000, 80, 7)
    cq.shutdown()
    again = ConsumeQueue("T", 1, root, 20 * 10)
    again.load()
    again.recover()
    assert again.get_max_offset_in_queue() == 15 and again.max_physic_offset == 5160
    again.correct_min_offset(0)
    assert again.get_min_offset_in_queue() == 13


def test_consume_queue_ignores_redispatch_and_truncates_to_commit_log(tmp_path):
    cq = ConsumeQueue("T", 0, str(tmp_path / "cq"), 20 * 4)
    for i in range(6):
        cq.put_message_position_info(i * 100, 100, 0, i)
    cq.put_message_position_info(200, 100, 0, 2)  # re-dispatch after recovery: ignored
    assert cq.get_max_offset_in_queue() == 6
    cq.truncate_dirty_logic_files(350)  # CommitLog ends mid-way through the 4th record
    assert cq.get_max_offset_in_queue() == 3 and cq.max_physic_offset == 300
    cq.put_message_position_info(300, 60, 0, 3)
    assert cq.get_entry(3) == (300, 60, 0)


def test_load_rejects_wrong_segment_size_and_drops_interrupted_creation(tmp_path):
    q = fill_queue(tmp_path, 2)
    q.shutdown()
    (tmp_path / "log" / (f"{2 * SEG:020d}" + TMP_SUFFIX)).write_bytes(b"partial")
    again = MappedFileQueue(str(tmp_path / "log"), SEG)
    again.load()
    assert len(again.mapped_files) == 2
    assert not any(n.endswith(TMP_SUFFIX) for n in os.listdir(tmp_path / "log"))
    again.shutdown()
    with pytest.raises(OSError, match="segment size"):
        MappedFileQueue(str(tmp_path / "log"), SEG * 2).load()


def test_truncate_dirty_files_zeroes_the_tail_and_deletes_later_segments(tmp_path):
    q = fill_queue(tmp_path, 3)
    q.truncate_dirty_files(SEG + 100)
    assert len(q.mapped_files) == 2
    mf = q.mapped_files[1]
    assert mf.wrote_position == 100
    assert mf.mm[100:SEG] == bytes(SEG - 100) and mf.mm[:100] == bytes([2]) * 100
    assert not os.path.exists(tmp_path / "log" / f"{2 * SEG:020d}")


def test_mapped_file_destroy_removes_file(tmp_path):
    mf = MappedFile(str(tmp_path / f"{0:020d}"), SEG)
    assert mf.append(b"abc") and mf.read(0, 3) == b"abc" and mf.read(0, 4) is None
    assert mf.destroy(0)
    assert not os.path.exists(mf.path)


hosts = st.sampled_from([("127.0.0.1", 1), ("10.0.0.2", 65535), ("::1", 9), ("2001:db8::7", 10911)])
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=20)


@settings(max_examples=150, deadline=None)
@given(
    topic=st.text(alphabet="abcXYZ_%-0123456789", min_size=1, max_size=60),
    body=st.binary(max_size=300),
    queue_id=st.integers(0, 2**31 - 1),
    queue_offset=st.integers(0, 2**62),
    born=hosts,
    store=hosts,
    props=st.dictionaries(st.text(alphabet="abcKEY", min_size=1, max_size=8), text, max_size=4),
    reconsume=st.integers(0, 100),
)
def test_record_round_trip(topic, body, queue_id, queue_offset, born, store, props, reconsume):
    rec = encode_record(topic=topic, queue_id=queue_id, body=body, queue_offset=queue_offset, born_host=born,
                        store_host=store, properties=props, reconsume_times=reconsume, born_timestamp=1,
                        store_timestamp=2, physical_offset=77)
    m = decode_record(rec)
    assert (m.topic, m.body, m.queue_id, m.queue_offset, m.properties, m.reconsume_times) == (
        topic, body, queue_id, queue_offset, props, reconsume)
    assert m.store_size == len(rec) and m.commit_log_offset == 77
    assert m.born_host.endswith(f":{born[1]}") and m.store_host.endswith(f":{store[1]}")


def test_warm_segment_is_zero_filled_and_full_size(tmp_path):
    mf = MappedFile(str(tmp_path / f"{0:020d}"), SEG, warm=True)
    assert os.path.getsize(mf.path) == SEG and mf.mm[:] == bytes(SEG)
    assert os.stat(mf.path).st_blocks * 512 >= SEG  # really allocated, not sparse
    assert not any(n.endswith(TMP_SUFFIX) for n in os.listdir(tmp_path))
    mf.destroy(0)
