"""EpochFileCache: which master epoch wrote which CommitLog range (RocketMQ's EpochFileCache).

Each entry says "from ``start_offset`` on, the log was written by the master of ``epoch``";
an entry ends where the next one starts (the last one at Long.MAX_VALUE). Slaves compare their
entries with the master's at handshake time to find where their logs diverged (AutoSwitchHAClient#doTruncate).

The file (``storePathEpochFile``, default ``<storePathRootDir>/epochFileCheckpoint``) is the
text format of RocketMQ's CheckpointFile: entry count, CRC32 of the entry lines as
``(int)(crc & 0x7FFFFFFF)``, then one ``<epoch>-<startOffset>`` line per entry. Every write
rewrites the whole file atomically (temp + fsync + rename) and keeps the previous version as
``.bak``, read when the main file is missing, empty or fails its count/CRC check.

Methods are synchronous and cheap (a few entries); ``load`` and the writers touch the disk, so
callers on the event loop run them with asyncio.to_thread when the disk may be slow.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from dataclasses import dataclass

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1
_LINE_SEP = os.linesep


@dataclass
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX

    def copy(self) -> EpochEntry:
        return EpochEntry(self.epoch, self.start_offset, self.end_offset)


def _entries_text(entries: list[EpochEntry]) -> str:
    return "".join(f"{e.epoch}-{e.start_offset}{_LINE_SEP}" for e in entries)


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF


def encode_epoch_file(entries: list[EpochEntry]) -> str:
    """The CheckpointFile text of ``entries``."""
    body = _entries_text(entries)
    return f"{len(entries)}{_LINE_SEP}{_crc(body)}{_LINE_SEP}{body}"


def decode_epoch_file(text: str) -> list[EpochEntry] | None:
    """Entries of a CheckpointFile text; None when it is empty, malformed or fails its checks."""
    lines = text.splitlines()
    if len(lines) < 2:
        return None
    try:
        count = int(lines[0].strip())
        crc = int(lines[1].strip())
        entries: list[EpochEntry] = []
        for line in lines[2:]:
            line = line.strip()
            if not line:
                continue
            epoch_s, sep, start_s = line.partition("-")
            if not sep:
                return None
            entries.append(EpochEntry(int(epoch_s), int(start_s)))
    except ValueError:
        return None
    if count != len(entries):
        return None
    if crc != 0 and crc != _crc(_entries_text(entries)):
        return None
    return entries


def find_consistent_point(local: list[EpochEntry], local_max: int,
                          master: list[EpochEntry], master_max: int) -> int:
    """Where a slave's log and the master's agree up to (EpochFileCache#findConsistentPoint); -1 when nowhere.

    Walks the local epochs from the newest: at the first one the master also has with the
    same start offset, the point is min(local end, master end), the last entry of each side
    ending at that side's max offset.
    """
    def ends(entries: list[EpochEntry], max_offset: int) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for i, e in enumerate(entries):
            end = entries[i + 1].start_offset if i + 1 < len(entries) else max_offset
            out[e.epoch] = (e.start_offset, end)
        return out

    master_view = ends(master, master_max)
    local_view = ends(local, local_max)
    for entry in reversed(local):
        start, local_end = local_view[entry.epoch]
        found = master_view.get(entry.epoch)
        if found is not None and found[0] == start:
            return min(local_end, found[1])
    return -1


class EpochFileCache:
    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        self._lock = threading.RLock()

    # --- persistence ---------------------------------------------------------------------
    def load(self) -> bool:
        """Read the file, falling back to ``.bak``; False when neither holds valid entries."""
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            entries = decode_epoch_file(text)
            if entries is None:
                log.warning("epoch file %s is empty or corrupt; trying the backup", candidate)
                continue
            with self._lock:
                self._entries = self._recompute(entries)
            return True
        with self._lock:
            self._entries = []
        return False

    def _flush(self) -> None:
        """Rewrite the file atomically; the previous content becomes ``.bak``."""
        text = encode_epoch_file(self._entries)
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(self.path):
            bak_tmp = self.path + ".bak.tmp"
            with open(self.path, "rb") as src, open(bak_tmp, "wb") as dst:
                dst.write(src.read())
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(bak_tmp, self.path + ".bak")
        os.replace(tmp, self.path)
        try:
            dfd = os.open(directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    @staticmethod
    def _recompute(entries: list[EpochEntry]) -> list[EpochEntry]:
        """Fresh copies with end offsets derived from the next start (last: Long.MAX_VALUE)."""
        out = [EpochEntry(e.epoch, e.start_offset) for e in entries]
        for i in range(len(out) - 1):
            out[i].end_offset = out[i + 1].start_offset
        return out

    # --- writes --------------------------------------------------------------------------
    def append_entry(self, entry: EpochEntry) -> bool:
        """Append unless the epoch and the start do not both exceed the last entry's."""
        with self._lock:
            if self._entries:
                last = self._entries[-1]
                if entry.epoch <= last.epoch or entry.start_offset <= last.start_offset:
                    log.warning("epoch entry %s refused: the last entry is %s", entry, last)
                    return False
            self._entries = self._recompute([*self._entries, entry])
            self._flush()
            return True

    def set_entries(self, entries: list[EpochEntry]) -> None:
        """Replace everything (tests and repairs)."""
        with self._lock:
            self._entries = self._recompute(entries)
            self._flush()

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Drop entries starting at or after ``offset`` (the log was cut there)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < offset]
            if len(kept) != len(self._entries):
                self._entries = self._recompute(kept)
                self._flush()

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Drop entries whose epoch is ``epoch`` or newer."""
        with self._lock:
            kept = [e for e in self._entries if e.epoch < epoch]
            if len(kept) != len(self._entries):
                self._entries = self._recompute(kept)
                self._flush()

    def truncate_prefix_by_offset(self, min_offset: int) -> None:
        """Drop entries ending before ``min_offset`` (end <= min - 1): their CommitLog files expired."""
        with self._lock:
            kept = [e for e in self._entries if e.end_offset > min_offset - 1]
            if len(kept) != len(self._entries):
                self._entries = self._recompute(kept)
                self._flush()

    # --- lookups -------------------------------------------------------------------------
    def all_entries(self) -> list[EpochEntry]:
        with self._lock:
            return [e.copy() for e in self._entries]

    def size(self) -> int:
        return len(self._entries)

    def last_epoch(self) -> int:
        entries = self._entries
        return entries[-1].epoch if entries else -1

    def last_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1].copy() if entries else None

    def first_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0].copy() if entries else None

    def get_entry(self, epoch: int) -> EpochEntry | None:
        for e in self._entries:
            if e.epoch == epoch:
                return e.copy()
        return None

    def find_entry_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry whose [start, end) holds ``offset``; the last one also takes its end."""
        entries = self._entries
        for i, e in enumerate(entries):
            if e.start_offset <= offset < e.end_offset or (i == len(entries) - 1 and e.start_offset <= offset):
                return e.copy()
        return None

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The entry after the one of ``epoch``."""
        entries = self._entries
        for i, e in enumerate(entries):
            if e.epoch == epoch and i + 1 < len(entries):
                return entries[i + 1].copy()
        return None

    def find_consistent_point(self, local_max: int, master: list[EpochEntry], master_max: int) -> int:
        return find_consistent_point(self._entries, local_max, master, master_max)
