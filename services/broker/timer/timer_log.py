"""TimerLog: the ``timerlog/`` MappedFileQueue of 52-byte units, one per enqueued timer message.

Unit (big-endian): size=52 (4), prevPos (8, the slot's previous unit, -1 ends the chain), magic
(4), currWriteTimeMs (8), delayedTime - currWriteTime (4), offsetPy (8), sizePy (4), REAL_TOPIC
String.hashCode (4), reserved 0 (8). A unit that would leave fewer than 16 bytes in its file is
preceded by a blank (int remaining, long 0, int BLANK_MAGIC_CODE) and goes to the next file.
Appends are memory writes into the map; ``flush`` (fdatasync) runs on a worker thread.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

from orbitmq.broker.store.mapped_file_queue import MappedFileQueue

from .wheel_math import is_magic_ok

log = logging.getLogger(__name__)

UNIT_SIZE = 52
BLANK_MAGIC_CODE = 0xCBD43194  # 0xBBCCDDEE ^ (1880681586 + 8)
MIN_BLANK_LEN = 16
_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqI")


@dataclass(slots=True)
class TimerUnit:
    pos: int
    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delay_ms: int
    offset_py: int
    size_py: int
    topic_hash: int

    @property
    def delayed_time_ms(self) -> int:
        """The slot time this unit was filed under."""
        return self.curr_write_time_ms + self.delay_ms


def encode_unit(prev_pos: int, magic: int, curr_write_time_ms: int, delay_ms: int, offset_py: int,
                size_py: int, topic_hash: int) -> bytes:
    return _UNIT.pack(UNIT_SIZE, prev_pos, magic, curr_write_time_ms, delay_ms, offset_py, size_py, topic_hash, 0)


def decode_unit(data: bytes | memoryview, pos: int) -> TimerUnit | None:
    """The unit in ``data`` (starting at its first byte), None when it is not a valid unit."""
    if len(data) < UNIT_SIZE:
        return None
    size, prev, magic, write_ms, delay, offset_py, size_py, topic_hash, _ = _UNIT.unpack_from(data, 0)
    if size != UNIT_SIZE or not is_magic_ok(magic) or magic == 0 or size_py <= 0 or offset_py < 0:
        return None
    return TimerUnit(pos, prev, magic, write_ms, delay, offset_py, size_py, topic_hash)


class TimerLog:
    def __init__(self, store_path: str, file_size: int) -> None:
        if file_size < UNIT_SIZE + MIN_BLANK_LEN:
            raise ValueError(f"config key mappedFileSizeTimerLog: {file_size} is smaller than one unit plus a blank")
        self.file_size = file_size
        self.queue = MappedFileQueue(store_path, file_size)

    def load(self) -> None:
        self.queue.load()

    def append(self, unit: bytes) -> int:
        """Append one unit; its position in the log. Raises OSError when no file can be made."""
        mfq = self.queue
        mf = mfq.get_last_mapped_file_or_create(0)
        remaining = self.file_size - mf.wrote_position
        if len(unit) + MIN_BLANK_LEN > remaining:
            mf.append(_BLANK.pack(remaining, 0, BLANK_MAGIC_CODE) + bytes(remaining - _BLANK.size))
            mf = mfq.get_last_mapped_file_or_create(0)
        pos = mf.file_from_offset + mf.wrote_position
        if not mf.append(unit):
            raise OSError(f"timerlog: cannot append at {pos}")
        return pos

    def read_unit(self, pos: int) -> TimerUnit | None:
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        data = mf.read(pos - mf.file_from_offset, UNIT_SIZE)
        return decode_unit(data, pos) if data is not None else None

    def max_offset(self) -> int:
        return self.queue.get_max_offset()

    def min_offset(self) -> int:
        return max(self.queue.get_min_offset(), 0)

    def scan(self, start: int) -> tuple[list[TimerUnit], int]:
        """Every valid unit from ``start`` to the first blank-free invalid spot; (units, end).

        Used by recovery: the files are mapped whole, so everything written before a crash is
        there; the scan stops where the zeros (never written) begin.
        """
        units: list[TimerUnit] = []
        files = self.queue.mapped_files
        pos = start
        for mf in files:
            if mf.file_from_offset + self.file_size <= pos:
                continue
            rel = max(pos - mf.file_from_offset, 0)
            mm = mf.mm
            while rel + 4 <= self.file_size:
                (size,) = struct.unpack_from(">i", mm, rel)
                if rel + _BLANK.size <= self.file_size:
                    _, _, magic = _BLANK.unpack_from(mm, rel)
                    if magic == BLANK_MAGIC_CODE and size == self.file_size - rel:
                        rel = self.file_size
                        break
                if size != UNIT_SIZE or rel + UNIT_SIZE > self.file_size:
                    return units, mf.file_from_offset + rel
                unit = decode_unit(mm[rel:rel + UNIT_SIZE], mf.file_from_offset + rel)
                if unit is None:
                    return units, mf.file_from_offset + rel
                units.append(unit)
                rel += UNIT_SIZE
            pos = mf.file_from_offset + rel
        return units, pos

    def set_end(self, end: int) -> None:
        """Make ``end`` the write position: zero what follows, drop later files (recovery)."""
        for mf in self.queue.mapped_files:
            if mf.file_from_offset <= end < mf.file_from_offset + self.file_size:
                mf.set_positions(end - mf.file_from_offset)
            elif mf.file_from_offset + self.file_size <= end:
                mf.set_positions(self.file_size)
        self.queue.truncate_dirty_files(end)

    def flush(self) -> None:
        """fdatasync what was appended (worker thread)."""
        self.queue.flush_until(self.queue.get_max_offset())

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Drop files whose last unit points below the CommitLog's first record (every 30 s upstream)."""
        files = self.queue.mapped_files[:-1]
        dropped = []
        for mf in files:
            last = (mf.wrote_position // UNIT_SIZE) * UNIT_SIZE
            unit = None
            while last >= UNIT_SIZE and unit is None:
                last -= UNIT_SIZE
                data = mf.read(last, UNIT_SIZE)
                unit = decode_unit(data, mf.file_from_offset + last) if data is not None else None
            if unit is None or unit.offset_py >= min_commit_log_offset:
                break
            if not mf.destroy(1000 * 60):
                break
            dropped.append(mf)
        if dropped:
            self.queue._remove(dropped)
        return len(dropped)

    def shutdown(self) -> None:
        self.flush()
        self.queue.shutdown(1000)
