"""Getting CommitLog pages ready before the writer on the event loop reaches them.

AllocateMappedFileService creates the next segment before the writer needs it: creating one
means open + fallocate + mmap; for a 1 GiB CommitLog file the fallocate alone can take long
enough to stall every writer at rollover. A background thread prepares the segment that
follows the one just opened, so rollover only swaps a ready object in.

WarmAheadService keeps the pages just ahead of the write position faulted in (populated), so
the append's copy into the mapping does not take first-touch page faults on the event loop.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from orbitmq.broker.store.mapped_file import OS_PAGE_SIZE, MappedFile, offset_to_file_name
from orbitmq.broker.store.service_thread import ServiceThread

if TYPE_CHECKING:
    from orbitmq.broker.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

# flushLeastPagesWhenWarmMapedFile's default: 16 MiB of zeros synced at a time.
DEFAULT_WARM_FLUSH_LEAST_PAGES = 1024 // 4 * 16
# The smallest warm window: a few pages of zeros more per flush when the log is nearly idle.
MIN_WINDOW = 64 * 1024


class AllocateMappedFileService:
    def __init__(self, warm: bool = False, warm_flush_least_pages: int = DEFAULT_WARM_FLUSH_LEAST_PAGES) -> None:
        # Segments made here are pre-faulted with zeros (see mapped_file._create_segment).
        self.warm = warm
        self.warm_flush_least_pages = warm_flush_least_pages
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[Future, int]] = {}
        self._stopped = False

    def _create(self, path: str, size: int, fut: Future) -> None:
        try:
            fut.set_result(MappedFile(path, size, warm=self.warm, warm_flush_least_pages=self.warm_flush_least_pages))
        except BaseException as exc:  # reported to whoever asks for the file
            fut.set_exception(exc)

    def peek(self, path: str, size: int) -> MappedFile | None:
        """The prepared segment for ``path`` if it is ready (never waits), else None."""
        with self._lock:
            entry = self._pending.get(path)
        if entry is None or entry[1] != size or not entry[0].done() or entry[0].exception() is not None:
            return None
        return entry[0].result()

    def prepare(self, path: str, size: int) -> None:
        """Start creating ``path`` in the background unless it is already under way."""
        with self._lock:
            if self._stopped or path in self._pending:
                return
            fut: Future = Future()
            self._pending[path] = (fut, size)
        threading.Thread(target=self._create, args=(path, size, fut), name="AllocateMappedFile", daemon=True).start()

    def get(self, path: str, size: int, timeout: float = 5.0, warm: bool = False) -> MappedFile:
        """The prepared file for ``path`` (waiting for it), or one created here and now."""
        with self._lock:
            entry = self._pending.pop(path, None)
        if entry is not None and entry[1] == size:
            try:
                return entry[0].result(timeout)
            except Exception as exc:
                log.warning("pre-allocation of %s failed (%s); creating it inline", path, exc)
        return MappedFile(path, size, warm=warm and self.warm, warm_flush_least_pages=self.warm_flush_least_pages)

    def discard_prepared(self) -> None:
        """Delete the segments prepared so far (the log was cut or moved: they would no longer
        follow its last segment, and a crash would leave them behind as a gap)."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for fut, _size in pending:
            try:
                mf = fut.result(10)
            except Exception:
                continue
            mf.destroy(0)

    def shutdown(self) -> None:
        """Stop preparing; delete files that were prepared and never used."""
        with self._lock:
            self._stopped = True
            pending = list(self._pending.values())
            self._pending.clear()
        for fut, _size in pending:
            try:
                mf = fut.result(10)
            except Exception:
                continue
            mf.destroy(0)


