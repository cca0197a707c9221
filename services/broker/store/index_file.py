"""IndexFile: RocketMQ's on-disk hash index from message key to CommitLog offset.

The layout is RocketMQ's byte for byte so that an index directory written by either broker can
be read by the other (and by offline tools):

    header  40 B   beginTimestamp:q endTimestamp:q beginPhyOffset:q endPhyOffset:q
                   hashSlotCount:i indexCount:i            (big-endian, indexCount starts at 1)
    slots   hashSlotNum x 4 B      item number of the newest item hashed to that slot (0 = none)
    items   indexNum x 20 B        keyHash:i phyOffset:q timeDiff:i prevIndex:i

Item 0 is never written, so 0 doubles as "no item". Collisions chain through prevIndex, newest
first. Readers must still compare the real message's key: distinct keys may share a hash.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
import time
from collections.abc import Sequence
from datetime import datetime

from orbitmq.common import speedups
from orbitmq.common.java_hash import java_string_hash, java_string_hash_u32, pow31  # noqa: F401 (re-export)

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0

_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_ITEM = struct.Struct(">iqii")
_INT_MAX = 0x7FFFFFFF
# Bound methods, looked up once: put_hashes runs for every stored record.
_slot_unpack_from = _SLOT.unpack_from
_slot_pack_into = _SLOT.pack_into
_item_pack_into = _ITEM.pack_into
_header_pack_into = _HEADER.pack_into
# IndexKeyHasher splits keys up to this long; 31**n mod 2**32 for each such n.
_MEMO_MAX_LEN = 256
_POW31 = [pow31(n) for n in range(_MEMO_MAX_LEN + 1)]
# Two ASCII chars -> their hash; at most 128**2 entries, shared by every hasher.
_TAILS: dict[str, int] = {}

# Header field offsets, as IndexHeader lays them out.
BEGIN_TIMESTAMP_POS = 0
END_TIMESTAMP_POS = 8
BEGIN_PHY_OFFSET_POS = 16
END_PHY_OFFSET_POS = 24
HASH_SLOT_COUNT_POS = 32
INDEX_COUNT_POS = 36


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode), with Integer.MIN_VALUE (whose abs overflows) -> 0."""
    return abs_java_hash(java_string_hash_u32(key))


def abs_java_hash(h: int) -> int:
    """Math.abs of the signed int whose bits are the unsigned ``h``; Integer.MIN_VALUE -> 0.

    For h >= 2**31 the signed value is h - 2**32, so its abs is 2**32 - h, which ``-h & INT_MAX``
    yields, and 2**31 itself (MIN_VALUE) comes out as 0.
    """
    return h if h < 0x80000000 else -h & 0x7FFFFFFF


class IndexKeyHasher:
    """index_key_hash(topic + "#" + key) without hashing the whole key string each time.

    hashCode is a polynomial, so for an ASCII key of n chars
    ``hash(topic#key) = hash(topic#) * 31**n + hash(key[:-2]) * 31**2 + hash(key[-2:])`` (mod 2**32).
    Each part is memoised: topics are few, and keys share heads - a UNIQ_KEY is a fixed
    per-producer prefix, the millisecond and a counter, so consecutive messages differ only in
    their last chars; the two-char tails of ASCII keys are at most 128**2. The tables only hold
    exact values, so a lost update between threads merely costs a recomputation.
    """

    # Bounds (a table is refilled from scratch when it gets this big): at most 64 Ki heads.
    MAX_TOPICS = 64
    MAX_HEADS = 1024

    def __init__(self) -> None:
        # topic -> {key[:-2] -> hash(topic#key[:-2]) * 31**2}, all unsigned.
        self._heads: dict[str, dict[str, int]] = {}
        self._prefixes: dict[str, int] = {}  # topic -> hash(topic#), unsigned

    def key_hash(self, topic: str, key: str) -> int:
        """index_key_hash(build_key(topic, key))."""
        n = len(key)
        if n <= 2 or n > _MEMO_MAX_LEN or not key.isascii():
            return index_key_hash(topic + "#" + key)
        heads = self._heads.get(topic)
        if heads is None:
            heads = self._new_topic(topic)
        head = key[:-2]
        base = heads.get(head)
        if base is None:
            base = self._new_head(topic, heads, head)
        tail = key[-2:]
        tt = _TAILS.get(tail)
        if tt is None:
            tt = _TAILS[tail] = ord(tail[0]) * 31 + ord(tail[1])
        h = (base + tt) & 0xFFFFFFFF
        return h if h < 0x80000000 else -h & 0x7FFFFFFF

    def _new_topic(self, topic: str) -> dict[str, int]:
        if len(self._heads) >= self.MAX_TOPICS:
            self._heads.clear()
            self._prefixes.clear()
        self._prefixes[topic] = java_string_hash_u32(topic + "#")
        heads = self._heads[topic] = {}
        return heads

    def _new_head(self, topic: str, heads: dict[str, int], head: str) -> int:
        """hash(topic#head) * 31**2: what the hash of the two tail chars is added to."""
        if len(heads) >= self.MAX_HEADS:
            heads.clear()
        prefix = self._prefixes.get(topic)
        if prefix is None:  # the tables were cleared by another thread in between
            prefix = java_string_hash_u32(topic + "#")
        base = heads[head] = (prefix * _POW31[len(head) + 2] + java_string_hash_u32(head) * 961) & 0xFFFFFFFF
        return base


