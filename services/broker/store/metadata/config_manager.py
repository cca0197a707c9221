"""Base of the JSON-backed metadata managers (RocketMQ's ConfigManager).

Tables live in memory and are the source of truth while the broker runs; persist() snapshots
them to <storePathRootDir>/config/<file>.json. The snapshot is taken on the caller's thread
(so no table is iterated while another thread mutates it) and the fsync-heavy write runs on
a worker thread in persist_async(). Snapshots carry a sequence number so an older snapshot
that loses a race never overwrites a newer one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from orbitmq.broker.store.metadata.json_file import load_json_with_backup, write_json_atomic
from orbitmq.common.atomic_file import NewestSnapshotWriter
from orbitmq.common.route import DataVersion

log = logging.getLogger(__name__)


class JsonConfigManager(ABC):
    file_name: ClassVar[str]

    def __init__(self, config_dir: str) -> None:
        self.config_dir = config_dir
        self.path = os.path.join(config_dir, self.file_name)
        self._lock = threading.RLock()  # guards the in-memory tables
        self._writer = NewestSnapshotWriter()

    # ---- subclass hooks ------------------------------------------------------------------
    @abstractmethod
    def encode(self) -> dict[str, Any]:
        """The whole table as plain JSON data (called with the table lock held)."""

    @abstractmethod
    def parse(self, obj: Any) -> Any:
        """Turn loaded JSON into table values without applying them; raise ValueError (or
        TypeError/KeyError) on a wrong shape, so a bad main file falls back to the .bak."""

    @abstractmethod
    def apply(self, parsed: Any) -> None:
        """Install what parse() returned (called with the table lock held)."""

    # ---- load / persist ------------------------------------------------------------------
    def load(self) -> bool:
        """Load the file (or its .bak). True when loaded or when there was nothing to load."""
        existed = os.path.exists(self.path) or os.path.exists(self.path + ".bak")
        obj, source = load_json_with_backup(self.path, self.parse)
        if obj is None:
            if existed:
                log.error("neither %s nor its .bak could be loaded", self.path)
                return False
            return True
        parsed = self.parse(obj)
        with self._lock:
            self.apply(parsed)
        log.info("loaded %s", source)
        return True

    def _snapshot(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            return self._writer.number(), self.encode()

    def _write(self, seq: int, obj: dict[str, Any]) -> None:
        self._writer.write(seq, self.path, write_json_atomic, obj)

    def persist(self) -> None:
        """Write synchronously (shutdown, tests, worker threads). Blocks on fsync."""
        self._write(*self._snapshot())

    async def persist_async(self) -> None:
        """Snapshot now, write on a worker thread: safe to await from the event loop."""
        seq, obj = self._snapshot()
        await asyncio.to_thread(self._write, seq, obj)

    def encode_json(self) -> dict[str, Any]:
        """A consistent snapshot of the table (e.g. for a remoting response body)."""
        with self._lock:
            return self.encode()


class JournaledConfigManager(JsonConfigManager):
    """A keyed table (topics, groups) kept as snapshot + append-only journal (see journal.py).

    Changes go through record_put / record_delete (called with the table lock held, after the
    dataVersion moved); sync() makes them durable; persist() compacts: a whole snapshot, and
    the journal starts over. The snapshot is rewritten when the journal holds as many lines as
    the table has entries (at least ``compact_min_entries``), so no change costs O(table), and
    also once changes stop for ``quiet_snapshot_seconds``: then the snapshot alone (what another
    RocketMQ broker reads from this store, which knows no journal) is at most that far behind the
    last change, also after a kill -9, while a burst of changes still pays one rewrite at its end.
    """

    compact_min_entries: ClassVar[int] = 10_000
    quiet_snapshot_seconds: ClassVar[float] = 0.5

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        from orbitmq.broker.store.metadata.journal import Journal

        self.journal = Journal(self.path)
        self._compacting = False
        self.compactions = 0
        self._snapshot_size = 0  # entries of the last snapshot written or loaded
        self._last_change = 0.0  # loop time of the last sync_async
        self._quiet_task: asyncio.Task[None] | None = None

    # ---- subclass hooks ------------------------------------------------------------------
    @abstractmethod
    def journal_table(self) -> dict[str, Any]:
        """The dict the journal's entries put into and delete from."""

    @abstractmethod
    def encode_entry(self, value: Any) -> dict[str, Any]:
        """One table value as JSON data."""

    @abstractmethod
    def decode_entry(self, obj: dict[str, Any]) -> Any:
        """One table value from JSON data."""

    def on_replayed_delete(self, name: str) -> None:
        """Hook: a replayed delete (e.g. drop the group's forbidden entries)."""

    # ---- recording -----------------------------------------------------------------------
    def record_put(self, name: str, value: Any) -> int:
        from orbitmq.broker.store.metadata.journal import encode_put

        return self.journal.record(encode_put(name, self.encode_entry(value), self.data_version.to_json_dict()))

    def record_delete(self, name: str) -> int:
        from orbitmq.broker.store.metadata.journal import encode_delete

        return self.journal.record(encode_delete(name, self.data_version.to_json_dict()))

    def sync(self, ticket: int | None = None) -> None:
        """Blocking: every change recorded so far (or up to ``ticket``) on disk."""
        self.journal.flush(ticket)

    async def sync_async(self, ticket: int | None = None) -> None:
        """Durable on return (an fsync on a worker thread, shared with concurrent changes);
        compacts in the background once the journal is as long as the table."""
        if ticket is None:
            ticket = self.journal.recorded
        if not self.journal.is_durable(ticket):
            await asyncio.to_thread(self.journal.flush, ticket)
        self.maybe_compact()
        self._snapshot_when_quiet()

    def _snapshot_when_quiet(self) -> None:
        """Compact once no change has come for quiet_snapshot_seconds (one timer task at a time)."""
        loop = asyncio.get_running_loop()
        self._last_change = loop.time()
        if self._quiet_task is not None and not self._quiet_task.done():
            return

        async def wait_then_compact() -> None:
            while True:  # a debounce: each change moves the deadline
                remaining = self._last_change + self.quiet_snapshot_seconds - loop.time()
                if remaining > 0 or self._compacting:
                    await asyncio.sleep(remaining if remaining > 0 else self.quiet_snapshot_seconds)
                    continue
                if not self.journal.entries:
                    return
                seen = self._last_change
                self._compacting = True
                try:
                    await asyncio.to_thread(self.persist)
                except Exception:
                    log.exception("compacting %s failed", self.path)
                    return
                finally:
                    self._compacting = False
                if self._last_change == seen:
                    return  # else a change came during the rewrite: wait for quiet again

        self._quiet_task = loop.create_task(wait_then_compact(), name=f"quiet snapshot {self.file_name}")
        _BACKGROUND.add(self._quiet_task)
        self._quiet_task.add_done_callback(_BACKGROUND.discard)

    def needs_compaction(self) -> bool:
        # As many lines as the last snapshot had entries: each rewrite is paid for by as many
        # changes as it writes, and a restart replays at most that many lines.
        return self.journal.entries >= max(self.compact_min_entries, self._snapshot_size)

    def maybe_compact(self) -> None:
        if self._compacting or not self.needs_compaction():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._compacting = True

        async def run() -> None:
            try:
                await asyncio.to_thread(self.persist)
            except Exception:
                log.exception("compacting %s failed", self.path)
            finally:
                self._compacting = False

        task = loop.create_task(run(), name=f"compact {self.file_name}")
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    # ---- load / persist ------------------------------------------------------------------
    def load(self) -> bool:
        if not super().load():
            return False
        self._snapshot_size = len(self.journal_table())
        if not self.journal.exists():
            return True
        table = self.journal_table()

        def apply(entry: dict[str, Any]) -> None:
            if "put" in entry:
                table[str(entry["put"])] = self.decode_entry(entry["value"])
            else:
                name = str(entry["del"])
                table.pop(name, None)
                self.on_replayed_delete(name)
            version = entry.get("dataVersion")
            if isinstance(version, dict):
                self.data_version.assign_new_one(DataVersion.from_json_dict(version))

        with self._lock:
            count = self.journal.replay(apply)
        log.info("replayed %d change(s) of %s from its journal", count, self.path)
        if os.path.exists(self.journal.old_path):
            self.persist()  # a compaction was cut short: finish it now
        return True

    def snapshot_state(self) -> Any:
        """Called with the table lock held: what encode_snapshot() turns into the file (a cheap
        copy; the default encodes right away)."""
        return self.encode()

    def encode_snapshot(self, state: Any) -> dict[str, Any]:
        return state

    def persist(self) -> None:
        """Blocking: compact (whole snapshot written, journal emptied). Shutdown, slave copies,
        the background compaction and tests call it."""
        journal = self.journal
        with journal.io_lock:
            with self._lock:
                journal.write_pending()  # the old journal must end where the snapshot is taken
                state = self.snapshot_state()
                size = len(self.journal_table())
                journal.rotate()
            obj = self.encode_snapshot(state)
            write_json_atomic(self.path, obj)
            journal.drop_old()
            self._snapshot_size = size
            self.compactions += 1

    async def persist_async(self) -> None:
        await asyncio.to_thread(self.persist)

    def close(self) -> None:
        self.journal.close()


_BACKGROUND: set[asyncio.Task[None]] = set()
