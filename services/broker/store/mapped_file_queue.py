"""MappedFileQueue: the ordered segments of one log (the CommitLog, or one ConsumeQueue).

The segment list is copy-on-write: the writer and readers on the event loop, flush threads and
retention threads each take a snapshot (``mapped_files``) and never see a half-updated list.

With a transient store pool (the CommitLog's, transientStorePoolEnable) each segment created
here borrows a write buffer; get_max_offset() is then the committed end (MappedFileQueue#
getMaxOffset uses getReadPosition) and commit() moves data from the buffers into the files.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from orbitmq.broker.store.allocate import AllocateMappedFileService
from orbitmq.broker.store.mapped_file import TMP_SUFFIX, MappedFile, offset_to_file_name
from orbitmq.broker.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10


class MappedFileQueue:
    def __init__(
        self,
        store_path: str,
        mapped_file_size: int,
        allocate_service: AllocateMappedFileService | None = None,
        transient_store_pool: TransientStorePool | None = None,
    ) -> None:
        self.store_path = store_path
        # Segments created from now on borrow a write buffer from it (None: no pool).
        self.transient_store_pool = transient_store_pool
        self.mapped_file_size = mapped_file_size
        self.allocate_service = allocate_service
        self.mapped_files: list[MappedFile] = []
        self._lock = threading.Lock()
        self.flushed_where = 0
        self.committed_where = 0
        # Store time of the last record covered by the latest flush (checkpoint input).
        self.store_timestamp = 0

    # --- lifecycle -----------------------------------------------------------------------
    def load(self) -> None:
        """Map every existing segment; all but the last are taken as full until recovery says."""
        if not os.path.isdir(self.store_path):
            return
        for leftover in os.listdir(self.store_path):
            if leftover.endswith(TMP_SUFFIX):  # a segment whose creation was interrupted
                os.unlink(os.path.join(self.store_path, leftover))
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit() and len(n) == 20)
        files: list[MappedFile] = []
        for name in names:
            path = os.path.join(self.store_path, name)
            size = os.path.getsize(path)
            if size != self.mapped_file_size:
                raise OSError(
                    f"{path}: length {size} does not match the configured segment size "
                    f"{self.mapped_file_size}; fix the mappedFileSize setting"
                )
            mf = MappedFile(path, self.mapped_file_size)
            mf.set_positions(self.mapped_file_size)
            files.append(mf)
        for prev, nxt in zip(files, files[1:], strict=False):
            if nxt.file_from_offset != prev.file_from_offset + self.mapped_file_size:
                raise OSError(f"{self.store_path}: segment {nxt.file_name} does not follow {prev.file_name}")
        self.mapped_files = files

    def check_self(self) -> bool:
        """MappedFileQueue#checkSelf: adjacent segments must be exactly one segment size apart; a
        gap or an overlap (a file lost or copied in by hand) is logged as the bug it is. False then."""
        files = list(self.mapped_files)
        ok = True
        for prev, cur in zip(files, files[1:], strict=False):
            if cur.file_from_offset - prev.file_from_offset != self.mapped_file_size:
                log.error("[BUG]The mappedFile queue's data is damaged, the adjacent mappedFile's offset don't "
                          "match. pre file %s, cur file %s", prev.path, cur.path)
                ok = False
        return ok

    def shutdown(self, interval_forcibly_ms: int = 0) -> None:
        for mf in self.mapped_files:
            mf.shutdown(interval_forcibly_ms)

    def destroy(self) -> None:
        with self._lock:
            files, self.mapped_files = self.mapped_files, []
        for mf in files:
            mf.destroy(1000 * 3)
        self.flushed_where = self.committed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

    # --- lookup --------------------------------------------------------------------------
    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def get_last_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[-1] if files else None

    def get_last_mapped_file_or_create(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to; creates the next (or first) one when needed.

        Raises OSError when the file cannot be created (CREATE_MAPPED_FILE_FAILED).
        """
        last = self.get_last_mapped_file()
        if last is not None and not last.is_full():
            return last
        if last is None:
            create_offset = start_offset - (start_offset % self.mapped_file_size)
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        return self._create(create_offset)

    def prepare_next(self) -> None:
        """Have the allocate service pre-create the segment after the last one."""
        last = self.get_last_mapped_file()
        if self.allocate_service is not None and last is not None:
            nxt = os.path.join(self.store_path, offset_to_file_name(last.file_from_offset + self.mapped_file_size))
            self.allocate_service.prepare(nxt, self.mapped_file_size)

    def _create(self, offset: int, warm: bool = False) -> MappedFile:
        """Add the segment starting at ``offset`` (``warm``: pre-fault it here if not prepared)."""
        os.makedirs(self.store_path, exist_ok=True)
        path = os.path.join(self.store_path, offset_to_file_name(offset))
        if self.allocate_service is not None:
            mf = self.allocate_service.get(path, self.mapped_file_size, warm=warm)
            next_path = os.path.join(self.store_path, offset_to_file_name(offset + self.mapped_file_size))
            self.allocate_service.prepare(next_path, self.mapped_file_size)
        else:
            mf = MappedFile(path, self.mapped_file_size)
        # Borrowed when the segment joins the queue, not when pre-created (upstream's
        # AllocateMappedFileService borrows ahead): a prepared file holds no buffer meanwhile.
        if self.transient_store_pool is not None:
            mf.attach_write_buffer(self.transient_store_pool)
        with self._lock:
            if not self.mapped_files:
                mf.first_create_in_queue = True
            self.mapped_files = [*self.mapped_files, mf]
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.mapped_files
        if not files:
            return None
        first = files[0]
        idx = offset // self.mapped_file_size - first.file_from_offset // self.mapped_file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        for mf in files:
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return first if return_first_on_not_found else None

    def get_min_offset(self) -> int:
        first = self.get_first_mapped_file()
        return first.file_from_offset if first is not None else -1

    def get_max_offset(self) -> int:
        """The end of what readers may see (the committed end with a pool buffer)."""
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.read_position if last is not None else 0

    def get_max_wrote_position(self) -> int:
        """The end of what was appended, committed or not."""
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def remain_how_many_data_to_commit(self) -> int:
        return self.get_max_wrote_position() - self.committed_where

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_offset() - self.flushed_where

    def roll_next_file(self, offset: int) -> int:
        return offset + self.mapped_file_size - offset % self.mapped_file_size

    # --- commit and flush ----------------------------------------------------------------
    def commit(self, least_pages: int) -> bool:
        """Commit the segment holding committed_where (MappedFileQueue#commit); True when
        nothing new was committed."""
        mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True
        where = mf.file_from_offset + mf.commit(least_pages)
        result = where == self.committed_where
        self.committed_where = where
        return result

    def commit_all(self, max_rounds: int = 1_000_000) -> None:
        """Commit segment after segment until everything appended is in the files."""
        for _ in range(max_rounds):
            if self.committed_where >= self.get_max_wrote_position() or self.commit(0):
                return  # all committed, or no progress (a failed write, a segment going away)

    def flush(self, least_pages: int) -> bool:
        """Flush the segment holding flushed_where; True when nothing new became durable."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        tmp_ts = mf.store_timestamp
        offset = mf.flush(least_pages)
        where = mf.file_from_offset + offset
        result = where == self.flushed_where
        self.flushed_where = where
        if self.transient_store_pool is None:
            self.committed_where = where
        if tmp_ts:
            self.store_timestamp = tmp_ts
        return result

    def flush_until(self, target: int, max_rounds: int = 1_000_000) -> None:
        """Flush segment after segment until ``target`` is durable (or nothing is left)."""
        for _ in range(max_rounds):
            if self.flushed_where >= target:
                return
            if self.flush(0) and self.flushed_where < target:
                mf = self.find_mapped_file_by_offset(self.flushed_where)
                if mf is None or mf.read_position + mf.file_from_offset <= self.flushed_where:
                    return

    # --- truncation and deletion ---------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop everything at or after ``offset``: zero the rest of its segment, delete later ones."""
        keep: list[MappedFile] = []
        dropped: list[MappedFile] = []
        for mf in self.mapped_files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail <= offset:
                keep.append(mf)
            elif offset >= mf.file_from_offset:
                pos = offset - mf.file_from_offset
                mf.zero_from(pos)
                mf.set_positions(pos)
                keep.append(mf)
            else:
                dropped.append(mf)
        with self._lock:
            self.mapped_files = keep
        for mf in dropped:
            mf.destroy(1000)
        self.flushed_where = min(self.flushed_where, offset)
        self.committed_where = min(self.committed_where, offset)

    def delete_last_mapped_file(self) -> None:
        last = self.get_last_mapped_file()
        if last is None:
            return
        with self._lock:
            self.mapped_files = self.mapped_files[:-1]
        last.destroy(1000)

    def _remove(self, files: list[MappedFile]) -> None:
        if not files:
            return
        gone = {id(f) for f in files}
        with self._lock:
            self.mapped_files = [f for f in self.mapped_files if id(f) not in gone]

    def delete_expired_files_by_time(
        self,
        expired_ms: int,
        delete_interval_ms: int,
        interval_forcibly_ms: int,
        clean_immediately: bool,
    ) -> int:
        """CommitLog retention: delete segments whose mtime is older than ``expired_ms``.

        Never the last segment; at most 10 per call; sleeps ``delete_interval_ms`` between
        deletions, so call it from a thread, never from the event loop.
        """
        files = self.mapped_files[:-1]
        deleted: list[MappedFile] = []
        now = int(time.time() * 1000)
        for i, mf in enumerate(files):
            live_max = mf.last_modified_ms() + expired_ms
            if now < live_max and not clean_immediately:
                break
            if not mf.destroy(interval_forcibly_ms):
                break
            deleted.append(mf)
            if len(deleted) >= DELETE_FILES_BATCH_MAX:
                break
            if delete_interval_ms > 0 and i + 1 < len(files):
                time.sleep(delete_interval_ms / 1000)
        self._remove(deleted)
        return len(deleted)

    def retry_delete_first_file(self, interval_forcibly_ms: int) -> bool:
        """Finish deleting a first segment whose destroy was refused earlier (still held)."""
        first = self.get_first_mapped_file()
        if first is None or first.available:
            return False
        log.warning("the mapped file %s was not deleted earlier; retrying", first.file_name)
        if first.destroy(interval_forcibly_ms):
            self._remove([first])
            return True
        return False

    def delete_expired_files_by_offset(self, min_phy_offset: int, unit_size: int) -> int:
        """ConsumeQueue retention: delete segments whose last entry points below ``min_phy_offset``."""
        files = self.mapped_files[:-1]
        deleted: list[MappedFile] = []
        for mf in files:
            data = None
            if mf.hold():
                try:
                    data = mf.read(self.mapped_file_size - unit_size, unit_size)
                finally:
                    mf.release()
            if data is None:
                log.warning("cannot read the last unit of %s; stop deleting", mf.path)
                break
            max_offset_in_logic_queue = int.from_bytes(data[:8], "big", signed=True)
            if max_offset_in_logic_queue >= min_phy_offset:
                break
            if not mf.destroy(1000 * 60):
                break
            deleted.append(mf)
        self._remove(deleted)
        return len(deleted)

    def total_size(self) -> int:
        return len(self.mapped_files) * self.mapped_file_size
