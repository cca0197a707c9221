"""MappedFile: one fixed-size segment file, mmap'd, named by the offset of its first byte.

Writers append on the event loop (a memcpy into the mapping); flush threads make the bytes
durable with fdatasync. fdatasync, not mmap.flush: CPython's msync holds the GIL for the whole
disk wait (measured: it stalls every other thread), while fdatasync releases it, and on Linux
it writes back the dirty pages of a MAP_SHARED mapping of the file just the same. The files
have a fixed pre-allocated size, so no metadata change needs syncing.

A reference count (hold/release) keeps flush threads and readers from using a segment that a
retention thread is destroying; destroy waits for the count to drop, or forces after
``interval_forcibly`` ms as ReferenceResource.shutdown does.

populate() pre-faults pages from a background thread (allocate.WarmAheadService), so the
event loop's copy into the mapping finds them mapped and writable (see populate()).

With the transient store pool (transient_store_pool.py) a CommitLog segment borrows a write
buffer: appends go to ``wbuf`` (the buffer, else the mapping), commit() copies the written
part into the file, and every reader stops at ``read_position``, the committed position
(DefaultMappedFile#getReadPosition), so nobody sees bytes the file does not hold yet.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import threading
import time
from typing import TYPE_CHECKING

from orbitmq.broker.store.transient_store_pool import mlock, munlock

if TYPE_CHECKING:
    from orbitmq.broker.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
_ZERO_CHUNK = bytes(1 << 20)
# Linux 5.14+: fault pages in writable as a write would, without touching their contents.
MADV_POPULATE_WRITE = 23


def _bind_madvise():
    """libc madvise through ctypes: unlike mmap.madvise, a ctypes call releases the GIL."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


_madvise = _bind_madvise()
# Cleared at the first EINVAL (a kernel without MADV_POPULATE_WRITE): populate() turns into a no-op.
_populate_supported = _madvise is not None


def offset_to_file_name(offset: int) -> str:
    """UtilAll.offset2FileName: 20-digit zero-padded offset."""
    return f"{offset:020d}"


TMP_SUFFIX = ".creating"


def _create_segment(path: str, file_size: int, preallocate: bool, warm: bool, flush_least_pages: int = 0) -> None:
    """Create a full-size segment atomically: a crash mid-way leaves only a temp file behind.

    ``warm`` writes real zeros and syncs them (RocketMQ's warmMappedFile): the first write to
    each page of a fallocated-but-unwritten extent costs a slow page fault (~1 µs per 1 KiB
    record, measured), paid while the event loop holds the GIL; written pages fault cheaply
    (the kernel keeps them as large clean folios and maps a whole folio per fault).
    The zeros are synced here so the first flush of the segment does not write them instead,
    every ``flush_least_pages`` pages (flushLeastPagesWhenWarmMapedFile) so a 1 GiB segment
    never has more than that much dirty at once. Both forms reserve the blocks, so appends
    never hit ENOSPC/SIGBUS mid-record.
    """
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if warm:
            sync_every = flush_least_pages * OS_PAGE_SIZE
            synced = 0
            for off in range(0, file_size, len(_ZERO_CHUNK)):
                os.pwrite(fd, _ZERO_CHUNK[: min(len(_ZERO_CHUNK), file_size - off)], off)
                if sync_every > 0 and off + len(_ZERO_CHUNK) - synced >= sync_every:
                    os.fdatasync(fd)
                    synced = off + len(_ZERO_CHUNK)
            os.fdatasync(fd)
        elif preallocate and hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, file_size)
        else:
            os.ftruncate(fd, file_size)
    finally:
        os.close(fd)
    os.rename(tmp, path)


