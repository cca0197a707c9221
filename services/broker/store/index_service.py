"""IndexService: builds and queries the IndexFiles under <storePathRootDir>/index.

The reput dispatcher calls build_index for every stored record; QUERY_MESSAGE / queryMsgByKey
call query_offset. Files roll when full; the full file is msync'd on a background thread so the
dispatcher never waits on the disk, and its endTimestamp then becomes the checkpoint's
indexMsgTimestamp (through ``on_index_file_flushed``), which abnormal recovery trusts.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.index_file import IndexFile, IndexFileError, IndexKeyHasher, index_file_name, now_ms
from orbitmq.common import speedups, sysflag

log = logging.getLogger(__name__)

KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
_INDEX_FILE_NAME = re.compile(r"^\d{17}$")
DEFAULT_MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch
# sysflag.get_transaction_value, inlined: build_index runs once per stored record.
_TRANSACTION_MASK = sysflag.TRANSACTION_ROLLBACK_TYPE
_ROLLBACK = sysflag.TRANSACTION_ROLLBACK_TYPE


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


def build_key(topic: str, key: str) -> str:
    return topic + "#" + key


class IndexService:
    """Owns the ordered list of IndexFiles; every method is safe to call from any thread."""

    def __init__(
        self,
        config,
        store_path: str | None = None,
        *,
        on_index_file_flushed: Callable[[int], None] | None = None,
        running_flags=None,
    ) -> None:
        self.config = config
        self.store_path = store_path or config.index_dir
        self.hash_slot_num: int = config.max_hash_slot_num
        self.index_num: int = config.max_index_num
        self.max_msgs_num_batch: int = getattr(config, "max_msgs_num_batch", DEFAULT_MAX_MSGS_NUM_BATCH)
        # Called (from a flush thread) with the endTimestamp of a full file once it is on disk.
        self.on_index_file_flushed = on_index_file_flushed
        # RunningFlags of the store: a file that cannot be created marks WRITE_INDEX_FILE_ERROR.
        self.running_flags = running_flags
        self._files: list[IndexFile] = []
        self._lock = threading.RLock()
        # One worker, FIFO: full files become durable in creation order, so the checkpoint's
        # indexMsgTimestamp only ever moves forward over files that are really on disk.
        self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="FlushIndexFileThread")
        self._last_file_name = ""
        self._hasher = IndexKeyHasher()

    # ---- startup -------------------------------------------------------------------------
    def load(self, last_exit_ok: bool, index_msg_timestamp: int | None = None) -> bool:
        """Map the existing files, oldest first.

        After an abnormal exit, files whose endTimestamp is newer than the checkpoint's
        indexMsgTimestamp may hold torn items; they are destroyed so that the dispatcher
        rebuilds them from the CommitLog (IndexService.load does the same).
        """
        os.makedirs(self.store_path, exist_ok=True)
        names = sorted(n for n in os.listdir(self.store_path) if _INDEX_FILE_NAME.match(n))
        with self._lock:
            for name in names:
                path = os.path.join(self.store_path, name)
                try:
                    f = IndexFile(path, self.hash_slot_num, self.index_num)
                except IndexFileError as e:
                    log.error("skipping index file: %s", e)
                    continue
                except OSError:
                    log.exception("cannot map index file %s", path)
                    return False
                if not last_exit_ok and index_msg_timestamp is not None and f.end_timestamp > index_msg_timestamp:
                    log.info("destroying index file %s newer than checkpoint %d", name, index_msg_timestamp)
                    f.destroy()
                    continue
                self._files.append(f)
                self._last_file_name = max(self._last_file_name, name)
        return True

    def destroy_after(self, timestamp: int) -> int:
        """Destroy every file holding items stored after `timestamp`; returns how many.

        Abnormal recovery calls this with the checkpoint's indexMsgTimestamp before it
        re-dispatches the CommitLog, so the rebuilt index has no duplicate or torn items.
        """
        with self._lock:
            doomed = [f for f in self._files if f.end_timestamp > timestamp]
            for f in doomed:
                f.destroy()
                self._files.remove(f)
            return len(doomed)

    # ---- write ---------------------------------------------------------------------------
    def _key_hashes(self, req: DispatchRequest) -> list[int] | None:
        """The IndexFile hashes of `topic#UNIQ_KEY` then each `topic#key`; None: nothing to index.

        An empty (not absent) UNIQ_KEY with no keys gives [], which still picks (or rolls) the
        file, as indexing no key always did.
        """
        if not req.success or (req.sys_flag & _TRANSACTION_MASK) == _ROLLBACK:
            return None
        uniq_key = req.uniq_key
        keys_str = req.keys
        key_hash = self._hasher.key_hash
        if keys_str:
            topic = req.topic
            key_hashes = [key_hash(topic, k) for k in keys_str.split(KEY_SEPARATOR) if k]
            if uniq_key:
                key_hashes.insert(0, key_hash(topic, uniq_key))
            elif uniq_key is None and not key_hashes:
                return None
            return key_hashes
        if uniq_key:
            return [key_hash(req.topic, uniq_key)]
        return None if uniq_key is None else []

    def build_index(self, req: DispatchRequest) -> None:
        """Index `topic#UNIQ_KEY` and `topic#key` for each key in KEYS (rollback records skipped)."""
        # Hashed before taking the lock; the hasher's memo tables tolerate concurrent callers.
        key_hashes = self._key_hashes(req)
        if key_hashes is None:
            return
        offset = req.commit_log_offset
        lock = self._lock
        lock.acquire()  # not `with`: this runs for every stored record and acquire/release is cheaper
        try:
            files = self._files
            index_file = files[-1] if files else None
            if index_file is None or index_file.index_count >= index_file.index_num:
                index_file = self._get_and_create_last_file()
            # A record already indexed (re-dispatch after recovery) is not indexed twice.
            if offset < index_file.end_phy_offset:
                return
            done = index_file.put_hashes(key_hashes, offset, req.store_timestamp)
            while done < len(key_hashes):
                log.info("index file %s is full, rolling to a new one", index_file.file_name)
                index_file = self._get_and_create_last_file()
                done += index_file.put_hashes(key_hashes[done:], offset, req.store_timestamp)
        except OSError:
            # Upstream's retryGetAndCreateIndexFile gives up the same way: flag and stop.
            log.exception("cannot create index file under %s; marking index file error", self.store_path)
            if self.running_flags is not None:
                self.running_flags.make_index_file_error()
        finally:
            lock.release()

    def build_index_many(self, reqs: list[DispatchRequest],
                         failed: Callable[[DispatchRequest], None] | None = None) -> None:
        """build_index for each request, in order, under one lock acquisition (the module-level
        build_index_many, compiled where the accelerator was built)."""
        build_index_many(self, reqs, failed)

    def _get_and_create_last_file(self) -> IndexFile:
        if self._files and not self._files[-1].is_write_full():
            return self._files[-1]
        prev = self._files[-1] if self._files else None
        name = index_file_name(now_ms())
        if name <= self._last_file_name:
            # Two rollovers within one millisecond: keep names unique and in creation order.
            name = str(int(self._last_file_name) + 1)
        self._last_file_name = name
        os.makedirs(self.store_path, exist_ok=True)
        f = IndexFile(
            os.path.join(self.store_path, name),
            self.hash_slot_num,
            self.index_num,
            prev.end_phy_offset if prev else 0,
            prev.end_timestamp if prev else 0,
        )
        self._files.append(f)
        if prev is not None:
            self._flusher.submit(self._flush_full_file, prev)
        return f

    def _flush_full_file(self, f: IndexFile) -> None:
        try:
            f.flush()
        except (OSError, ValueError):
            log.exception("flush of index file %s failed", f.file_name)
            return
        if f.is_write_full() and self.on_index_file_flushed is not None:
            try:
                self.on_index_file_flushed(f.end_timestamp)
            except Exception:
                log.exception("index checkpoint update failed")

    # ---- read ----------------------------------------------------------------------------
    def query_offset(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> QueryOffsetResult:
        """Offsets of messages with this key stored in [begin_ts, end_ts], newest first.

        Callers must check the key on the real message: different keys can share a hash.
        """
        max_num = max(0, min(max_num, self.max_msgs_num_batch))
        result = QueryOffsetResult()
        idx_key = build_key(topic, key)
        with self._lock:
            for i in range(len(self._files) - 1, -1, -1):
                f = self._files[i]
                if i == len(self._files) - 1:
                    result.index_last_update_timestamp = f.end_timestamp
                    result.index_last_update_phyoffset = f.end_phy_offset
                if f.is_time_matched(begin_ts, end_ts):
                    f.select_phy_offset(idx_key, max_num, begin_ts, end_ts, result.phy_offsets)
                if f.begin_timestamp < begin_ts or len(result.phy_offsets) >= max_num:
                    break
        return result

    # ---- housekeeping --------------------------------------------------------------------
    def delete_expired_file(self, min_commitlog_offset: int) -> int:
        """Destroy files whose every item points below the CommitLog's min offset (never the last)."""
        with self._lock:
            doomed: list[IndexFile] = []
            for f in self._files[:-1]:
                if f.end_phy_offset < min_commitlog_offset:
                    doomed.append(f)
                else:
                    break
            for f in doomed:
                if f.destroy():
                    self._files.remove(f)
                else:
                    break
            return len(doomed)

    def flush(self) -> None:
        """msync every file; blocking, run it on a thread."""
        with self._lock:
            files = list(self._files)
        for f in files:
            f.flush()

    def shutdown(self) -> None:
        self._flusher.shutdown(wait=True)
        with self._lock:
            for f in self._files:
                f.shutdown()
            self._files.clear()

    def destroy(self) -> None:
        """Delete every index file (store destroy / tests)."""
        self._flusher.shutdown(wait=True)
        with self._lock:
            for f in self._files:
                f.destroy()
            self._files.clear()

    # ---- introspection -------------------------------------------------------------------
    @property
    def files(self) -> list[IndexFile]:
        with self._lock:
            return list(self._files)

    def total_size(self) -> int:
        with self._lock:
            return sum(f.file_size for f in self._files)


