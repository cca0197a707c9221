"""TimerWheel: the ``timerwheel`` file, one 32-byte slot per precision interval over 14 days.

Slot layout (big-endian): time as timeMs/precision (8), firstPos (8), lastPos (8), num (4),
magic (4). The file is ``slotsTotal * 2 * 32`` bytes and mapped whole, so slot reads and writes
are memory operations (the store's pattern for the CommitLog); ``flush`` (msync) belongs on a
worker thread. A slot holding another time than the one asked for reads as empty, which is how
the wheel wraps around without ever being cleared.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from .wheel_math import SLOTS_TOTAL, slot_index

SLOT_SIZE = 32
WHEEL_LENGTH = SLOTS_TOTAL * 2 * SLOT_SIZE  # 38,707,200 bytes
_SLOT = struct.Struct(">qqqii")
_NUM_OFFSET = 24  # num's four bytes within a slot
_NONZERO = re.compile(rb"[^\x00]")


@dataclass(slots=True)
class Slot:
    """One slot; ``time_ms`` is the slot's time in ms (stored on disk divided by precision)."""

    time_ms: int = -1
    first_pos: int = -1
    last_pos: int = -1
    num: int = 0
    magic: int = 0

    @property
    def empty(self) -> bool:
        return self.time_ms < 0 or self.first_pos < 0


class TimerWheel:
    def __init__(self, path: str, precision_ms: int) -> None:
        self.path = path
        self.precision_ms = precision_ms
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, WHEEL_LENGTH):
                raise RuntimeError(f"{path}: timer wheel length {size} is not {WHEEL_LENGTH}; "
                                   "the file belongs to another wheel layout")
            if size == 0:
                os.ftruncate(fd, WHEEL_LENGTH)
            self._mm = mmap.mmap(fd, WHEEL_LENGTH)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _pos(self, time_ms: int) -> int:
        return slot_index(time_ms, self.precision_ms) * SLOT_SIZE

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms``; empty (-1, -1, -1) when it holds another time."""
        stored, first, last, num, magic = _SLOT.unpack_from(self._mm, self._pos(time_ms))
        if stored != time_ms // self.precision_ms:
            return Slot()
        return Slot(stored * self.precision_ms, first, last, num, magic)

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int = 0) -> None:
        _SLOT.pack_into(self._mm, self._pos(time_ms), time_ms // self.precision_ms, first_pos, last_pos, num, magic)

    def revise_last(self, time_ms: int, last_pos: int, delta_num: int) -> None:
        """Point the slot's tail at ``last_pos`` (recovery re-linking a unit written after the flush)."""
        slot = self.get_slot(time_ms)
        if slot.empty:
            self.put_slot(time_ms, last_pos, last_pos, delta_num)
        elif slot.last_pos < last_pos:
            self.put_slot(time_ms, slot.first_pos, last_pos, slot.num + delta_num, slot.magic)

    def get_num(self, time_ms: int) -> int:
        slot = self.get_slot(time_ms)
        return 0 if slot.empty else slot.num

    def counted_slots(self) -> Iterator[tuple[int, int]]:
        """(time in precision units as stored, num) of every slot whose num is not 0.

        Rule: the metrics' wheel-wide sums (TimerWheel.getAllNum, the message snapshot) only need
        the slots holding messages. Trick: the 1.2 M slots are not unpacked one by one; the four
        bytes of every slot's num are cut out with strided slices and OR-ed as big integers, so
        a regex over the result finds the non-empty slots at C speed (a few ms per wheel).
        """
        mm = self._mm
        count = len(mm) // SLOT_SIZE
        acc = 0
        for offset in range(_NUM_OFFSET, _NUM_OFFSET + 4):
            acc |= int.from_bytes(mm[offset::SLOT_SIZE], "big")
        flags = acc.to_bytes(count, "big")
        unpack = _SLOT.unpack_from
        for found in _NONZERO.finditer(flags):
            stored, _first, _last, num, _magic = unpack(mm, found.start() * SLOT_SIZE)
            yield stored, num

    def figures(self, read_time_ms: int, now_ms: int, bounds_s: tuple[int, ...]) -> tuple[int, list[int]]:
        """One scan for the metrics: (TimerWheel.getAllNum from ``read_time_ms``: messages in every
        slot of the wheel's span, slots of an earlier lap reading as empty; per bound, messages due
        from the previous bound (0 for the first) up to ``bounds_s[i]`` seconds after ``now_ms``,
        upstream's rocketmq_timer_message_snapshot{timer_bound_s}). Blocking: run off the loop."""
        start = read_time_ms // self.precision_ms
        end = start + len(self._mm) // SLOT_SIZE
        now = now_ms // self.precision_ms
        edges = [0, *(bound * 1000 // self.precision_ms for bound in bounds_s)]
        pending = 0
        counts = [0] * len(bounds_s)
        for stored, num in self.counted_slots():
            if start <= stored < end:
                pending += num
            ahead = stored - now
            if 0 <= ahead < edges[-1]:
                counts[bisect.bisect_right(edges, ahead) - 1] += num
        return pending, counts

    def flush(self) -> None:
        """msync the map: call from a worker thread."""
        if not self._mm.closed:
            self._mm.flush()

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.flush()
            self._mm.close()
            os.close(self._fd)
