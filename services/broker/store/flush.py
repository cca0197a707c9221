"""Disk flush services: each a thread, so fdatasync never runs on the event loop.

FlushRealTimeService (ASYNC_FLUSH) flushes the CommitLog every flushIntervalCommitLog once
flushCommitLogLeastPages pages are dirty, fully every flushCommitLogThoroughInterval.
GroupCommitService (SYNC_FLUSH) serves waiting puts: all requests queued while a flush runs
are answered by the next single flush. CommitRealTimeService (transientStorePoolEnable) copies
the pool's write buffers into the files first; the flushers flush only what it committed.
FlushConsumeQueueService flushes every ConsumeQueue and then the checkpoint. Completions go
back to the waiter's event loop via call_soon_threadsafe.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable

from orbitmq.broker.store.allocate import WarmAheadService
from orbitmq.broker.store.checkpoint import StoreCheckpoint
from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.config import OS_PAGE_SIZE, MessageStoreConfig
from orbitmq.broker.store.consume_queue import ConsumeQueue
from orbitmq.broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

RETRY_TIMES_OVER = 10


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH CommitLog flusher; also runs the WarmAheadService for the CommitLog.

    The warmer lives here because the two share the pages' life: a flush write-protects the
    pages the warmer populated, so it is woken after each flush; and it stops before the
    final flush, ahead of the CommitLog's segments being shut down. (Not with SYNC_FLUSH:
    group commits flush so often that re-populating after each would mostly write zeros.)
    """

    name = "FlushRealTimeService"

    def __init__(self, commit_log: CommitLog, config: MessageStoreConfig, checkpoint: StoreCheckpoint) -> None:
        super().__init__()
        self.commit_log = commit_log
        self.config = config
        self.checkpoint = checkpoint
        self._last_thorough = 0
        self.warm_service: WarmAheadService | None = None
        # Not with a transient store pool: appends write into its buffers, never the mapping.
        if config.warm_commit_log_ahead_enable and commit_log.transient_store_pool is None:
            self.warm_service = WarmAheadService(
                commit_log.mapped_file_queue, commit_log.allocate_service,
                config.warm_commit_log_ahead_max_size, config.warm_commit_log_ahead_interval,
            )

    def start(self) -> None:
        if self.warm_service is not None:
            self.warm_service.start()
        super().start()

    def shutdown(self) -> None:
        if self.warm_service is not None:
            self.warm_service.shutdown()
        super().shutdown()

    def run(self) -> None:
        cfg = self.config
        mfq = self.commit_log.mapped_file_queue
        while not self._stopped:
            interval = cfg.flush_interval_commit_log / 1000
            least = cfg.flush_commit_log_least_pages
            now = _now_ms()
            if now >= self._last_thorough + cfg.flush_commit_log_thorough_interval:
                self._last_thorough = now
                least = 0
            if cfg.flush_commit_log_timed:
                time.sleep(interval)
            else:
                self.wait_for_running(interval)
            if self._stopped:
                break
            hook = self.commit_log.before_flush_hook
            if hook is not None:
                hook()
            if not mfq.flush(least) and self.warm_service is not None:
                self.warm_service.wakeup()  # the flush write-protected the warmed window
            if mfq.store_timestamp > 0:
                self.checkpoint.physic_msg_timestamp = mfq.store_timestamp
        for _ in range(RETRY_TIMES_OVER):
            if mfq.flush(0):
                break
        if mfq.store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = mfq.store_timestamp


