"""ConsumeQueueExt: the extension of a ConsumeQueue (enableConsumeQueueExt), RocketMQ's layout.

Each unit is ``size`` (short, the unit's length), ``tagsCode`` (long), ``msgStoreTime`` (long),
``bitMapSize`` (short) and ``bitMapSize`` bytes of filter bit map (ConsumeQueueExt.CqExtUnit),
big-endian, appended to segments of mappedFileSizeConsumeQueueExt bytes (48 MiB) under
``<storePathRootDir>/consumequeue_ext/<topic>/<queueId>/`` named by 20-digit start offset.
A unit that does not fit the room left in a segment (less the 4-byte END_BLANK_DATA_LENGTH)
closes the segment with a short -1 and goes to the next one.

The ConsumeQueue entry of a message with a unit holds the unit's *address* in place of its tag
hash code: ``offset + Long.MIN_VALUE`` (ConsumeQueueExt#decorate), so every address is at most
MAX_ADDR = Integer.MIN_VALUE - 1 and a real tag hash code (an int widened to a long, or a
delivery timestamp) never is. Like upstream the extension is "weakly reliable": a unit that
cannot be written leaves the plain tag code in the entry, and a unit that cannot be read makes
the entry match (the CommitLog check decides).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass

from orbitmq.broker.store.mapped_file import MappedFile
from orbitmq.broker.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

END_BLANK_DATA_LENGTH = 4
LONG_MIN = -(1 << 63)
#: ConsumeQueueExt.MAX_ADDR: an address is <= this; anything above is a plain tag code.
MAX_ADDR = -(1 << 31) - 1
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN
#: CqExtUnit.MIN_EXT_UNIT_SIZE: size (2) + tagsCode (8) + msgStoreTime (8) + bitMapSize (2).
MIN_EXT_UNIT_SIZE = 2 + 8 * 2 + 2
#: CqExtUnit.MAX_EXT_UNIT_SIZE (Short.MAX_VALUE).
MAX_EXT_UNIT_SIZE = 0x7FFF
_HEAD = struct.Struct(">hqqh")
_SHORT = struct.Struct(">h")
_END = _SHORT.pack(-1)


def is_ext_addr(address: int) -> bool:
    """ConsumeQueueExt#isExtAddr."""
    return address <= MAX_ADDR


def decorate(offset: int) -> int:
    """ConsumeQueueExt#decorate: a file offset (>= 0) as the address stored in a ConsumeQueue."""
    return offset + LONG_MIN if not is_ext_addr(offset) else offset


def undecorate(address: int) -> int:
    """ConsumeQueueExt#unDecorate: the file offset of an address."""
    return address - LONG_MIN if is_ext_addr(address) else address


@dataclass(slots=True)
class CqExtUnit:
    tags_code: int = 0
    msg_store_time: int = 0
    filter_bit_map: bytes | None = None

    @property
    def size(self) -> int:
        """CqExtUnit#calcUnitSize."""
        return MIN_EXT_UNIT_SIZE + (len(self.filter_bit_map) if self.filter_bit_map else 0)

    def encode(self) -> bytes:
        """CqExtUnit#write: size, tagsCode, msgStoreTime, bitMapSize, bit map."""
        bits = self.filter_bit_map or b""
        return _HEAD.pack(MIN_EXT_UNIT_SIZE + len(bits), self.tags_code, self.msg_store_time, len(bits)) + bytes(bits)

    @classmethod
    def decode(cls, buf, pos: int = 0) -> CqExtUnit | None:
        """CqExtUnit#read at ``pos``; None where no unit is (size < 1, or cut short)."""
        if pos + 2 > len(buf):
            return None
        (size,) = _SHORT.unpack_from(buf, pos)
        if size < 1 or pos + MIN_EXT_UNIT_SIZE > len(buf):
            return None
        _size, tags_code, store_time, bit_map_size = _HEAD.unpack_from(buf, pos)
        if bit_map_size < 1:
            return cls(tags_code, store_time, None)
        start = pos + MIN_EXT_UNIT_SIZE
        if start + bit_map_size > len(buf):
            return None
        return cls(tags_code, store_time, bytes(buf[start:start + bit_map_size]))