# Compiled twin: _speedups_index.build_index_many (same file bytes).
def build_index_many(service: IndexService, reqs: list[DispatchRequest],
                     failed: Callable[[DispatchRequest], None] | None = None) -> None:
    """IndexService.build_index_many: build_index for each request, in order, under one lock
    acquisition; each file's header is written once, after the run's last item in it (and before
    a rollover hands the full file to the flusher), so it never counts an item not written yet.

    ``failed(req)`` is called inside the handler of an exception build_index would have
    raised for ``req`` (the reput service logs it as for a single dispatch); the run goes on.
    """
    key_hashes_of = service._key_hashes
    dirty: IndexFile | None = None  # the file whose header is owed
    lock = service._lock
    lock.acquire()
    try:
        for req in reqs:
            try:
                key_hashes = key_hashes_of(req)
                if key_hashes is None:
                    continue
                offset = req.commit_log_offset
                files = service._files
                index_file = files[-1] if files else None
                if index_file is None or index_file.index_count >= index_file.index_num:
                    if dirty is not None:
                        dirty.write_header()
                        dirty = None
                    index_file = service._get_and_create_last_file()
                if offset < index_file.end_phy_offset:
                    continue
                ts = req.store_timestamp
                done = index_file.put_hashes(key_hashes, offset, ts, False)
                if done:
                    dirty = index_file
                while done < len(key_hashes):
                    log.info("index file %s is full, rolling to a new one", index_file.file_name)
                    if dirty is not None:
                        dirty.write_header()
                        dirty = None
                    index_file = service._get_and_create_last_file()
                    n = index_file.put_hashes(key_hashes[done:], offset, ts, False)
                    if n:
                        dirty = index_file
                    done += n
            except OSError:
                log.exception("cannot create index file under %s; marking index file error", service.store_path)
                if service.running_flags is not None:
                    service.running_flags.make_index_file_error()
            except Exception:
                if failed is None:
                    raise
                failed(req)
    finally:
        try:
            if dirty is not None:
                dirty.write_header()
        finally:
            lock.release()


_py_build_index_many = build_index_many


_fast = speedups.load("orbitmq.broker.store._speedups_index")  # None: the code above runs
if _fast is not None:
    build_index_many = _fast.build_index_many