class CommitRealTimeService(ServiceThread):
    """CommitLog$CommitRealTimeService: every commitIntervalCommitLog ms, copy what the appends
    wrote into the pool buffers into the files once commitCommitLogLeastPages pages wait, all of
    it every commitCommitLogThoroughInterval ms; wake the flusher after a commit that moved data.

    A thread, as the flushers: the copy is a pwrite that releases the GIL. Readers (dispatch,
    pulls, HA transfer) see a record only once it is committed, so this is also how fast
    consumers and replicas see new messages.
    """

    name = "CommitRealTimeService"

    def __init__(self, commit_log: CommitLog, config: MessageStoreConfig,
                 wake_flush: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.commit_log = commit_log
        self.config = config
        self.wake_flush = wake_flush
        # From start-up (upstream: 0): nothing is pending then, and a first pass racing the
        # first appends would otherwise commit them all at once whatever the thresholds.
        self.last_commit_ms = _now_ms()

    def wakeup_on_put(self, now_ms: int) -> None:
        """After an append (upstream's wakeCommitWhenPutMessage, on by default): wake the thread
        only when its next pass would commit (enough pages wait, or a thorough commit is due).
        Upstream wakes it on every put; here each wake costs the event loop a GIL hand-off,
        so a pass that would find too little to commit is not started."""
        if self._wake.is_set():
            return
        cfg = self.config
        if now_ms < self.last_commit_ms + cfg.commit_commit_log_thorough_interval:
            files = self.commit_log.mapped_file_queue.mapped_files
            if not files:
                return
            mf = files[-1]
            pending = mf.wrote_position // OS_PAGE_SIZE - mf.committed_position // OS_PAGE_SIZE
            if pending < cfg.commit_commit_log_least_pages:
                return
        self._wake.set()

    def commit_once(self) -> bool:
        """One pass; True when data was committed."""
        cfg = self.config
        least = cfg.commit_commit_log_least_pages
        begin = _now_ms()
        if begin >= self.last_commit_ms + cfg.commit_commit_log_thorough_interval:
            self.last_commit_ms = begin
            least = 0
        if self.commit_log.mapped_file_queue.commit(least):
            return False
        end = _now_ms()
        self.last_commit_ms = end  # "result = false means some data committed"
        if self.wake_flush is not None:
            self.wake_flush()
        if end - begin > 500:
            log.info("Commit data to file costs %d ms", end - begin)
        return True

    def _rolled_over(self) -> bool:
        """The last pass finished a full segment and the appends went on in the next one."""
        mfq = self.commit_log.mapped_file_queue
        where = mfq.committed_where
        return where % mfq.mapped_file_size == 0 and where < mfq.get_max_wrote_position()

    def run(self) -> None:
        while not self._stopped:
            try:
                # A pass commits one segment (MappedFileQueue#commit); after a rollover the next
                # one goes at once rather than an interval later.
                while self.commit_once() and self._rolled_over() and not self._stopped:
                    pass
            except Exception:
                log.exception("%s pass failed", self.name)
            self.wait_for_running(self.config.commit_interval_commit_log / 1000)
        mfq = self.commit_log.mapped_file_queue
        for _ in range(RETRY_TIMES_OVER):
            if mfq.commit(0):
                break


class _Request:
    __slots__ = ("next_offset", "future", "loop")

    def __init__(self, next_offset: int, future: asyncio.Future, loop: asyncio.AbstractEventLoop) -> None:
        self.next_offset = next_offset
        self.future = future
        self.loop = loop


def _complete(results: list[tuple[asyncio.Future, bool]]) -> None:
    for fut, ok in results:
        if not fut.done():
            fut.set_result(ok)


class GroupCommitService(ServiceThread):
    name = "GroupCommitService"

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
        super().__init__()
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self._lock = threading.Lock()
        self._requests_write: list[_Request] = []
        # With a transient store pool: wakes CommitRealTimeService while a request waits.
        self.wake_commit: Callable[[], None] | None = None

    def put_request(self, next_offset: int, future: asyncio.Future, loop: asyncio.AbstractEventLoop) -> None:
        """Ask for everything before ``next_offset`` to be durable; ``future`` gets True/False."""
        with self._lock:
            self._requests_write.append(_Request(next_offset, future, loop))
        self._wake.set()

    def _swap(self) -> list[_Request]:
        with self._lock:
            reqs, self._requests_write = self._requests_write, []
        return reqs

    def _do_commit(self, reqs: list[_Request]) -> None:
        mfq = self.commit_log.mapped_file_queue
        hook = self.commit_log.before_flush_hook
        if hook is not None:
            hook()
        if reqs:
            target = max(r.next_offset for r in reqs)
            mfq.flush_until(target)
            if self.commit_log.transient_store_pool is not None:
                # The records may still sit in a pool buffer: give CommitRealTimeService time to
                # commit them, 1 ms at a time (GroupCommitService#doCommit, up to 1000 rounds).
                if mfq.flushed_where < target and self.wake_commit is not None:
                    self.wake_commit()
                for _ in range(1000):
                    if mfq.flushed_where >= target:
                        break
                    time.sleep(0.001)
                    mfq.flush_until(target)
            flushed = mfq.flushed_where
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, bool]]] = {}
            for r in reqs:
                by_loop.setdefault(r.loop, []).append((r.future, flushed >= r.next_offset))
            for loop, results in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_complete, results)
                except RuntimeError:
                    pass  # the waiter's loop is closed: nobody is waiting any more
        else:
            # Puts that did not ask to wait (WAIT=false) still get flushed promptly.
            mfq.flush(0)
        if mfq.store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = mfq.store_timestamp

    def run(self) -> None:
        while not self._stopped:
            self.wait_for_running(0.010)
            self._do_commit(self._swap())
        # Requests that raced with shutdown are answered after one last flush.
        time.sleep(0.010)
        self._do_commit(self._swap())


class FlushConsumeQueueService(ServiceThread):
    name = "FlushConsumeQueueService"
    RETRY_TIMES_OVER = 3

    def __init__(
        self,
        consume_queues: Callable[[], Iterable[ConsumeQueue]],
        config: MessageStoreConfig,
        checkpoint: StoreCheckpoint,
        dispatched_timestamp: Callable[[], int],
    ) -> None:
        super().__init__()
        self.consume_queues = consume_queues
        # Store time of the newest record the reput service has put into a ConsumeQueue.
        self.dispatched_timestamp = dispatched_timestamp
        self.config = config
        self.checkpoint = checkpoint
        self._last_thorough = 0

    def do_flush(self, retry_times: int) -> None:
        cfg = self.config
        least = cfg.flush_consume_queue_least_pages
        if retry_times == self.RETRY_TIMES_OVER:
            least = 0
        now = _now_ms()
        if now >= self._last_thorough + cfg.flush_consume_queue_thorough_interval:
            self._last_thorough = now
            least = 0
        # Captured before flushing: every entry dispatched by then is durable afterwards.
        logics_ts = self.dispatched_timestamp()
        for cq in list(self.consume_queues()):
            try:
                cq.flush(least)
            except (OSError, ValueError) as exc:
                log.warning("flush of consume queue %s-%d failed: %s", cq.topic, cq.queue_id, exc)
        if least == 0:
            if logics_ts > 0:
                self.checkpoint.logics_msg_timestamp = logics_ts
            self.checkpoint.flush()

    def run(self) -> None:
        while not self._stopped:
            self.wait_for_running(self.config.flush_interval_consume_queue / 1000)
            if self._stopped:
                break
            self.do_flush(1)
        self.do_flush(self.RETRY_TIMES_OVER)
