"""AllocateMappedFileService: creates the next CommitLog segment before the writer needs it.

Creating a segment means open + fallocate + mmap; for a 1 GiB CommitLog file the fallocate
alone can take long enough to stall every writer at rollover. A background thread prepares
the segment that follows the one just opened, so rollover only swaps a ready object in.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

from orbitmq.broker.store.mapped_file import MappedFile

log = logging.getLogger(__name__)


class AllocateMappedFileService:
    def __init__(self, warm: bool = False) -> None:
        # Segments made here are pre-faulted with zeros (see mapped_file._create_segment).
        self.warm = warm
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[Future, int]] = {}
        self._stopped = False

    def _create(self, path: str, size: int, fut: Future) -> None:
        try:
            fut.set_result(MappedFile(path, size, warm=self.warm))
        except BaseException as exc:  # reported to whoever asks for the file
            fut.set_exception(exc)

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
        return MappedFile(path, size, warm=warm and self.warm)

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