class MappedFile:
    def __init__(
        self,
        path: str,
        file_size: int,
        *,
        preallocate: bool = True,
        warm: bool = False,
        warm_flush_least_pages: int = 0,
    ) -> None:
        self.path = path
        self.file_name = os.path.basename(path)
        self.file_from_offset = int(self.file_name)
        self.file_size = file_size
        if not os.path.exists(path):
            _create_segment(path, file_size, preallocate, warm, warm_flush_least_pages)
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != file_size:
                raise OSError(f"{path}: size {actual} differs from the configured segment size {file_size}")
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        # warmMapedFileEnable: a warmed segment is also mlock'd where the OS allows
        # (DefaultMappedFile#warmMappedFile ends with mlock), munlock'd when unmapped.
        self._mlocked = warm and mlock(self.mm, file_size)
        # Where appends write: the pool's buffer while the segment holds one, else the mapping.
        self.wbuf: mmap.mmap = self.mm
        self.write_buffer: mmap.mmap | None = None
        self.transient_store_pool: TransientStorePool | None = None
        # Serialises commits (the commit thread's, and a replica's append or a truncation).
        self._commit_lock = threading.Lock()
        self._buf_lock = threading.Lock()
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        # Store time of the last record appended (CommitLog) — read by the flush service.
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self.available = True
        self._ref_count = 1
        self._ref_lock = threading.Lock()
        self._first_shutdown_ms = 0
        self._cleanup_over = False

    # --- reference counting --------------------------------------------------------------
    def hold(self) -> bool:
        with self._ref_lock:
            if not self.available:
                return False
            self._ref_count += 1
            return True

    def release(self) -> None:
        with self._ref_lock:
            self._ref_count -= 1
            if self._ref_count > 0:
                return
            self._cleanup_locked()

    def _cleanup_locked(self) -> None:
        if self._cleanup_over:
            return
        self._cleanup_over = True
        self._give_back_buffer()
        if self._mlocked:
            self._mlocked = False
            munlock(self.mm, self.file_size)
        try:
            self.mm.close()
        except BufferError:
            log.warning("mapped file %s still has exported buffers; leaving the mapping", self.path)
        os.close(self.fd)

    def shutdown(self, interval_forcibly_ms: int) -> None:
        with self._ref_lock:
            if self.available:
                self.available = False
                self._first_shutdown_ms = int(time.time() * 1000)
                self._ref_count -= 1
                if self._ref_count <= 0:
                    self._cleanup_locked()
            elif self._ref_count > 0 and int(time.time() * 1000) - self._first_shutdown_ms >= interval_forcibly_ms:
                self._ref_count = 0
                self._cleanup_locked()

    def is_cleanup_over(self) -> bool:
        return self._cleanup_over

    def destroy(self, interval_forcibly_ms: int = 0) -> bool:
        """Unmap and delete the file; False while readers still hold it (retry later)."""
        self.shutdown(interval_forcibly_ms)
        if not self._cleanup_over:
            return False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        return True

    # --- transient store pool ----------------------------------------------------------
    def attach_write_buffer(self, pool: TransientStorePool) -> bool:
        """Borrow a write buffer for this fresh segment (DefaultMappedFile#init with a pool);
        False, and appends go to the mapping, when the pool has none left."""
        if self.wrote_position:
            return False
        buf = pool.borrow_buffer()
        if buf is None:
            log.warning("transient store pool exhausted: %s is written through its mapping", self.file_name)
            return False
        self.transient_store_pool = pool
        self.write_buffer = buf
        self.wbuf = buf
        return True

    def _give_back_buffer(self) -> None:
        """Return the buffer once (the commit thread and an unmapping may both get here)."""
        with self._buf_lock:  # taken last, never while another lock is wanted: no lock order
            buf, self.write_buffer = self.write_buffer, None
        if buf is not None:
            self.wbuf = self.mm
            self.transient_store_pool.return_buffer(buf)

    @property
    def read_position(self) -> int:
        """How far readers may read: the committed position while appends go to a pool buffer
        (DefaultMappedFile#getReadPosition), else the written one."""
        return self.committed_position if self.transient_store_pool is not None else self.wrote_position

    def is_able_to_commit(self, least_pages: int) -> bool:
        committed = self.committed_position
        wrote = self.wrote_position
        if self.is_full():
            return wrote > committed
        if least_pages > 0:
            return (wrote // OS_PAGE_SIZE) - (committed // OS_PAGE_SIZE) >= least_pages
        return wrote > committed

    def commit(self, least_pages: int) -> int:
        """Copy the buffer's written, uncommitted part into the file (DefaultMappedFile#commit)
        if at least ``least_pages`` pages wait (0: any byte); the new committed position. The
        buffer goes back to the pool once the segment is full and all of it committed."""
        if self.transient_store_pool is None:
            return self.wrote_position  # nothing to copy: written is committed
        with self._commit_lock:
            buf = self.write_buffer
            if buf is not None and self.is_able_to_commit(least_pages) and self.hold():
                try:
                    self._commit0(buf, self.wrote_position)
                finally:
                    self.release()
            if self.write_buffer is not None and self.committed_position >= self.file_size:
                self._give_back_buffer()
            return self.committed_position

    def _commit0(self, buf: mmap.mmap, end: int) -> None:
        """pwrite [committed, end) of ``buf`` into the file; the page cache is the mapping's, so
        readers of ``mm`` see it. pwrite releases the GIL, unlike a slice copy into ``mm``."""
        start = self.committed_position
        if end <= start:
            return
        view = memoryview(buf)
        try:
            pos = start
            while pos < end:
                pos += os.pwrite(self.fd, view[pos:end], pos)
        except OSError as exc:
            log.error("commit of %s [%d, %d) failed: %s", self.file_name, start, end, exc)
            return
        finally:
            view.release()
        self.committed_position = end

    # --- positions -----------------------------------------------------------------------
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def set_positions(self, pos: int) -> None:
        if self.write_buffer is not None:
            with self._commit_lock:  # keep what was written before ``pos``: it is not in the file yet
                buf = self.write_buffer
                if buf is not None:
                    self._commit0(buf, min(pos, self.wrote_position))
        self.wrote_position = self.committed_position = self.flushed_position = pos

    def is_able_to_flush(self, least_pages: int) -> bool:
        flushed = self.flushed_position
        readable = self.read_position
        if self.is_full():
            return readable > flushed
        if least_pages > 0:
            return (readable // OS_PAGE_SIZE) - (flushed // OS_PAGE_SIZE) >= least_pages
        return readable > flushed

    def flush(self, least_pages: int) -> int:
        """Make everything readable so far durable (if enough pages are dirty); new flushed pos.

        With a pool buffer that is what was committed (DefaultMappedFile#flush flushes up to
        getReadPosition); uncommitted bytes are the commit service's to copy first.
        """
        if self.is_able_to_flush(least_pages) and self.hold():
            try:
                pooled = self.transient_store_pool is not None
                value = self.committed_position if pooled else self.wrote_position
                os.fdatasync(self.fd)
                self.flushed_position = value
                if not pooled:
                    self.committed_position = value
            finally:
                self.release()
        return self.flushed_position

    # --- pre-faulting ----------------------------------------------------------------------
    def populate(self, start: int, end: int) -> bool:
        """Fault [start, end) in writable, for a thread other than the writer's; False if not done.

        A first write into a fresh page of the mapping faults (page-cache allocation, zeroing,
        ext4 page_mkwrite) inside the writer's slice copy, on the event loop. Here libc
        madvise(MADV_POPULATE_WRITE) takes those faults instead, without the GIL and without
        changing a byte, so it may run concurrently with the writer on the same pages.
        Populated pages are dirty; once a flush writes them back they are write-protected
        again, so the caller re-populates after flushes. The segment is held for the call and
        its buffer exported (mmap.close() refuses while it is), so the range cannot be unmapped
        under the kernel call.
        """
        global _populate_supported
        start -= start % OS_PAGE_SIZE
        end = min(end, self.file_size)
        if not _populate_supported or end <= start or not self.hold():
            return False
        try:
            try:
                view = ctypes.c_char.from_buffer(self.mm)
            except (ValueError, TypeError, BufferError):  # closed by a forced shutdown
                return False
            try:
                rc = _madvise(ctypes.addressof(view) + start, end - start, MADV_POPULATE_WRITE)
                err = ctypes.get_errno() if rc else 0
            finally:
                del view
        finally:
            self.release()
        if rc == 0:
            return True
        if err == errno.EINVAL:
            _populate_supported = False
            log.info("madvise(MADV_POPULATE_WRITE) is not supported here (Linux < 5.14); not pre-faulting")
        else:
            log.debug("populate %s [%d, %d) failed: %s", self.path, start, end, os.strerror(err))
        return False

    # --- data ----------------------------------------------------------------------------
    def append(self, data: bytes) -> bool:
        """Raw bytes at the write position (a replica's copy of its master's CommitLog).

        Straight into the file, as DefaultMappedFile#appendMessage(byte[]) does whatever the
        pool. A segment holding a pool buffer (a controller-mode broker that became a replica)
        gets them in the buffer too, so a later commit of records written before copies the
        same bytes; with nothing pending they are readable at once (upstream's
        TransientStorePool#isRealCommit false on a replica).
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        self.mm[pos:end] = data
        buf = self.write_buffer
        if buf is not None:
            with self._commit_lock:
                buf[pos:end] = data
                self.wrote_position = end
                if self.committed_position == pos:
                    self.committed_position = end
            return True
        self.wrote_position = end
        return True

    def read(self, pos: int, size: int) -> bytes | None:
        """Copy of [pos, pos+size) if it lies within the readable part, else None."""
        if pos < 0 or size < 0 or pos + size > self.read_position or not self.available:
            return None
        try:
            return self.mm[pos : pos + size]
        except ValueError:  # unmapped by a retention thread in between
            return None

    def zero_from(self, pos: int) -> None:
        """Zero [pos, end), skipping chunks that are already zero so clean space stays clean."""
        mm = self.mm
        end = self.file_size
        while pos < end:
            stop = min(end, pos + len(_ZERO_CHUNK))
            n = stop - pos
            if mm[pos:stop] != _ZERO_CHUNK[:n]:
                mm[pos:stop] = _ZERO_CHUNK[:n]
            pos = stop

    def last_modified(self) -> float:
        """mtime in seconds (time-based retention keys on it)."""
        try:
            return os.stat(self.path).st_mtime
        except FileNotFoundError:
            return 0.0

    def last_modified_ms(self) -> int:
        return int(self.last_modified() * 1000)

    def touch(self) -> None:
        """Bump mtime: writes through mmap update it lazily, retention needs it current."""
        try:
            os.utime(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote_position}, flushed={self.flushed_position})"
