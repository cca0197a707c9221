"""ConsumeQueue appends: entries and blank fillers land at byte i*20, across segment boundaries."""

from orbitmq.broker.store.consume_queue import _BLANK_ENTRY, CQ_ENTRY, CQ_STORE_UNIT_SIZE, ConsumeQueue

PER_FILE = 5


def _cq(tmp_path) -> ConsumeQueue:
    cq = ConsumeQueue("T", 0, str(tmp_path), PER_FILE * CQ_STORE_UNIT_SIZE)
    cq.load()
    return cq


def _bytes(cq: ConsumeQueue) -> bytes:
    return b"".join(bytes(mf.mm[: mf.wrote_position]) for mf in cq.mapped_file_queue.mapped_files)


def test_entries_fill_segments_in_order(tmp_path):
    cq = _cq(tmp_path)
    for i in range(12):
        assert cq.put_message_position_info(1000 + 100 * i, 100, i, i)
    assert len(cq.mapped_file_queue.mapped_files) == 3
    assert _bytes(cq) == b"".join(CQ_ENTRY.pack(1000 + 100 * i, 100, i) for i in range(12))
    assert cq.get_max_offset_in_queue() == 12
    assert cq.get_entry(7) == (1700, 100, 7)
    cq.shutdown()


def test_gap_blanks_that_fill_a_segment_put_the_entry_in_the_next(tmp_path):
    cq = _cq(tmp_path)
    cq.put_message_position_info(1000, 100, 1, 0)
    # Entries 1..4 are missing: blanks fill the first segment exactly, entry 5 opens the second.
    cq.put_message_position_info(1100, 100, 2, 5)
    assert [mf.wrote_position for mf in cq.mapped_file_queue.mapped_files] == [100, 20]
    assert _bytes(cq) == CQ_ENTRY.pack(1000, 100, 1) + _BLANK_ENTRY * 4 + CQ_ENTRY.pack(1100, 100, 2)
    assert cq.get_entry(5) == (1100, 100, 2)
    # A re-dispatched record is ignored.
    cq.put_message_position_info(1100, 100, 2, 5)
    assert cq.get_max_offset_in_queue() == 6
    cq.shutdown()


def test_queue_starting_mid_segment_is_pre_filled_with_blanks(tmp_path):
    cq = _cq(tmp_path)
    cq.put_message_position_info(5000, 50, 9, 7)
    assert cq.get_min_offset_in_queue() == 7
    mf = cq.mapped_file_queue.get_last_mapped_file()
    assert mf.file_from_offset == 100 and mf.wrote_position == 60
    assert bytes(mf.mm[:60]) == _BLANK_ENTRY * 2 + CQ_ENTRY.pack(5000, 50, 9)
    cq.shutdown()