def index_file_name(ts_ms: int) -> str:
    """UtilAll.timeMillisToHumanString: local time as yyyyMMddHHmmssSSS."""
    dt = datetime.fromtimestamp(ts_ms / 1000.0)
    return dt.strftime("%Y%m%d%H%M%S") + f"{ts_ms % 1000:03d}"


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


class IndexFileError(Exception):
    """An index file on disk cannot be used with the configured geometry."""


class IndexFile:
    """One mmap'd index file. Not thread-safe by itself: IndexService serialises writers and
    keeps readers off a file being destroyed."""

    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError(f"bad index geometry: hashSlotNum={hash_slot_num} indexNum={index_num}")
        self.path = path
        self.file_name = os.path.basename(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._items_pos = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        existed = os.path.exists(path)
        if existed:
            actual = os.path.getsize(path)
            if actual != self.file_size:
                raise IndexFileError(
                    f"index file {path} has {actual} bytes, expected {self.file_size} for "
                    f"maxHashSlotNum={hash_slot_num} maxIndexNum={index_num}"
                )
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not existed:
                os.ftruncate(fd, self.file_size)  # sparse: untouched slots/items read as zero
            self._mm = mmap.mmap(fd, self.file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        # Kept open for fdatasync: CPython's mmap.flush (msync) holds the GIL for the whole
        # disk wait, fdatasync releases it and writes back the shared mapping's pages too.
        self._fd = fd
        self._closed = False
        if existed:
            self._load_header()
        else:
            self.begin_timestamp = 0
            self.end_timestamp = 0
            self.begin_phy_offset = 0
            self.end_phy_offset = 0
            self.hash_slot_count = 0
            self.index_count = 1
            # A rolled file starts where the previous one ended, so time/offset range checks
            # work before its first key lands (IndexFile's constructor does the same).
            if end_phy_offset > 0:
                self.begin_phy_offset = end_phy_offset
                self.end_phy_offset = end_phy_offset
            if end_timestamp > 0:
                self.begin_timestamp = end_timestamp
                self.end_timestamp = end_timestamp
            self._write_header()
        self._flush_lock = threading.Lock()

    # ---- header --------------------------------------------------------------------------
    def _load_header(self) -> None:
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        ) = _HEADER.unpack_from(self._mm, 0)
        if self.index_count < 1:  # a header never flushed before a crash
            self.index_count = 1
        # A torn or foreign header must not send lookups past the file's items (fuzz finding:
        # struct.error reading item 33554432 of 8): no more items than the file holds.
        if self.index_count > self.index_num:
            self.index_count = self.index_num
        if not 0 <= self.hash_slot_count <= self.hash_slot_num:
            self.hash_slot_count = min(max(self.hash_slot_count, 0), self.hash_slot_num)

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self._mm,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    # ---- write ---------------------------------------------------------------------------
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Append one item and make it the head of its slot's chain; False when the file is full."""
        return self.put_hashes((index_key_hash(key),), phy_offset, store_timestamp) == 1

    def put_hashes(self, key_hashes: Sequence[int], phy_offset: int, store_timestamp: int,
                   write_header: bool = True) -> int:
        """Append one item per key hash of one record, in order; returns how many fit (see the
        module-level put_hashes, which is compiled where the accelerator was built)."""
        return put_hashes(self, key_hashes, phy_offset, store_timestamp, write_header)

    def write_header(self) -> None:
        """The header put_hashes writes, from the current counters (after put_hashes(write_header=False))."""
        _header_pack_into(self._mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)

    # ---- read ----------------------------------------------------------------------------
    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether [begin, end] overlaps this file's [beginTimestamp, endTimestamp]."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select_phy_offset(
        self, key: str, max_num: int, begin: int, end: int, out: list[int] | None = None
    ) -> list[int]:
        """Walk the key's chain newest first, collecting offsets of items stored in [begin, end].

        Appends to `out` (shared across files by IndexService) and stops once it holds max_num.
        """
        result = out if out is not None else []
        if self._closed:
            return result
        key_hash = index_key_hash(key)
        abs_slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        mm = self._mm
        index_count = self.index_count
        (slot_value,) = _SLOT.unpack_from(mm, abs_slot_pos)
        # items are written at index_count before it grows: index_count itself was never written
        # (and, in a full file, lies past the end)
        if slot_value <= INVALID_INDEX or slot_value >= index_count or index_count <= 1:
            return result
        next_index = slot_value
        steps = 0
        while len(result) < max_num:
            key_hash_read, phy_offset, time_diff, prev_index = _ITEM.unpack_from(
                mm, self._items_pos + next_index * INDEX_SIZE
            )
            if time_diff < 0:
                break
            time_read = self.begin_timestamp + time_diff * 1000
            if key_hash_read == key_hash and begin <= time_read <= end:
                result.append(phy_offset)
            steps += 1
            if (
                prev_index <= INVALID_INDEX
                or prev_index >= index_count
                or prev_index == next_index
                or time_read < begin
                or steps >= index_count  # a corrupt chain must not loop forever
            ):
                break
            next_index = prev_index
        return result

    # ---- lifecycle -----------------------------------------------------------------------
    def flush(self) -> None:
        """Make the file durable; blocking, so callers run it off the event loop."""
        with self._flush_lock:
            if self._closed:
                return
            self._write_header()
            os.fdatasync(self._fd)

    def close(self) -> None:
        with self._flush_lock:
            if self._closed:
                return
            self._closed = True
            self._mm.close()
            os.close(self._fd)

    def shutdown(self) -> None:
        try:
            self.flush()
        except (OSError, ValueError):
            log.exception("flush of index file %s failed at shutdown", self.path)
        self.close()

    def destroy(self) -> bool:
        """Unmap and delete the file."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            log.exception("cannot delete index file %s", self.path)
            return False
        return True

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.file_name}, count={self.index_count}/{self.index_num}, "
            f"phy=[{self.begin_phy_offset},{self.end_phy_offset}], "
            f"ts=[{self.begin_timestamp},{self.end_timestamp}])"
        )


# Compiled twin: _speedups_index.put_hashes (same file bytes).
def put_hashes(f: IndexFile, key_hashes: Sequence[int], phy_offset: int, store_timestamp: int,
               write_header: bool = True) -> int:
    """Append one item per key hash of one record, in order; returns how many fit.

    Each item is written before its slot, and the header once, after the last item, so the
    header never counts an item that is not in the file: a crash in between leaves the
    record's items at and past the header's indexCount, just as a crash inside a one-key
    put always could (and abnormal recovery rebuilds such a file from the CommitLog).
    ``write_header=False`` leaves the header to a later write_header() (after the last
    record of a run): the same bytes once it is written, one pack per run instead of per record.
    """
    index_count = f.index_count
    room = f.index_num - index_count
    if room <= 0 or not key_hashes:
        return 0
    if room < len(key_hashes):
        key_hashes = key_hashes[:room]
    begin_timestamp = f.begin_timestamp
    if index_count <= 1:
        # The first item defines beginTimestamp, so its own diff is 0, and so are those of
        # the record's other keys. (Upstream measures the first item against the previous
        # file's end time and then moves beginTimestamp, which puts the first item of a
        # rolled file a little later in time than it was stored.)
        time_diff = 0
        f.begin_phy_offset = phy_offset
        f.begin_timestamp = begin_timestamp = store_timestamp
    elif begin_timestamp <= 0:
        time_diff = 0
    else:
        # Java's truncating (diff / 1000), clamped to [0, Integer.MAX_VALUE]: below 1 s
        # (negative included) it is 0, and for positive diffs truncation is floor.
        diff_ms = store_timestamp - begin_timestamp
        if diff_ms < 1000:
            time_diff = 0
        else:
            time_diff = diff_ms // 1000
            if time_diff > _INT_MAX:
                time_diff = _INT_MAX
    mm = f._mm
    slot_num = f.hash_slot_num
    item_pos = f._items_pos + index_count * INDEX_SIZE
    new_slots = 0
    for key_hash in key_hashes:
        abs_slot_pos = INDEX_HEADER_SIZE + (key_hash % slot_num) * HASH_SLOT_SIZE
        (slot_value,) = _slot_unpack_from(mm, abs_slot_pos)
        if slot_value <= INVALID_INDEX or slot_value > index_count:
            slot_value = INVALID_INDEX
            new_slots += 1
        _item_pack_into(mm, item_pos, key_hash, phy_offset, time_diff, slot_value)
        _slot_pack_into(mm, abs_slot_pos, index_count)
        index_count += 1
        item_pos += INDEX_SIZE
    if new_slots:
        f.hash_slot_count += new_slots
    f.index_count = index_count
    f.end_phy_offset = phy_offset
    f.end_timestamp = store_timestamp
    if write_header:
        _header_pack_into(
            mm,
            0,
            begin_timestamp,
            store_timestamp,
            f.begin_phy_offset,
            phy_offset,
            f.hash_slot_count,
            index_count,
        )
    return len(key_hashes)


_py_put_hashes = put_hashes


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_fast = speedups.load("orbitmq.broker.store._speedups_index")  # None: the code above runs
if _fast is not None:
    put_hashes = _fast.put_hashes