class ConsumeQueueExt:
    def __init__(self, topic: str, queue_id: int, store_path: str, mapped_file_size: int,
                 bit_map_length: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.store_path = os.path.join(store_path, topic, str(queue_id))
        self.mapped_file_size = mapped_file_size
        self.bit_map_length = bit_map_length
        self.mapped_file_queue = MappedFileQueue(self.store_path, mapped_file_size)

    # --- load / recover ------------------------------------------------------------------
    def load(self) -> None:
        self.mapped_file_queue.load()

    def recover(self) -> None:
        """ConsumeQueueExt#recover: walk the units of every segment to the first empty one."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        process_offset = files[0].file_from_offset
        mapped_file_offset = 0
        index = 0
        mf = files[0]
        while True:
            pos = mapped_file_offset
            mm = mf.mm
            size = _SHORT.unpack_from(mm, pos)[0] if pos + 2 <= self.mapped_file_size else 0
            if size > 0:
                mapped_file_offset += size
                continue
            index += 1
            if index < len(files):
                mf = files[index]
                process_offset = mf.file_from_offset
                mapped_file_offset = 0
                continue
            break
        end = process_offset + mapped_file_offset
        mfq = self.mapped_file_queue
        mfq.flushed_where = mfq.committed_where = end
        mfq.truncate_dirty_files(end)

    # --- write / read --------------------------------------------------------------------
    def put(self, unit: CqExtUnit) -> int:
        """ConsumeQueueExt#put: append ``unit``; its address (< 0), or 1 when it was not written."""
        size = unit.size
        if size > MAX_EXT_UNIT_SIZE:
            log.error("Size of cq ext unit is greater than %d, %s", MAX_EXT_UNIT_SIZE, unit)
            return 1
        mfq = self.mapped_file_queue
        if mfq.get_max_wrote_position() + size > MAX_REAL_OFFSET:
            log.warning("Capacity of ext is maximum!%d, %d", mfq.get_max_wrote_position(), size)
            return 1
        data = unit.encode()
        try:
            for _ in range(3):
                mf = mfq.get_last_mapped_file_or_create(0)
                wrote = mf.wrote_position
                blank = self.mapped_file_size - wrote - END_BLANK_DATA_LENGTH
                if size > blank:
                    self._full_fill_to_end(mf, wrote)
                    log.info("No enough space(need:%d, has:%d) of file %s, so fill to end", size, blank, mf.file_name)
                    continue
                if mf.append(data):
                    return decorate(wrote + mf.file_from_offset)
        except OSError:
            log.exception("Save consume queue extend error, %s", unit)
        return 1

    def _full_fill_to_end(self, mf: MappedFile, wrote: int) -> None:
        """ConsumeQueueExt#fullFillToEnd: a short -1 ends the segment."""
        mf.mm[wrote:wrote + 2] = _END
        mf.set_positions(self.mapped_file_size)

    def get(self, address: int) -> CqExtUnit | None:
        """ConsumeQueueExt#get: the unit at ``address``, None when it is not there. Runs for
        every entry a pull scans with the extension on, so the segment lookup is inlined."""
        if address > MAX_ADDR:
            return None
        real = address - LONG_MIN
        files = self.mapped_file_queue.mapped_files
        if not files:
            return None
        seg = self.mapped_file_size
        idx = real // seg - files[0].file_from_offset // seg
        mf = files[idx] if 0 <= idx < len(files) else None
        if mf is None or not mf.file_from_offset <= real < mf.file_from_offset + seg:
            # not upstream's "first file for offset 0": that would read another unit
            mf = self.mapped_file_queue.find_mapped_file_by_offset(real)
            if mf is None:
                return None
        pos = real - mf.file_from_offset
        if pos + MIN_EXT_UNIT_SIZE > mf.wrote_position or not mf.available:
            return None
        try:
            size, tags_code, store_time, bit_map_size = _HEAD.unpack_from(mf.mm, pos)
            if size < 1:
                return None
            if bit_map_size < 1:
                return CqExtUnit(tags_code, store_time, None)
            start = pos + MIN_EXT_UNIT_SIZE
            bits = mf.mm[start:start + bit_map_size]
        except (ValueError, struct.error):  # unmapped meanwhile
            return None
        return CqExtUnit(tags_code, store_time, bits) if len(bits) == bit_map_size else None

    def rollback(self, address: int) -> None:
        """Undo the put that returned ``address`` when it is still the last unit (its entry was
        not written): the next unit goes where it was."""
        if not is_ext_addr(address):
            return
        real = undecorate(address)
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is not None and mf.file_from_offset <= real < mf.file_from_offset + mf.wrote_position:
            self.mapped_file_queue.truncate_dirty_files(real)

    # --- truncation ----------------------------------------------------------------------
    def truncate_by_max_address(self, max_address: int) -> None:
        """ConsumeQueueExt#truncateByMaxAddress: drop the units after the one at ``max_address``."""
        if not is_ext_addr(max_address):
            return
        unit = self.get(max_address)
        if unit is None:
            log.error("[BUG] address %d of consume queue extend not found!", max_address)
            return
        self.mapped_file_queue.truncate_dirty_files(undecorate(max_address) + unit.size)

    def truncate_by_min_address(self, min_address: int) -> None:
        """ConsumeQueueExt#truncateByMinAddress: delete the segments that end before it."""
        if not is_ext_addr(min_address):
            return
        real = undecorate(min_address)
        mfq = self.mapped_file_queue
        gone = [mf for mf in mfq.mapped_files[:-1] if mf.file_from_offset + self.mapped_file_size < real]
        if not gone:
            return
        mfq._remove(gone)
        for mf in gone:
            log.info("Destroy consume queue ext by min: file=%s, minOffset=%d", mf.file_name, real)
            mf.destroy(1000)

    # --- addresses -----------------------------------------------------------------------
    def get_max_address(self) -> int:
        mf = self.mapped_file_queue.get_last_mapped_file()
        return decorate(0) if mf is None else decorate(mf.file_from_offset + mf.wrote_position)

    def get_min_address(self) -> int:
        mf = self.mapped_file_queue.get_first_mapped_file()
        return decorate(0) if mf is None else decorate(mf.file_from_offset)

    def total_size(self) -> int:
        return self.mapped_file_queue.total_size()

    # --- maintenance ---------------------------------------------------------------------
    def check_self(self) -> bool:
        return self.mapped_file_queue.check_self()

    def flush(self, least_pages: int) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    def flush_all(self) -> None:
        mfq = self.mapped_file_queue
        mfq.flush_until(mfq.get_max_offset())

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown(0)

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()