class WarmAheadService(ServiceThread):
    """Keeps the pages just ahead of the CommitLog's write position populated.

    A thread wakes every ``interval_ms`` (and right after each flush, see wakeup()) and
    pre-faults [write position, + window) of the last segment with MappedFile.populate (libc
    madvise, GIL released), continuing into the segment the allocate service has prepared
    when the window crosses the end of the current one. It never waits on the event loop: it
    only reads the positions the writer publishes (wrote_position), as the flush thread does.

    Populated pages are dirty zeros: a flush writes them back and write-protects them, and a
    write into a write-protected page faults again, page by page (measured slower than a
    fresh page). So after each flush the window is populated again, and each flush writes up
    to one window of zeros more than the records. To keep that small the window follows the
    write rate (``AHEAD_SECONDS`` of appends, between ``min_window`` and ``max_window``).
    Segments are held (MappedFile.hold) while populated, so retention, recovery truncation
    and shutdown never unmap one under the call; shutdown() stops and joins the thread, and
    must come before the CommitLog's segments are shut down.
    """

    name = "WarmAheadService"
    # Appends the window should cover: several passes (interval 20 ms by default), plus the
    # GIL waits (up to the 5 ms switch interval) a pass may take behind a busy event loop.
    AHEAD_SECONDS = 0.1
    # Re-populate the whole window at least this often (kernel writeback may clean it too).
    FULL_PASS_S = 1.0

    def __init__(
        self,
        mapped_file_queue: MappedFileQueue,
        allocate_service: AllocateMappedFileService | None,
        max_window: int,
        interval_ms: int,
        min_window: int = MIN_WINDOW,
    ) -> None:
        self.mapped_file_queue = mapped_file_queue
        self.allocate_service = allocate_service
        self.max_window = max(OS_PAGE_SIZE, max_window - max_window % OS_PAGE_SIZE)
        self.min_window = min(self.max_window, max(OS_PAGE_SIZE, min_window))
        self.interval_s = max(1, interval_ms) / 1000
        super().__init__()
        # What the last pass saw and did.
        self._seg: MappedFile | None = None
        self._flushed = -1
        self._populated_to = 0
        self._next: MappedFile | None = None
        self._next_populated_to = 0
        self._full_time = 0.0
        self._time = 0.0
        self._log_pos = -1
        self._rate = 0.0  # bytes/s, decays slowly, rises at once
        self.passes = 0

    def run(self) -> None:
        while not self._stopped:
            try:
                self.warm_once()
            except Exception:  # never let a bad pass end the thread; the writer just faults itself
                log.exception("%s pass failed", self.name)
            self.wait_for_running(self.interval_s)

    def window(self) -> int:
        want = int(self._rate * self.AHEAD_SECONDS)
        want = max(self.min_window, min(self.max_window, want))
        return want - want % OS_PAGE_SIZE

    def warm_once(self) -> int:
        """One pass; the number of bytes it asked the kernel to populate."""
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is None or not mf.available:
            return 0
        wrote = mf.wrote_position
        flushed = mf.flushed_position
        now = time.monotonic()
        log_pos = mf.file_from_offset + wrote
        if self._log_pos >= 0 and now > self._time:
            dt = now - self._time
            self._rate = max((log_pos - self._log_pos) / dt, self._rate * 0.5**dt)
        self._time = now
        self._log_pos = log_pos
        start = wrote - wrote % OS_PAGE_SIZE
        if mf is not self._seg or flushed != self._flushed or now - self._full_time >= self.FULL_PASS_S:
            # A new segment, or a flush may have write-protected the window: all of it again.
            self._seg = mf
            self._flushed = flushed
            self._full_time = now
            self._populated_to = start
        window = self.window()
        end = min(start + window, mf.file_size)
        begin = max(start, self._populated_to)
        asked = 0
        if begin < end and mf.populate(begin, end):
            self._populated_to = end
            asked += end - begin
        beyond = start + window - mf.file_size
        if beyond > 0 and self.allocate_service is not None:
            path = os.path.join(self.mapped_file_queue.store_path,
                                offset_to_file_name(mf.file_from_offset + mf.file_size))
            nxt = self.allocate_service.peek(path, mf.file_size)
            if nxt is not None:
                if nxt is not self._next:
                    self._next, self._next_populated_to = nxt, 0
                if beyond > self._next_populated_to and nxt.populate(self._next_populated_to, beyond):
                    asked += beyond - self._next_populated_to
                    self._next_populated_to = beyond
        self.passes += 1
        return asked
