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
