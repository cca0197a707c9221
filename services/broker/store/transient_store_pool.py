"""TransientStorePool: the pooled write buffers of CommitLog segments (transientStorePoolEnable).

Why: with the pool on, appends on the event loop copy records into an anonymous, mlock'd
memory buffer the size of a segment instead of into the file's mapping, so they never take a
page fault on the file (first touch, or a page write-protected again by the last flush).
CommitRealTimeService then copies the buffer into the file with pwrite (GIL released) and the
flush services make that durable. As upstream's TransientStorePool: ``transientStorePoolSize``
buffers, made at start-up; a new segment borrows one, and gives it back once it is full and
every byte of it committed. A segment created while none is free writes to its mapping as
without the pool; the broker meanwhile refuses sends (isTransientStorePoolDeficient).

mlock keeps the buffers resident; it usually fails for lack of RLIMIT_MEMLOCK (8 MiB by
default, one buffer is a 1 GiB segment): logged, not fatal, as upstream ignores LibC.mlock's
result.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import threading
from collections import deque

log = logging.getLogger(__name__)


def _bind(name: str):
    """libc mlock/munlock through ctypes (a ctypes call releases the GIL), or None."""
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    fn.restype = ctypes.c_int
    return fn


_mlock = _bind("mlock")
_munlock = _bind("munlock")


_warned: set[str] = set()


def _lock_call(fn, buf: mmap.mmap, size: int, what: str) -> bool:
    """Run mlock/munlock over the whole of ``buf``; False (logged, a warning the first time)
    when the OS refuses."""
    if fn is None:
        return False
    try:
        view = ctypes.c_char.from_buffer(buf)
    except (ValueError, TypeError, BufferError):  # closed
        return False
    try:
        rc = fn(ctypes.addressof(view), size)
        err = ctypes.get_errno() if rc else 0
    finally:
        del view
    if rc:
        level = logging.DEBUG if what in _warned else logging.WARNING
        _warned.add(what)
        log.log(level, "%s of %d bytes failed: %s (raise RLIMIT_MEMLOCK to keep the pages resident)",
                what, size, os.strerror(err))
        return False
    return True


def mlock(buf: mmap.mmap, size: int) -> bool:
    """Pin ``size`` bytes of ``buf`` in memory (LibC.mlock); False when the OS refuses."""
    return _lock_call(_mlock, buf, size, "mlock")


def munlock(buf: mmap.mmap, size: int) -> bool:
    return _lock_call(_munlock, buf, size, "munlock")


class TransientStorePool:
    """``pool_size`` anonymous mmaps of ``file_size`` bytes each (ByteBuffer.allocateDirect)."""

    def __init__(self, pool_size: int, file_size: int) -> None:
        self.pool_size = pool_size
        self.file_size = file_size
        self._available: deque[mmap.mmap] = deque()
        self._all: list[mmap.mmap] = []
        self._locked: set[int] = set()
        self._lock = threading.Lock()

    def init(self) -> None:
        """Make and mlock the buffers (heavy: call it from a thread, at start-up)."""
        for _ in range(self.pool_size):
            buf = mmap.mmap(-1, self.file_size, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            if mlock(buf, self.file_size):
                self._locked.add(id(buf))
            self._all.append(buf)
            self._available.append(buf)
        log.info("transient store pool: %d buffers of %d bytes, %d of them mlock'd",
                 self.pool_size, self.file_size, len(self._locked))

    def destroy(self) -> None:
        """munlock and free the buffers; one still lent out is left to its segment."""
        with self._lock:
            bufs, self._available = list(self._available), deque()
            self._all = []
        for buf in bufs:
            if id(buf) in self._locked:
                munlock(buf, self.file_size)
                self._locked.discard(id(buf))
            try:
                buf.close()
            except BufferError:  # a commit still exports it; the GC frees it later
                pass

    def borrow_buffer(self) -> mmap.mmap | None:
        """A free buffer (most recently returned first), or None when all are lent out."""
        with self._lock:
            buf = self._available.popleft() if self._available else None
            left = len(self._available)
        if left < self.pool_size * 0.4:
            log.warning("TransientStorePool only remain %d sheets.", left)
        return buf

    def return_buffer(self, buf: mmap.mmap) -> None:
        """Take ``buf`` back (its old contents are never read: commits copy only what was written)."""
        with self._lock:
            self._available.appendleft(buf)

    def available_buffer_nums(self) -> int:
        return len(self._available)
