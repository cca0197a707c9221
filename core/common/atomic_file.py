"""Crash-safe replacement of small state files (configs, offsets, KV tables).

A write never leaves a half-written file: the data goes to a temp file that is fsync'd and
renamed over the target, then the directory is fsync'd so the rename survives a power cut.
With ``keep_backup`` the previous content first becomes ``<name>.bak`` (RocketMQ's
MixAll.string2File), so a main file damaged by anything else still leaves a good version.

``NewestSnapshotWriter`` orders writes that run on worker threads: snapshots are numbered
where they are taken (on the event loop), and one older than what is on disk is dropped. An
asyncio lock alone is not enough, because a cancelled request releases it while its thread is
still writing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

BAK_SUFFIX = ".bak"


def fsync_directory(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _snapshot_previous(target: Path) -> None:
    """Make the current content ``<target>.bak`` (a hard link: zero-copy and already durable)."""
    bak = target.with_name(target.name + BAK_SUFFIX)
    bak_tmp = bak.with_name(bak.name + ".tmp")
    bak_tmp.unlink(missing_ok=True)
    try:
        os.link(target, bak_tmp)
    except OSError:
        shutil.copyfile(target, bak_tmp)
        with open(bak_tmp, "rb") as f:
            os.fsync(f.fileno())
    os.replace(bak_tmp, bak)


def write_file_atomically(path: str | Path, data: bytes, *, keep_backup: bool = False) -> None:
    """Replace ``path`` with ``data``; readers see either the old or the new content."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if keep_backup and target.exists():
            _snapshot_previous(target)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)


class NewestSnapshotWriter:
    """Serialises snapshot writes; a snapshot older than the one already written is dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = 0
        self._written: dict[str, int] = {}

    def number(self) -> int:
        """Number a snapshot; call it where the snapshot is taken, in snapshot order."""
        self._taken += 1
        return self._taken

    def write(self, seq: int, path: str, write: Callable[[str, Any], None], payload: Any) -> bool:
        """Blocking: ``write(path, payload)`` unless a newer snapshot is already on disk."""
        with self._lock:
            if seq <= self._written.get(path, 0):
                return False
            write(path, payload)
            self._written[path] = seq
            return True

    async def write_async(self, path: str, write: Callable[[str, Any], None], payload: Any) -> bool:
        """Number the snapshot now (on the loop), write it on a worker thread."""
        return await asyncio.to_thread(self.write, self.number(), path, write, payload)
