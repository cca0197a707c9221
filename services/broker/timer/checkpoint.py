"""TimerCheckpoint: ``config/timercheck``, a 4 KiB map of 7 big-endian longs (upstream's layout).

0 lastReadTimeMs, 8 lastTimerLogFlushPos, 16 lastTimerQueueOffset, 24 masterTimerQueueOffset,
32/40/48 dataVersion (stateVersion, timestamp, counter). The same 56 bytes are the body of
GET_TIMER_CHECK_POINT. Recovery trusts it as a lower bound: everything before these positions
was on disk when it was written.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass

_LAYOUT = struct.Struct(">qqqqqqq")
FILE_SIZE = 4096


@dataclass(slots=True)
class TimerCheckpointData:
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def encode(self) -> bytes:
        return _LAYOUT.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                            self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter)

    @classmethod
    def decode(cls, data: bytes) -> TimerCheckpointData:
        return cls(*_LAYOUT.unpack_from(data, 0))


class TimerCheckpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < FILE_SIZE:
            os.ftruncate(fd, FILE_SIZE)
        self._fd = fd
        self._mm = mmap.mmap(fd, FILE_SIZE)
        self._lock = threading.Lock()
        self.data = TimerCheckpointData.decode(self._mm[:_LAYOUT.size])

    def snapshot(self) -> bytes:
        with self._lock:
            return self.data.encode()

    def update(self, *, last_read_time_ms: int, last_timer_log_flush_pos: int, last_timer_queue_offset: int,
               master_timer_queue_offset: int) -> None:
        """Record new positions and make them durable (worker thread)."""
        with self._lock:
            if self._mm.closed:
                return
            d = self.data
            d.last_read_time_ms = last_read_time_ms
            d.last_timer_log_flush_pos = last_timer_log_flush_pos
            d.last_timer_queue_offset = last_timer_queue_offset
            d.master_timer_queue_offset = master_timer_queue_offset
            d.timestamp = int(time.time() * 1000)
            d.counter += 1
            self._mm[:_LAYOUT.size] = d.encode()
            self._mm.flush()

    def close(self) -> None:
        with self._lock:
            if not self._mm.closed:
                self._mm.flush()
                self._mm.close()
                os.close(self._fd)
