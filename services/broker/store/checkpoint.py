"""StoreCheckpoint: the ``checkpoint`` file abnormal recovery trusts (RocketMQ's layout).

One OS page; big-endian longs at 0 physicMsgTimestamp, 8 logicsMsgTimestamp, 16
indexMsgTimestamp, 24 masterFlushedOffset, 32 confirmPhyOffset. Each timestamp is the store
time of the newest record known durable in that structure, so recovery can start from the
first CommitLog segment older than all of them.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading

_LAYOUT = struct.Struct(">qqqqq")
_FILE_SIZE = 4096


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < _FILE_SIZE:
            os.ftruncate(fd, _FILE_SIZE)
        self._fd = fd
        self._mm = mmap.mmap(fd, _FILE_SIZE)
        self._lock = threading.Lock()
        (
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ) = _LAYOUT.unpack_from(self._mm, 0)

    def flush(self) -> None:
        """Write the current values and make them durable (call from a thread, not the loop)."""
        with self._lock:
            if self._mm.closed:
                return
            _LAYOUT.pack_into(
                self._mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
                self.master_flushed_offset, self.confirm_phy_offset,
            )
            os.fdatasync(self._fd)

    def get_min_timestamp(self) -> int:
        """min(physic, logics) minus 3 s of margin, as StoreCheckpoint.getMinTimestamp."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def get_min_timestamp_index(self) -> int:
        return min(self.get_min_timestamp(), self.index_msg_timestamp)

    def shutdown(self) -> None:
        self.flush()
        with self._lock:
            self._mm.close()
            os.close(self._fd)
