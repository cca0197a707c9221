"""`orbitmq proxy --workers N`: N proxy processes serving one gRPC port (SO_REUSEPORT).

One event loop uses one core, and the proxy keeps nothing another proxy needs (RocketMQ's
proxies scale out behind a load balancer for the same reason), so one process per core uses
every core. The kernel spreads new connections over the workers; a gRPC client keeps its one
connection, Telemetry included, on one worker, as it would keep one proxy behind a load balancer.

The supervisor (the command's own process) serves no gRPC: it starts the workers, serves their
merged /metrics on ``metricsPromExporterPort`` (each sample labelled ``process=proxy-worker-<i>``),
restarts a worker that dies, and stops them all on SIGTERM. A worker reads a pipe from the
supervisor and stops when the supervisor is gone, even by SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from orbitmq.common.child_process import ServiceChild
from orbitmq.common.metrics import hub

log = logging.getLogger("orbitmq.proxy.workers")

WORKER_READY = "orbitmq proxy worker ready on port"
WORKER_METRICS = "orbitmq proxy worker metrics on port"
WORKER_START_TIMEOUT_SECONDS = 60.0
WORKER_STOP_TIMEOUT_SECONDS = 30.0
# A worker that keeps dying right after its start is restarted at most this often.
RESTART_INTERVAL_SECONDS = 2.0


class ProxyWorker(ServiceChild):
    """One `orbitmq proxy --worker` child (orbitmq.common.child_process), its metrics host noted."""

    def __init__(self, index: int, argv: list[str], metrics_host: str) -> None:
        self.name = f"proxy-worker-{index}"
        super().__init__(self.name, ["proxy", "--worker", *argv], WORKER_READY, WORKER_METRICS,
                         start_timeout=WORKER_START_TIMEOUT_SECONDS, stop_timeout=WORKER_STOP_TIMEOUT_SECONDS)
        self.metrics_host = metrics_host
        self.started_at = 0.0

    async def start(self) -> None:
        self.started_at = time.monotonic()
        await super().start()


class ProxyWorkerPool:
    """N workers, kept at N while started: a worker that dies is started again. Its workers'
    /metrics join this process's endpoint and its readiness joins /ready while it runs."""

    def __init__(self, count: int, argv: list[str], metrics_host: str = "127.0.0.1") -> None:
        if count < 1:
            raise ValueError(f"--workers must be at least 1, got {count}")
        self.workers = [ProxyWorker(i, argv, metrics_host) for i in range(count)]
        self._readiness_name = f"proxy workers:{id(self):x}"
        self._stop = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid is not None]

    def readiness(self) -> bool | str:
        down = [w.name for w in self.workers if not w.running]
        return True if not down else f"not running: {', '.join(down)}"

    async def start(self) -> None:
        """Start every worker and, until ``shutdown``, keep them running."""
        try:
            await asyncio.gather(*(w.start() for w in self.workers))
        except BaseException:
            await self.shutdown()
            raise
        for w in self.workers:
            _add_metrics(w)
        hub().add_readiness(self._readiness_name, self.readiness)
        self._supervisor = asyncio.create_task(self._supervise(), name="ProxyWorkerSupervisor")

    async def _supervise(self) -> None:
        stopping = asyncio.create_task(self._stop.wait())
        try:
            while not self._stop.is_set():
                exits = {asyncio.create_task(w.wait()): w for w in self.workers if w.running}
                done, _ = await asyncio.wait({stopping, *exits}, return_when=asyncio.FIRST_COMPLETED)
                for task in exits:
                    task.cancel()
                if stopping in done:
                    break
                for task in done:
                    worker = exits[task]
                    log.warning("%s (pid %s) exited with code %s; starting it again", worker.name, worker.pid,
                                task.result())
                    await self._restart(worker)
        finally:
            stopping.cancel()

    async def _restart(self, worker: ProxyWorker) -> None:
        _remove_metrics(worker)
        await worker.stop()
        wait = RESTART_INTERVAL_SECONDS - (time.monotonic() - worker.started_at)
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait)
        while not self._stop.is_set():
            try:
                await worker.start()
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("%s did not start again: %s; retrying", worker.name, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), RESTART_INTERVAL_SECONDS)
                continue
            _add_metrics(worker)
            return

    async def shutdown(self) -> None:
        self._stop.set()
        if self._supervisor is not None:
            with contextlib.suppress(Exception):
                await self._supervisor
            self._supervisor = None
        hub().remove_readiness(self._readiness_name)
        for w in self.workers:
            _remove_metrics(w)
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)


def _add_metrics(worker: ProxyWorker) -> None:
    if worker.metrics_port:
        hub().add_remote(worker.metrics_host, worker.metrics_port, worker.name)


def _remove_metrics(worker: ProxyWorker) -> None:
    if worker.metrics_port:
        hub().remove_remote(worker.metrics_host, worker.metrics_port)
        worker.metrics_port = None
