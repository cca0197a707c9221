"""EpochFileCache: file format, CRC, .bak fallback, append/truncate rules, consistent point."""

import os
import zlib

from orbitmq.broker.ha.epoch_file import (
    LONG_MAX,
    EpochEntry,
    EpochFileCache,
    decode_epoch_file,
    encode_epoch_file,
    find_consistent_point,
)


def test_format_is_count_crc_and_lines():
    text = encode_epoch_file([EpochEntry(1, 0), EpochEntry(2, 1048576)])
    lines = text.split(os.linesep)
    assert lines[0] == "2"
    body = f"1-0{os.linesep}2-1048576{os.linesep}"
    assert int(lines[1]) == zlib.crc32(body.encode()) & 0x7FFFFFFF
    assert lines[2:4] == ["1-0", "2-1048576"]
    assert text.endswith(os.linesep)


def test_decode_rejects_bad_count_and_crc_but_crc_zero_is_unchecked():
    good = encode_epoch_file([EpochEntry(1, 0), EpochEntry(3, 500)])
    assert [(e.epoch, e.start_offset) for e in decode_epoch_file(good)] == [(1, 0), (3, 500)]
    lines = good.split(os.linesep)
    assert decode_epoch_file(os.linesep.join(["3", *lines[1:]])) is None
    assert decode_epoch_file(os.linesep.join([lines[0], "12345", *lines[2:]])) is None
    assert decode_epoch_file(os.linesep.join([lines[0], "0", *lines[2:]])) is not None
    assert decode_epoch_file("") is None
    assert decode_epoch_file(f"1{os.linesep}0{os.linesep}garbage{os.linesep}") is None


def test_append_persists_and_end_offsets_are_computed(tmp_path):
    path = str(tmp_path / "epochFileCheckpoint")
    cache = EpochFileCache(path)
    assert cache.load() is False
    assert cache.last_epoch() == -1
    assert cache.append_entry(EpochEntry(1, 0))
    assert cache.append_entry(EpochEntry(2, 100))
    assert cache.append_entry(EpochEntry(4, 250))
    entries = cache.all_entries()
    assert [(e.epoch, e.start_offset, e.end_offset) for e in entries] == [(1, 0, 100), (2, 100, 250), (4, 250, LONG_MAX)]
    again = EpochFileCache(path)
    assert again.load()
    assert [(e.epoch, e.start_offset, e.end_offset) for e in again.all_entries()] == \
        [(e.epoch, e.start_offset, e.end_offset) for e in entries]


def test_append_needs_both_epoch_and_start_to_grow(tmp_path):
    cache = EpochFileCache(str(tmp_path / "e"))
    assert cache.append_entry(EpochEntry(2, 100))
    assert not cache.append_entry(EpochEntry(2, 200))  # same epoch
    assert not cache.append_entry(EpochEntry(3, 100))  # same start (#9689)
    assert not cache.append_entry(EpochEntry(1, 300))
    assert cache.append_entry(EpochEntry(3, 101))
    assert cache.size() == 2


def test_bak_fallback_when_main_file_is_corrupt(tmp_path):
    path = str(tmp_path / "e")
    cache = EpochFileCache(path)
    cache.append_entry(EpochEntry(1, 0))
    cache.append_entry(EpochEntry(2, 10))
    assert os.path.exists(path + ".bak")  # the previous version
    with open(path, "w") as f:
        f.write("2\n999\n1-0\n2-10\n")  # bad CRC
    again = EpochFileCache(path)
    assert again.load()
    assert [(e.epoch, e.start_offset) for e in again.all_entries()] == [(1, 0)]
    with open(path, "w"):
        pass  # empty
    assert EpochFileCache(path).load()
    assert not os.path.exists(path + ".tmp")


def test_truncate_suffix_prefix_and_lookups(tmp_path):
    cache = EpochFileCache(str(tmp_path / "e"))
    for epoch, start in ((1, 0), (2, 100), (3, 200), (5, 300)):
        cache.append_entry(EpochEntry(epoch, start))
    assert cache.find_entry_by_offset(150).epoch == 2
    assert cache.find_entry_by_offset(10**12).epoch == 5
    assert cache.next_entry(2).epoch == 3
    assert cache.next_entry(5) is None
    cache.truncate_suffix_by_offset(200)  # drops starts >= 200
    assert [e.epoch for e in cache.all_entries()] == [1, 2]
    assert cache.last_entry().end_offset == LONG_MAX
    cache.append_entry(EpochEntry(6, 250))
    cache.truncate_suffix_by_epoch(6)
    assert cache.last_epoch() == 2
    cache.truncate_prefix_by_offset(150)  # epoch 1 ended at 100 <= 149
    assert [e.epoch for e in cache.all_entries()] == [2]
    reloaded = EpochFileCache(cache.path)
    reloaded.load()
    assert [e.epoch for e in reloaded.all_entries()] == [2]


def test_consistent_point():
    e = EpochEntry
    # Same history, master ahead: the point is the local end.
    assert find_consistent_point([e(1, 0), e(2, 100)], 150, [e(1, 0), e(2, 100)], 300) == 150
    # Slave wrote more under epoch 2 than the master kept; master moved to epoch 3 at 120.
    assert find_consistent_point([e(1, 0), e(2, 100)], 180, [e(1, 0), e(2, 100), e(3, 120)], 300) == 120
    # Local epoch 2 unknown to the master: fall back to epoch 1, ending at the smaller end.
    assert find_consistent_point([e(1, 0), e(2, 100)], 180, [e(1, 0), e(3, 80)], 300) == 80
    # Same epoch number with another start does not count.
    assert find_consistent_point([e(1, 5)], 50, [e(1, 0)], 300) == -1
    assert find_consistent_point([e(1, 0)], 50, [], 0) == -1
