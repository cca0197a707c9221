"""The batched IndexFile writer and the memoised key hasher against a one-key-at-a-time reference.

The reference below is the writer as RocketMQ's IndexFile.putKey spells it (and as OrbitMQ's was
before put_hashes): hash the whole `topic#key`, read the slot, write the item, the slot and the
whole header, once per key. Every file the service writes must be byte-identical to it.
"""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orbitmq.broker.store.index_file as index_file_mod
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.index_file import IndexFile, IndexKeyHasher, index_key_hash
from orbitmq.broker.store.index_service import IndexService
from orbitmq.common import sysflag

_HEADER = struct.Struct(">qqqqii")
_ITEM = struct.Struct(">iqii")


def _definition_hash(s: str) -> int:
    """abs(String.hashCode) spelled out over UTF-16 code units; MIN_VALUE -> 0."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return 0 if signed == -(2**31) else abs(signed)


class _RefFile:
    """One index file, written one key at a time with the header rewritten after every key."""

    def __init__(self, slots: int, items: int, end_phy: int = 0, end_ts: int = 0) -> None:
        self.slots, self.items = slots, items
        self.buf = bytearray(40 + slots * 4 + items * 20)
        self.begin_ts = self.end_ts = end_ts if end_ts > 0 else 0
        self.begin_phy = self.end_phy = end_phy if end_phy > 0 else 0
        self.slot_count, self.count = 0, 1
        self._header()

    def _header(self) -> None:
        _HEADER.pack_into(self.buf, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                          self.slot_count, self.count)

    def full(self) -> bool:
        return self.count >= self.items

    def put_key(self, key: str, phy: int, ts: int) -> bool:
        if self.full():
            return False
        kh = _definition_hash(key)
        slot_pos = 40 + (kh % self.slots) * 4
        (slot_value,) = struct.unpack_from(">i", self.buf, slot_pos)
        if slot_value <= 0 or slot_value > self.count:
            slot_value = 0
        if self.begin_ts <= 0 or self.count <= 1:
            diff = 0
        else:
            diff = min(max(int((ts - self.begin_ts) / 1000), 0), 0x7FFFFFFF)
        _ITEM.pack_into(self.buf, 40 + self.slots * 4 + self.count * 20, kh, phy, diff, slot_value)
        struct.pack_into(">i", self.buf, slot_pos, self.count)
        if self.count <= 1:
            self.begin_phy, self.begin_ts = phy, ts
        if slot_value == 0:
            self.slot_count += 1
        self.count += 1
        self.end_phy, self.end_ts = phy, ts
        self._header()
        return True


class _RefService:
    def __init__(self, slots: int, items: int) -> None:
        self.slots, self.items = slots, items
        self.files: list[_RefFile] = []

    def _last(self) -> _RefFile:
        if self.files and not self.files[-1].full():
            return self.files[-1]
        prev = self.files[-1] if self.files else None
        f = _RefFile(self.slots, self.items, prev.end_phy if prev else 0, prev.end_ts if prev else 0)
        self.files.append(f)
        return f

    def build_index(self, req: DispatchRequest) -> None:
        if not req.success or (req.sys_flag & 0xC) == sysflag.TRANSACTION_ROLLBACK_TYPE:
            return
        keys = [k for k in req.keys.split(" ") if k] if req.keys else []
        if req.uniq_key is None and not keys:
            return
        f = self._last()
        if req.commit_log_offset < f.end_phy:
            return
        full_keys = ([req.uniq_key] if req.uniq_key else []) + keys
        for k in full_keys:
            while not f.put_key(req.topic + "#" + k, req.commit_log_offset, req.store_timestamp):
                f = self._last()


def _req(offset: int, ts: int, topic: str, uniq: str | None, keys: str, flag: int = 0) -> DispatchRequest:
    return DispatchRequest(topic=topic, queue_id=0, commit_log_offset=offset, msg_size=100, tags_code=0,
                           store_timestamp=ts, consume_queue_offset=0, keys=keys, uniq_key=uniq, sys_flag=flag)


def _file_bytes(f: IndexFile) -> bytes:
    with open(f.path, "rb") as fh:
        return fh.read()


# UNIQ_KEY-shaped ids (shared per-producer prefix, millisecond, counter) and assorted keys,
# including ones shorter than the hasher splits, non-ASCII and astral ones, and colliding ones.
_UNIQ = st.one_of(
    st.none(),
    st.just(""),
    st.builds(lambda p, ms, c: p + f"{ms:08X}{c:04X}", st.sampled_from(["0A000007109A1B2C3D4E", "7F0000010001DEADBEEF"]),
              st.integers(0, 3), st.integers(0, 0x10F)),
    st.text(max_size=40),
)
_KEY = st.one_of(
    st.sampled_from(["Aa", "BB", "k", "order-1", "order-2", "order-12", "\u00e9t\u00e9", "\U0001F600x", "AaAa", "BBBB"]),
    st.text(st.characters(max_codepoint=0x7F, blacklist_characters=" "), min_size=1, max_size=12),
    st.text(st.characters(blacklist_categories=("Cs", "Zs")), min_size=1, max_size=6),
)
_RECORD = st.tuples(
    st.sampled_from(["T", "Other", "TopicTest", "t\u00f6pic"]),
    _UNIQ,
    st.lists(_KEY, max_size=4).map(" ".join),
    st.sampled_from([0, 0, 0, sysflag.TRANSACTION_ROLLBACK_TYPE, sysflag.TRANSACTION_PREPARED_TYPE]),
    st.sampled_from([0, 1, 999, 1000, 1500, 65_000, -2_000]),  # store-time step, sometimes backwards
    st.sampled_from([100, 100, 100, 0, -250]),  # offset step: re-dispatched records go backwards
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_RECORD, min_size=1, max_size=40), st.sampled_from([(5, 6), (3, 4), (11, 9), (1, 2)]))
def test_files_are_byte_identical_to_one_key_at_a_time(records, geometry):
    slots, items = geometry
    with tempfile.TemporaryDirectory() as d:
        cfg = MessageStoreConfig(store_path_root_dir=d, max_hash_slot_num=slots, max_index_num=items)
        svc = IndexService(cfg)
        assert svc.load(True)
        ref = _RefService(slots, items)
        offset, ts = 1000, 1_700_000_000_000
        sent = []
        for topic, uniq, keys, flag, dt, doff in records:
            offset, ts = max(0, offset + doff), ts + dt
            req = _req(offset, ts, topic, uniq, keys, flag)
            svc.build_index(req)
            ref.build_index(req)
            sent.append((topic, uniq, keys))
        files = svc.files
        assert len(files) == len(ref.files)
        for f, r in zip(files, ref.files, strict=True):
            assert _file_bytes(f) == bytes(r.buf)
            assert (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
                    f.hash_slot_count, f.index_count) == (r.begin_ts, r.end_ts, r.begin_phy, r.end_phy,
                                                          r.slot_count, r.count)
        # Queries walk the same chains, so they find the same offsets (newest first, across files).
        for topic, uniq, keys in sent:
            for k in ([uniq] if uniq else []) + [k for k in keys.split(" ") if k]:
                got = svc.query_offset(topic, k, 64, 0, 2**62).phy_offsets
                kh = _definition_hash(topic + "#" + k)
                want = []
                for r in reversed(ref.files):
                    base = 40 + r.slots * 4
                    want += [phy for i in range(r.count - 1, 0, -1)
                             for h, phy, _, _ in [_ITEM.unpack_from(r.buf, base + i * 20)] if h == kh]
                assert got == want[:64]
        svc.shutdown()


class _TinyHasher(IndexKeyHasher):
    MAX_TOPICS = 2
    MAX_HEADS = 3


_SHARED_HASHER = _TinyHasher()  # reused across examples, so its tables fill up and get cleared


@given(
    st.text(max_size=20),
    st.one_of(
        st.text(max_size=300),
        st.text(st.characters(max_codepoint=0x7F), max_size=300),
        st.builds(lambda c: "0A000007109A1B2C3D4E075BCD15" + f"{c:04X}", st.integers(0, 0xFFFF)),
    ),
)
def test_key_hasher_equals_hashing_the_whole_key(topic, key):
    for hasher in (IndexKeyHasher(), _SHARED_HASHER):
        expected = index_key_hash(topic + "#" + key)
        assert hasher.key_hash(topic, key) == expected
        assert hasher.key_hash(topic, key) == expected  # and again, from the memo tables
    assert expected == _definition_hash(topic + "#" + key)


def test_key_hasher_known_jvm_values():
    h = IndexKeyHasher()
    assert h.key_hash("TopicTest", "KEY-1") == 173552481  # "TopicTest#KEY-1".hashCode()
    assert h.key_hash("TopicTest", "KEY-1") == 173552481
    # "T#kafzkfa6i".hashCode() is Integer.MIN_VALUE (found by search), whose abs overflows -> 0.
    assert _definition_hash("T#kafzkfa6i") == 0
    assert h.key_hash("T", "kafzkfa6i") == 0
    assert h.key_hash("T", "kafzkfa6i") == 0


def test_a_record_whose_keys_straddle_a_rollover(tmp_path):
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path), max_hash_slot_num=4, max_index_num=4)
    svc = IndexService(cfg)
    svc.load(True)
    t0 = 1_700_000_000_000
    svc.build_index(_req(100, t0, "T", None, "a"))
    svc.build_index(_req(200, t0 + 3000, "T", "U1", "b c d e"))  # 5 keys: 2 fit, 3 go to file 2
    files = svc.files
    assert [f.index_count for f in files] == [4, 4]
    assert files[0].end_phy_offset == files[1].begin_phy_offset == 200
    assert files[1].begin_timestamp == t0 + 3000
    for k in ("U1", "b", "c", "d", "e"):
        assert svc.query_offset("T", k, 10, 0, 2**62).phy_offsets == [200]
    assert svc.query_offset("T", "a", 10, 0, 2**62).phy_offsets == [100]
    svc.shutdown()


def test_a_crash_mid_record_never_leaves_a_header_ahead_of_its_items(tmp_path, monkeypatch):
    """The header is written after the record's last item: dying in between leaves it behind."""
    f = IndexFile(str(tmp_path / "20240101000000000"), 8, 16)
    t0 = 1_700_000_000_000
    assert f.put_hashes([11, 12], 100, t0) == 2
    before = _file_bytes(f)[:40]
    real = index_file_mod._item_pack_into
    calls = []

    def dying_pack_into(*args):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        real(*args)

    monkeypatch.setattr(index_file_mod, "_item_pack_into", dying_pack_into)
    with pytest.raises(RuntimeError):
        f.put_hashes([21, 22, 23], 200, t0 + 5000)
    monkeypatch.setattr(index_file_mod, "_item_pack_into", real)
    on_disk = _file_bytes(f)
    assert on_disk[:40] == before  # still claims items 1-2 only, the record's first item is beyond it
    assert _HEADER.unpack_from(on_disk)[5] == 3
    assert f.index_count == 3 and f.end_phy_offset == 100
    # Reopened as after a crash: the header's counts are what the next writer trusts.
    f.close()
    again = IndexFile(f.path, 8, 16)
    assert (again.index_count, again.end_phy_offset, again.end_timestamp) == (3, 100, t0)
    assert again.put_hashes([31], 300, t0 + 9000) == 1
    assert _ITEM.unpack_from(_file_bytes(again), 40 + 8 * 4 + 3 * 20) == (31, 300, 9, 0)
    again.close()


def test_put_hashes_returns_how_many_fit_and_skips_empty(tmp_path):
    f = IndexFile(str(tmp_path / "20240101000000000"), 4, 4)
    assert f.put_hashes([], 5, 1000) == 0
    assert (f.index_count, f.begin_phy_offset, f.end_phy_offset) == (1, 0, 0)  # nothing recorded
    assert f.put_hashes([1, 2, 3, 4], 5, 1000) == 3
    assert f.is_write_full()
    assert f.put_hashes([9], 6, 2000) == 0
    f.close()
    assert os.path.getsize(str(tmp_path / "20240101000000000")) == 40 + 16 + 80
