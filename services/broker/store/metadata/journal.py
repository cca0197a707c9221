"""The append-only change journal beside a metadata snapshot (config/topics.json.journal, ...).

Upstream rewrites the whole topics.json on every change (ConfigManager#persist, reached from
TopicConfigManager#updateTopicConfig through its per-topic persist stub), so one creation costs
as much as the table is large. Here a change appends one JSON line to ``<file>.journal`` and
fsyncs it (changes that arrive during an fsync share the next one), and the snapshot is
rewritten only when the journal has as many lines as the last snapshot had entries (at least
10,000): the cost of a rewrite is spread over as many changes as it writes entries, O(1) per
change, and a restart replays at most that many lines.

Compaction: flush what is pending, rename the journal to ``<file>.journal.old`` and start a new
one (both under the table lock, so the old journal ends exactly where the snapshot is taken),
write the snapshot atomically, delete the old journal. Loading reads the snapshot, then replays
``.journal.old`` and ``.journal`` in order; every line is a whole put or delete carrying the
dataVersion after it, so replaying lines the snapshot already holds changes nothing. A kill -9
at any step leaves the snapshot plus journals that replay to the last acknowledged change; a
torn last line (a power cut in the middle of a write) is dropped and cut off on load.

Line format: ``{"put": name, "value": {...}, "dataVersion": {...}}`` or ``{"del": name,
"dataVersion": {...}}``. A broker that stopped cleanly leaves no journal (shutdown compacts),
so its config/ is what an Apache broker reads.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from orbitmq.common.atomic_file import fsync_directory

log = logging.getLogger(__name__)

JOURNAL_SUFFIX = ".journal"
OLD_SUFFIX = ".old"


def encode_put(name: str, value: dict[str, Any], data_version: dict[str, Any]) -> str:
    return json.dumps({"put": name, "value": value, "dataVersion": data_version},
                      ensure_ascii=False, separators=(",", ":")) + "\n"


def encode_delete(name: str, data_version: dict[str, Any]) -> str:
    return json.dumps({"del": name, "dataVersion": data_version}, ensure_ascii=False, separators=(",", ":")) + "\n"


class Journal:
    """One table's journal files; the owner calls record() under its table lock."""

    def __init__(self, snapshot_path: str) -> None:
        self.path = snapshot_path + JOURNAL_SUFFIX
        self.old_path = self.path + OLD_SUFFIX
        self.io_lock = threading.Lock()  # file operations: appends, rotation
        self._pending_lock = threading.Lock()
        self._pending: list[str] = []
        self._recorded = 0  # tickets handed out
        self._durable = 0  # highest ticket on disk
        self._fh: Any = None
        self.entries = 0  # lines in the current journal (written or pending)

    # ---- recording / flushing ---------------------------------------------------------------
    def record(self, line: str) -> int:
        with self._pending_lock:
            self._pending.append(line)
            self._recorded += 1
            self.entries += 1
            return self._recorded

    @property
    def recorded(self) -> int:
        return self._recorded

    def is_durable(self, ticket: int) -> bool:
        return self._durable >= ticket

    def _open(self) -> Any:
        if self._fh is None:
            created = not os.path.exists(self.path)
            self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open between appends
            if created:
                fsync_directory(os.path.dirname(self.path) or ".")
        return self._fh

    def write_pending(self) -> None:
        """Blocking, with io_lock held: append and fsync every pending line."""
        with self._pending_lock:
            lines, self._pending = self._pending, []
            last = self._recorded
        if lines:
            fh = self._open()
            fh.write("".join(lines).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        self._durable = max(self._durable, last)

    def flush(self, ticket: int | None = None) -> None:
        """Blocking: make every change up to ``ticket`` (default: all recorded) durable."""
        if ticket is None:
            ticket = self._recorded
        if self._durable >= ticket:
            return
        with self.io_lock:
            if self._durable < ticket:
                self.write_pending()

    # ---- compaction -------------------------------------------------------------------------
    def rotate(self) -> None:
        """With io_lock and the table lock held, pending lines written: the current journal
        becomes .journal.old (appended to one a failed compaction left), a new one starts."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if os.path.exists(self.path):
            if os.path.exists(self.old_path):
                with open(self.path, "rb") as src, open(self.old_path, "ab") as dst:
                    dst.write(src.read())
                    dst.flush()
                    os.fsync(dst.fileno())
                os.unlink(self.path)
            else:
                os.replace(self.path, self.old_path)
            fsync_directory(os.path.dirname(self.path) or ".")
        self.entries = len(self._pending)

    def drop_old(self) -> None:
        """After the snapshot holding everything in .journal.old is on disk."""
        if os.path.exists(self.old_path):
            os.unlink(self.old_path)
            fsync_directory(os.path.dirname(self.path) or ".")

    def close(self) -> None:
        with self.io_lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    # ---- replay -----------------------------------------------------------------------------
    def exists(self) -> bool:
        return os.path.exists(self.path) or os.path.exists(self.old_path)

    def replay(self, apply: Callable[[dict[str, Any]], None]) -> int:
        """Apply every whole line of .journal.old then .journal; returns how many. A torn or
        unparsable tail of the current journal is cut off so the next append starts clean."""
        count = 0
        for path in (self.old_path, self.path):
            if not os.path.exists(path):
                continue
            good_end = 0
            for end, entry in _lines(path):
                if entry is None:
                    log.warning("journal %s: dropping an unreadable line at byte %d and what follows", path, good_end)
                    break
                apply(entry)
                good_end = end
                count += 1
            size = os.path.getsize(path)
            if good_end < size:
                with open(path, "r+b") as fh:
                    fh.truncate(good_end)
                    os.fsync(fh.fileno())
            if path == self.path:
                self.entries = count
        return count


def _lines(path: str) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """(byte offset after the line, parsed entry or None when torn/unparsable) per line."""
    offset = 0
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                yield offset, None
                return
            offset += len(raw)
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                yield offset - len(raw), None
                return
            if not isinstance(entry, dict) or not (("put" in entry and isinstance(entry.get("value"), dict))
                                                   or "del" in entry):
                yield offset - len(raw), None
                return
            yield offset, entry
