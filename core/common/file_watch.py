"""FileWatchService: notice that files changed by their content, for certificate reloads.

As upstream's FileWatchService: a digest of each file every interval; a file that is missing or
unreadable keeps its last digest, so deleting and re-creating a certificate during a rotation
reads as one change, not two. The digests are taken on a worker thread (file reads never run on
the event loop). ``on_change(changed_paths)`` answers whether the change is settled; when it is
not (e.g. the certificate was replaced before its key and the pair does not load yet), it is
called again every interval until it is, with the paths that changed meanwhile added.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from orbitmq.common.aio import cancel_and_wait

log = logging.getLogger("orbitmq.file_watch")

OnChange = Callable[[set[str]], Awaitable[bool]]


def reload_on_change(reload: Callable[[], None], logger: logging.Logger) -> OnChange:
    """An ``on_change`` for TLS files: run the blocking ``reload`` on a worker thread. When the
    files do not load yet (typically half a rotation: the certificate written, its key not yet),
    the old context stays, a warning is logged once per set of changed files, and the change stays
    unsettled, so it is tried again on every look until the files make a pair."""
    failed: set[str] = set()

    async def on_change(changed: set[str]) -> bool:
        nonlocal failed
        try:
            await asyncio.to_thread(reload)
        except (OSError, ValueError, ssl.SSLError) as exc:
            if changed != failed:
                logger.warning("TLS files changed (%s) but do not load yet, serving the old certificate: %s",
                               ", ".join(sorted(changed)), exc)
                failed = set(changed)
            return False
        failed = set()
        logger.info("TLS certificate reloaded after a change of %s: new handshakes get it", ", ".join(sorted(changed)))
        return True

    return on_change


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


class FileWatchService:
    def __init__(self, paths: Iterable[str], interval_s: float, on_change: OnChange, name: str = "FileWatchService") -> None:
        self.paths = sorted({p for p in paths if p})
        self.interval_s = interval_s
        self.on_change = on_change
        self.name = name
        self._digests: dict[str, str | None] = {}
        self._unsettled: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._digests = await asyncio.to_thread(self._read_all)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        log.info("%s watching %s every %.1fs", self.name, ", ".join(self.paths), self.interval_s)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def _read_all(self) -> dict[str, str | None]:
        return {p: _digest(p) for p in self.paths}

    async def check(self) -> None:
        """One look: compare digests, tell ``on_change`` about what changed (or is still unsettled)."""
        now = await asyncio.to_thread(self._read_all)
        for path, digest in now.items():
            if digest is not None and digest != self._digests.get(path):
                self._digests[path] = digest
                self._unsettled.add(path)
        if self._unsettled:
            changed = set(self._unsettled)
            try:
                settled = await self.on_change(changed)
            except Exception:  # the watch goes on; the next change may settle it
                log.exception("%s: handling a change of %s failed", self.name, ", ".join(sorted(changed)))
                settled = False
            if settled:
                self._unsettled -= changed

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.check()
