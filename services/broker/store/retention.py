"""Retention: RocketMQ's CleanCommitLogService + CleanConsumeQueueService, run as one asyncio task.

Every cleanResourceInterval ms the task hands one cleaning pass to a worker thread (unlink,
munmap and the deliberate pauses between deletions never touch the event loop):

1. CommitLog. Segments whose mtime is older than fileReservedTime hours are deleted when it is
   deleteWhen o'clock ("04", or a list "01;04"), or the store's disk is fuller than
   diskMaxUsedSpaceRatio, or a manual delete was requested (executeDeleteFilesManually: the next
   20 passes). Above diskSpaceCleanForciblyRatio segments go even if not yet expired, oldest
   first (cleanImmediately). Above diskSpaceWarningLevelRatio the store is also marked
   DISK_FULL in RunningFlags, which makes the put path refuse writes until usage drops.
2. ConsumeQueues and IndexFiles whose entries all point below the CommitLog's new minimum
   offset are deleted and each queue's min logic offset is corrected, so a pull below it
   answers OFFSET_TOO_SMALL with the new minimum.

Disk usage is read through ``disk_usage_provider(path) -> ratio in [0, 1]`` (statvfs, as Java's
File.getTotalSpace/getFreeSpace, by default) so tests and operators can simulate a full disk
without filling one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from orbitmq.broker.store.running_flags import RunningFlags

log = logging.getLogger(__name__)

MAX_MANUAL_DELETE_FILE_TIMES = 20


def disk_partition_used_ratio(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: (total - free) / total of the path's partition.

    "free" is Java's File.getFreeSpace(): every unallocated block (statvfs f_bfree), the blocks
    reserved for root included, not shutil.disk_usage's f_bavail. With f_bavail a partition with
    a large reservation looks fuller than it is: on a development VM here 22 % used read as 84 %,
    past diskSpaceCleanForciblyRatio (85 %) as soon as a test run wrote a little, and the broker
    deleted CommitLog files that were nowhere near their retention time.

    Measures the nearest existing ancestor when the directory does not exist yet; -1 when the
    partition cannot be measured.
    """
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return -1.0
        probe = parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    return (total - st.f_bfree * st.f_frsize) / total


def _ratio(value: float) -> float:
    """Accept both 0.90 and 90 (broker.conf writes the percentage)."""
    return value / 100.0 if value > 1 else float(value)


def is_it_time_to_do(when: str, hour: int) -> bool:
    """UtilAll.isItTimeToDo: is `hour` one of the ';'-separated hours in `when`?"""
    for part in when.split(";"):
        part = part.strip()
        if not part:
            continue
        try:
            if int(part) == hour:
                return True
        except ValueError:
            log.error("deleteWhen %r: %r is not an hour of the day", when, part)
    return False


