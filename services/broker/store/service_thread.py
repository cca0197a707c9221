"""ServiceThread: RocketMQ's stoppable worker thread with wakeup(), shared by the flush and
warm-up services (they block in the kernel or in fdatasync, so they are threads, not tasks)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ServiceThread:
    """A stoppable worker thread with wakeup(), like RocketMQ's ServiceThread."""

    name = "ServiceThread"

    def __init__(self) -> None:
        self._stopped = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_safe, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def wait_for_running(self, interval_s: float) -> None:
        self._wake.wait(interval_s)
        self._wake.clear()

    def _run_safe(self) -> None:
        try:
            self.run()
        except Exception:
            log.exception("%s stopped by an error", self.name)

    def run(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
