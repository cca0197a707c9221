"""ConsumeQueue: the per topic/queue index of 20-byte entries into the CommitLog.

Entry i (logical offset i) sits at byte i*20: CommitLog offset (long), record size (int), tag
hash code (long). A queue whose first segment starts past offset 0 (its earlier files were
deleted, or it was rebuilt mid-way) has its leading slots filled with blank entries
(offset 0, size Integer.MAX_VALUE, tags 0) exactly as RocketMQ's fillPreBlank writes them;
readers skip those.

With enableConsumeQueueExt each queue has a ConsumeQueueExt (consume_queue_ext.py) and the
tag code slot of an entry holds the address of the entry's extension unit (a negative long at
most MAX_ADDR) that carries the real tag code, the store time and the SQL92 filter bit map.
Readers resolve it through ``resolve_tags_code`` / ``get_entry``; with the extension off
(the default) nothing here differs from RocketMQ's 20-byte entries.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable

from orbitmq.broker.store.consume_queue_ext import MAX_ADDR, ConsumeQueueExt, CqExtUnit
from orbitmq.broker.store.mapped_file import MappedFile
from orbitmq.broker.store.mapped_file_queue import MappedFileQueue
from orbitmq.common import speedups

log = logging.getLogger(__name__)

CQ_STORE_UNIT_SIZE = 20
CQ_ENTRY = struct.Struct(">qiq")
BLANK_ENTRY_SIZE = 0x7FFFFFFF
_BLANK_ENTRY = CQ_ENTRY.pack(0, BLANK_ENTRY_SIZE, 0)


def is_blank_entry(offset: int, size: int) -> bool:
    return size == BLANK_ENTRY_SIZE and offset == 0


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int,
                 ext: ConsumeQueueExt | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.store_path = os.path.join(root_dir, topic, str(queue_id))
        self.mapped_file_size = mapped_file_size
        self.mapped_file_queue = MappedFileQueue(self.store_path, mapped_file_size)
        # End (offset + size) of the CommitLog record behind the last entry; -1 when empty.
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        # Called as on_gap(cq) when a record arrives with a queue offset past the queue's end
        # while the queue has entries: True when the owner re-dispatches the CommitLog from the
        # queue's last entry (the records of the missing entries come again, in order), False to
        # fill the gap with blanks as RocketMQ does. None: blanks.
        self.on_gap: Callable[[ConsumeQueue], bool] | None = None
        # (CommitLog offset, queue end) of the record whose gap asked for a re-dispatch: met
        # again at the same queue end, the re-dispatch found nothing to fill it with.
        self._gap_pending: tuple[int, int] | None = None
        # ConsumeQueue#consumeQueueExt: present only with enableConsumeQueueExt.
        self.ext = ext

    # --- load / recover ------------------------------------------------------------------
    def load(self) -> None:
        self.mapped_file_queue.load()
        if self.ext is not None:
            self.ext.load()

    def recover(self) -> None:
        """Find the end of the valid entries (scanning the last three segments) and cut there."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        index = max(0, len(files) - 3)
        mf = files[index]
        process_offset = mf.file_from_offset
        mapped_file_offset = 0
        size = self.mapped_file_size
        max_ext_addr = 1
        while True:
            mapped_file_offset = 0
            for offset, msg_size, tags in CQ_ENTRY.iter_unpack(mf.mm[0:size]):
                if offset >= 0 and msg_size > 0:
                    mapped_file_offset += CQ_STORE_UNIT_SIZE
                    if not is_blank_entry(offset, msg_size):
                        self.max_physic_offset = offset + msg_size
                    if tags <= MAX_ADDR:
                        max_ext_addr = tags
                else:
                    break
            if mapped_file_offset == size:
                index += 1
                if index >= len(files):
                    process_offset = mf.file_from_offset + size
                    break
                mf = files[index]
                process_offset = mf.file_from_offset
            else:
                process_offset = mf.file_from_offset + mapped_file_offset
                break
        self.mapped_file_queue.flushed_where = process_offset
        self.mapped_file_queue.committed_where = process_offset
        self.mapped_file_queue.truncate_dirty_files(process_offset)
        if self.ext is not None:
            # ConsumeQueue#recover: the units after the last entry's are dropped
            self.ext.recover()
            self.ext.truncate_by_max_address(max_ext_addr)

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop entries whose record does not end within the CommitLog's [.., phy_offset)."""
        if 0 <= self.max_physic_offset <= phy_offset:
            return  # entries are in CommitLog order: the last one ends in time, all do
        self._truncate_dirty_entries(phy_offset)
        if self.ext is not None:
            self.ext.truncate_by_max_address(self._last_ext_addr())

    def _truncate_dirty_entries(self, phy_offset: int) -> None:
        mfq = self.mapped_file_queue
        while True:
            mf = mfq.get_last_mapped_file()
            if mf is None:
                self.max_physic_offset = -1
                return
            cut = None
            last_end = -1
            for i in range(0, mf.wrote_position, CQ_STORE_UNIT_SIZE):
                offset, size, _tags = CQ_ENTRY.unpack_from(mf.mm, i)
                if is_blank_entry(offset, size):
                    continue
                if offset < 0 or size <= 0 or offset + size > phy_offset:
                    cut = i
                    break
                last_end = offset + size
            if cut == 0 and mf is not mfq.get_first_mapped_file():
                mfq.delete_last_mapped_file()
                continue
            if cut is not None:
                mfq.truncate_dirty_files(mf.file_from_offset + cut)
                if cut == 0:
                    last_end = -1
            if last_end < 0:
                last_end = self._last_entry_end()
            self.max_physic_offset = last_end
            return

    def _last_ext_addr(self) -> int:
        """The extension address of the last entry that has one (1: none)."""
        for mf in reversed(self.mapped_file_queue.mapped_files):
            for i in range(mf.wrote_position - CQ_STORE_UNIT_SIZE, -1, -CQ_STORE_UNIT_SIZE):
                offset, size, tags = CQ_ENTRY.unpack_from(mf.mm, i)
                if tags <= MAX_ADDR and not is_blank_entry(offset, size):
                    return tags
        return 1

    def _last_entry_end(self) -> int:
        for mf in reversed(self.mapped_file_queue.mapped_files):
            for i in range(mf.wrote_position - CQ_STORE_UNIT_SIZE, -1, -CQ_STORE_UNIT_SIZE):
                offset, size, _tags = CQ_ENTRY.unpack_from(mf.mm, i)
                if not is_blank_entry(offset, size):
                    return offset + size
        return -1

    # --- write ---------------------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write entry ``cq_offset``; a record already indexed (re-dispatch) is ignored (the
        module-level put_message_position_info, compiled where the accelerator was built)."""
        return put_message_position_info(self, offset, size, tags_code, cq_offset)

    def put_message_position_info_wrapper(self, offset: int, size: int, tags_code: int, cq_offset: int,
                                          store_timestamp: int, bit_map: bytes | None) -> bool:
        """ConsumeQueue#putMessagePositionInfoWrapper with the extension: the unit (tag code,
        store time, filter bit map) is written first and its address goes into the entry; a
        unit that cannot be written leaves the tag code there. A record already indexed writes
        no unit, and a unit whose entry was not written is taken back."""
        ext = self.ext
        if ext is None or offset + size <= self.max_physic_offset:
            return put_message_position_info(self, offset, size, tags_code, cq_offset)
        address = ext.put(CqExtUnit(tags_code, store_timestamp, bit_map))
        if address > MAX_ADDR:
            log.warning("Save consume queue extend fail, So just save tagsCode! topic:%s, queueId:%d, offset:%d",
                        self.topic, self.queue_id, offset)
            return put_message_position_info(self, offset, size, tags_code, cq_offset)
        before = self.max_physic_offset
        ok = put_message_position_info(self, offset, size, address, cq_offset)
        if not ok or self.max_physic_offset == before:
            ext.rollback(address)
        return ok

    def get_ext(self, address: int) -> CqExtUnit | None:
        """ConsumeQueue#getExt: the extension unit at ``address`` (None: no extension, not there)."""
        return self.ext.get(address) if self.ext is not None else None

    def resolve_tags_code(self, tags_code: int) -> tuple[int | None, CqExtUnit | None]:
        """The tag code and extension unit behind an entry's tag slot (CqUnit after
        ConsumeQueue's iterator): an address resolves to its unit's tag code, or to None (no
        valid tag code, CqUnit#getValidTagsCodeAsLong) when the unit cannot be read."""
        if tags_code > MAX_ADDR:
            return tags_code, None
        unit = self.get_ext(tags_code)
        if unit is None:
            return None, None
        return unit.tags_code, unit

    def _append(self, entry: bytes) -> MappedFile:
        mf = self.mapped_file_queue.get_last_mapped_file_or_create(0)
        mf.append(entry)
        return mf

    def _fill_pre_blank(self, mf: MappedFile, until_where: int) -> None:
        until = until_where % self.mapped_file_size
        if until:
            mf.mm[0:until] = _BLANK_ENTRY * (until // CQ_STORE_UNIT_SIZE)
        mf.set_positions(until)

    # --- read ----------------------------------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def get_message_total_in_queue(self) -> int:
        return self.get_max_offset_in_queue() - self.get_min_offset_in_queue()

    def get_entry(self, index: int) -> tuple[int, int, int] | None:
        """(commitlog offset, size, tags code) of entry ``index``, None when absent; an extension
        address is resolved to its unit's tag code (left as it is when the unit is missing)."""
        entry = self.get_raw_entry(index)
        if entry is not None and entry[2] <= MAX_ADDR and self.ext is not None:
            unit = self.ext.get(entry[2])
            if unit is not None:
                return entry[0], entry[1], unit.tags_code
        return entry

    def get_raw_entry(self, index: int) -> tuple[int, int, int] | None:
        """Entry ``index`` as stored (the tag slot may hold an extension address)."""
        pos = index * CQ_STORE_UNIT_SIZE
        if index < 0 or pos < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + CQ_STORE_UNIT_SIZE > mf.wrote_position or not mf.available:
            return None
        return CQ_ENTRY.unpack_from(mf.mm, rel)

    def get_index_buffer(self, start_index: int, max_entries: int) -> bytes | None:
        """Entries from ``start_index`` to the end of the written part of its segment."""
        pos = start_index * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        end = min(mf.wrote_position, rel + max_entries * CQ_STORE_UNIT_SIZE)
        if rel >= end:
            return None
        return mf.read(rel, end - rel)

    def roll_next_file(self, index: int) -> int:
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    def get_offset_in_queue_by_time(self, timestamp: int, store_time_of: Callable[[int, int], int]) -> int:
        """First offset whose message was stored at or after ``timestamp``; max offset if none.

        ``store_time_of(phy_offset, size)`` reads a record's store timestamp from the CommitLog
        (-1 when it is gone); entries whose record is gone count as older than any timestamp.
        """
        lo = self.get_min_offset_in_queue()
        hi = self.get_max_offset_in_queue()
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.get_entry(mid)
            ts = -1
            if entry is not None and not is_blank_entry(entry[0], entry[1]):
                ts = store_time_of(entry[0], entry[1])
            if ts < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # --- maintenance ---------------------------------------------------------------------
    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Move the queue's min offset to the first entry whose record still exists."""
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return
        start = max(0, self.min_logic_offset - mf.file_from_offset)
        for i in range(start, mf.wrote_position, CQ_STORE_UNIT_SIZE):
            offset, size, tags = CQ_ENTRY.unpack_from(mf.mm, i)
            if is_blank_entry(offset, size):
                continue
            if offset >= phy_min_offset:
                self.min_logic_offset = mf.file_from_offset + i
                if self.ext is not None and tags <= MAX_ADDR:
                    # ConsumeQueue#correctMinOffset: the units before the first entry's go
                    self.ext.truncate_by_min_address(tags)
                return
        if mf is self.mapped_file_queue.get_last_mapped_file() or mf.wrote_position >= self.mapped_file_size:
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + mf.wrote_position)

    def delete_expired_file(self, min_commit_log_offset: int) -> int:
        """Retention: drop segments wholly below the CommitLog's min offset; fix the min offset."""
        count = self.mapped_file_queue.delete_expired_files_by_offset(min_commit_log_offset, CQ_STORE_UNIT_SIZE)
        self.correct_min_offset(min_commit_log_offset)
        return count

    def flush(self, least_pages: int) -> bool:
        result = self.mapped_file_queue.flush(least_pages)
        if self.ext is not None:
            result = self.ext.flush(least_pages) and result
        return result

    def flush_all(self) -> None:
        """Flush every entry (and extension unit) written so far."""
        mfq = self.mapped_file_queue
        mfq.flush_until(mfq.get_max_offset())
        if self.ext is not None:
            self.ext.flush_all()

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown(0)
        if self.ext is not None:
            self.ext.shutdown()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mapped_file_queue.destroy()
        if self.ext is not None:
            self.ext.destroy()