class CleanCommitLogService:
    """Decides when CommitLog segments may go and deletes them (blocking: run on a thread)."""

    def __init__(
        self,
        config,
        commit_log_queue,
        running_flags: RunningFlags,
        *,
        disk_usage_provider: Callable[[str], float] = disk_partition_used_ratio,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.commit_log_queue = commit_log_queue
        self.running_flags = running_flags
        self.disk_usage_provider = disk_usage_provider
        self.clock = clock
        self.manual_delete_file_several_times = 0
        self.clean_immediately = False
        self._last_redelete_ms = 0

    # ---- thresholds (clamped as upstream does) --------------------------------------------
    def disk_space_warning_level_ratio(self) -> float:
        return min(0.90, max(0.35, _ratio(self.config.disk_space_warning_level_ratio)))

    def disk_space_clean_forcibly_ratio(self) -> float:
        return min(0.85, max(0.30, _ratio(self.config.disk_space_clean_forcibly_ratio)))

    def disk_max_used_space_ratio(self) -> float:
        return min(0.95, max(0.10, _ratio(self.config.disk_max_used_space_ratio)))

    # ---- triggers ------------------------------------------------------------------------
    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG / admin: clean on the next passes regardless of hour and disk."""
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")

    def is_time_to_delete(self) -> bool:
        return is_it_time_to_do(self.config.delete_when, time.localtime(self.clock()).tm_hour)

    def _check_path(self, path: str, what: str) -> tuple[bool, float]:
        """Mark DISK_FULL / clean immediately for one path; (decided, ratio)."""
        ratio = self.disk_usage_provider(path)
        if ratio < 0:
            # Unmeasurable: assume nothing rather than deleting data on a guess.
            return False, ratio
        if ratio > self.disk_space_warning_level_ratio():
            if not self.running_flags.is_disk_full():
                log.error("%s disk maybe full soon %.3f, so mark disk full, path=%s", what, ratio, path)
            self.running_flags.make_disk_full()
            self.clean_immediately = True
            return True, ratio
        if ratio > self.disk_space_clean_forcibly_ratio():
            self.clean_immediately = True
            return True, ratio
        if self.running_flags.make_disk_ok():
            log.info("%s disk space OK %.3f, so mark disk ok, path=%s", what, ratio, path)
        return False, ratio

    def is_space_to_delete(self) -> bool:
        """Disk pressure check; also maintains the DISK_FULL flag and clean_immediately."""
        self.clean_immediately = False
        decided, physic_ratio = self._check_path(self.config.commit_log_dir, "physic")
        if decided:
            return True
        decided, logics_ratio = self._check_path(self.config.consume_queue_dir, "logics")
        if decided:
            return True
        limit = self.disk_max_used_space_ratio()
        if physic_ratio > limit:
            log.info("commitLog disk maybe full soon, so reclaim space, %.3f", physic_ratio)
            return True
        if logics_ratio > limit:
            log.info("consumeQueue disk maybe full soon, so reclaim space, %.3f", logics_ratio)
            return True
        return False

    # ---- work ----------------------------------------------------------------------------
    def run(self) -> int:
        """One pass; returns how many CommitLog segments were deleted."""
        try:
            deleted = self.delete_expired_files()
            self.redelete_hanged_file()
            return deleted
        except Exception:
            log.exception("CleanCommitLogService pass failed")
            return 0

    def delete_expired_files(self) -> int:
        cfg = self.config
        time_up = self.is_time_to_delete()
        space_to_delete = self.is_space_to_delete()
        manual = self.manual_delete_file_several_times > 0
        if not (time_up or space_to_delete or manual):
            return 0
        if manual:
            self.manual_delete_file_several_times -= 1
        clean_at_once = cfg.clean_file_forcibly_enable and self.clean_immediately
        log.info(
            "begin to delete before %d hours file. timeup: %s spacefull: %s manualDeleteFileSeveralTimes: %d "
            "cleanAtOnce: %s", cfg.file_reserved_time, time_up, space_to_delete,
            self.manual_delete_file_several_times, clean_at_once,
        )
        count = self.commit_log_queue.delete_expired_files_by_time(
            cfg.file_reserved_time * 60 * 60 * 1000,
            cfg.delete_commit_log_files_interval,
            cfg.destroy_maped_file_interval_forcibly,
            clean_at_once,
        )
        if count == 0 and space_to_delete:
            log.warning("disk space will be full soon, but delete file failed.")
        return count

    def redelete_hanged_file(self) -> None:
        """A segment whose destroy was refused (still held by a reader) is retried later, forcibly."""
        now = int(self.clock() * 1000)
        if now - self._last_redelete_ms <= self.config.redelete_hanged_file_interval:
            return
        self._last_redelete_ms = now
        retry = getattr(self.commit_log_queue, "retry_delete_first_file", None)
        if retry is not None:
            retry(self.config.destroy_maped_file_interval_forcibly)


class CleanConsumeQueueService:
    """Drops ConsumeQueue segments and IndexFiles behind the CommitLog's min offset (blocking)."""

    def __init__(
        self,
        config,
        min_commit_log_offset: Callable[[], int],
        consume_queues: Callable[[], Iterable],
        index_service=None,
    ) -> None:
        self.config = config
        self.min_commit_log_offset = min_commit_log_offset
        self.consume_queues = consume_queues
        self.index_service = index_service
        self.last_physical_min_offset = 0

    def run(self) -> tuple[int, int]:
        """One pass; returns (ConsumeQueue segments deleted, index files deleted)."""
        try:
            return self.delete_expired_files()
        except Exception:
            log.exception("CleanConsumeQueueService pass failed")
            return 0, 0

    def delete_expired_files(self) -> tuple[int, int]:
        min_offset = self.min_commit_log_offset()
        if min_offset <= self.last_physical_min_offset:
            return 0, 0
        self.last_physical_min_offset = min_offset
        interval = self.config.delete_consume_queue_files_interval
        cq_deleted = 0
        for cq in list(self.consume_queues()):
            n = cq.delete_expired_file(min_offset)
            cq_deleted += n
            if n > 0 and interval > 0:
                time.sleep(interval / 1000)
        index_deleted = 0
        if self.index_service is not None:
            index_deleted = self.index_service.delete_expired_file(min_offset)
        return cq_deleted, index_deleted


def commit_log_min_offset(commit_log_queue) -> int:
    """CommitLog.getMinOffset: the first segment's offset, or the next one's if it is being destroyed."""
    first = commit_log_queue.get_first_mapped_file()
    if first is None:
        return -1
    if getattr(first, "available", True):
        return first.file_from_offset
    return commit_log_queue.roll_next_file(first.file_from_offset)


@dataclass(slots=True)
class RetentionPass:
    commit_log_files: int = 0
    consume_queue_files: int = 0
    index_files: int = 0


class RetentionService:
    """The periodic task (DefaultMessageStore.cleanFilesPeriodically) and the DISK_FULL owner.

    The put path refuses writes while ``running_flags.is_disk_full()`` (same object the store
    checks in is_writeable); ``is_disk_full()`` here reads the same bit.
    """

    def __init__(
        self,
        config,
        commit_log_queue,
        running_flags: RunningFlags,
        *,
        consume_queues: Callable[[], Iterable] = tuple,
        index_service=None,
        min_commit_log_offset: Callable[[], int] | None = None,
        disk_usage_provider: Callable[[str], float] = disk_partition_used_ratio,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.running_flags = running_flags
        self.clean_commit_log = CleanCommitLogService(
            config, commit_log_queue, running_flags, disk_usage_provider=disk_usage_provider, clock=clock
        )
        self.clean_consume_queue = CleanConsumeQueueService(
            config,
            min_commit_log_offset or (lambda: commit_log_min_offset(commit_log_queue)),
            consume_queues,
            index_service,
        )
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._pass_lock = asyncio.Lock()

    @property
    def disk_usage_provider(self) -> Callable[[str], float]:
        return self.clean_commit_log.disk_usage_provider

    @disk_usage_provider.setter
    def disk_usage_provider(self, fn: Callable[[str], float]) -> None:
        self.clean_commit_log.disk_usage_provider = fn

    def is_disk_full(self) -> bool:
        return self.running_flags.is_disk_full()

    def execute_delete_files_manually(self) -> None:
        self.clean_commit_log.execute_delete_files_manually()

    def run_blocking(self) -> RetentionPass:
        """One full pass, CommitLog first (its new min offset drives the rest)."""
        result = RetentionPass(commit_log_files=self.clean_commit_log.run())
        result.consume_queue_files, result.index_files = self.clean_consume_queue.run()
        if result.commit_log_files or result.consume_queue_files or result.index_files:
            log.info("retention pass deleted %s", result)
        return result

    async def run_once(self) -> RetentionPass:
        async with self._pass_lock:
            return await asyncio.to_thread(self.run_blocking)

    async def _loop(self) -> None:
        interval = max(0.01, self.config.clean_resource_interval / 1000)
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=interval)
                return
            except TimeoutError:
                pass
            await self.run_once()

    def start(self) -> None:
        if self._task is None:
            self._stop.clear()
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="RetentionService")

    async def shutdown(self) -> None:
        """Stop the task; a pass already running on its thread is allowed to finish."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