# Compiled twin: _speedups_dispatch.put_message_position_info (same queue bytes).
def put_message_position_info(cq: ConsumeQueue, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
    """ConsumeQueue.put_message_position_info: write entry ``cq_offset``; a record already
    indexed (re-dispatch) is ignored."""
    if offset + size <= cq.max_physic_offset:
        return True
    mfq = cq.mapped_file_queue
    files = mfq.mapped_files
    if files:
        # The common case: the entry goes right after the last one, inside the open segment
        # (not at its start, where the first-segment blank fill may apply).
        mf = files[-1]
        pos = mf.wrote_position
        if 0 < pos <= cq.mapped_file_size - CQ_STORE_UNIT_SIZE and \
                mf.file_from_offset + pos == cq_offset * CQ_STORE_UNIT_SIZE:
            mf.append(CQ_ENTRY.pack(offset, size, tags_code))
            cq.max_physic_offset = offset + size
            return True
    expect = cq_offset * CQ_STORE_UNIT_SIZE
    mf = mfq.get_last_mapped_file_or_create(expect)
    if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
        # The queue's first segment starts mid-way: earlier slots are blank.
        cq.min_logic_offset = expect
        mfq.flushed_where = mfq.committed_where = expect
        cq._fill_pre_blank(mf, expect)
    current = mf.file_from_offset + mf.wrote_position
    if expect < current:
        log.warning("build consume queue repeatedly: %s-%d expect %d current %d", cq.topic,
                    cq.queue_id, expect, current)
        return True
    if current < expect and _redispatch_gap(cq, offset, current, expect):
        return False
    while current < expect:
        log.error("[BUG] logic queue order maybe wrong: %s-%d expect %d current %d; filling blanks",
                  cq.topic, cq.queue_id, expect, current)
        mf = cq._append(_BLANK_ENTRY)
        current = mf.file_from_offset + mf.wrote_position
    if mf.is_full():  # only after blanks filled the segment: the entry starts the next one
        mf = mfq.get_last_mapped_file_or_create(0)
    mf.append(CQ_ENTRY.pack(offset, size, tags_code))
    cq.max_physic_offset = offset + size
    return True


def _redispatch_gap(cq: ConsumeQueue, offset: int, current: int, expect: int) -> bool:
    """A record at CommitLog ``offset`` wants queue slot ``expect`` but the queue ends at
    ``current``: the records owning the slots between were not dispatched (yet). True when the
    owner re-dispatches them from the CommitLog (nothing is written now); False when the gap is
    to be filled with blanks: no owner, or a re-dispatch already came back to this same gap."""
    on_gap = cq.on_gap
    if on_gap is None:
        return False
    pending = cq._gap_pending
    if pending == (offset, current):
        cq._gap_pending = None
        log.error("%s-%d: no record in the CommitLog owns queue offsets %d..%d (before the record at %d)",
                  cq.topic, cq.queue_id, current // CQ_STORE_UNIT_SIZE, expect // CQ_STORE_UNIT_SIZE - 1, offset)
        return False
    if pending is None or pending[1] != current:
        cq._gap_pending = (offset, current)
        log.warning("%s-%d: the record at CommitLog offset %d has queue offset %d but the queue ends at %d; "
                    "re-dispatching from the CommitLog", cq.topic, cq.queue_id, offset,
                    expect // CQ_STORE_UNIT_SIZE, current // CQ_STORE_UNIT_SIZE)
    if on_gap(cq):
        return True
    cq._gap_pending = None
    return False


_py_put_message_position_info = put_message_position_info


_fast = speedups.load("orbitmq.broker.store._speedups_dispatch")  # None: the code above runs
if _fast is not None:
    put_message_position_info = _fast.put_message_position_info
