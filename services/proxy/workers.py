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
import signal
import sys
import time

log = logging.getLogger("orbitmq.proxy.workers")

WORKER_READY = "orbitmq proxy worker ready on port"
WORKER_METRICS = "orbitmq proxy worker metrics on port"
WORKER_START_TIMEOUT_SECONDS = 60.0
WORKER_STOP_TIMEOUT_SECONDS = 30.0
# A worker that keeps dying right after its start is restarted at most this often.
RESTART_INTERVAL_SECONDS = 2.0


class ProxyWorker:
    """One `orbitmq proxy --worker` child: its start, its output forwarded, its stop."""

    def __init__(self, index: int, argv: list[str], metrics_host: str) -> None:
        self.index = index
        self.name = f"proxy-worker-{index}"
        self.argv = argv
        self.metrics_host = metrics_host
        self.metrics_port: int | None = None
        self.started_at = 0.0
        self._proc: asyncio.subprocess.Process | None = None
        self._forward: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        self.started_at = time.monotonic()
        # A session of its own: a terminal's Ctrl-C reaches the supervisor only, which stops the
        # workers; stdin is the pipe whose EOF tells a worker the supervisor is gone.
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "orbitmq", "proxy", "--worker", *self.argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, start_new_session=True)
        assert self._proc.stdout is not None
        try:
            async with asyncio.timeout(WORKER_START_TIMEOUT_SECONDS):
                while True:
                    line = (await self._proc.stdout.readline()).decode("utf-8", "replace")
                    if not line:
                        code = await self._proc.wait()
                        raise RuntimeError(f"{self.name} exited during start-up (exit code {code})")
                    if line.startswith(WORKER_READY):
                        break
                    if line.startswith(WORKER_METRICS):
                        self.metrics_port = int(line.rsplit(" ", 1)[1])
                        continue
                    sys.stdout.write(line)
        except BaseException:
            await self.stop()
            raise
        self._forward = asyncio.create_task(self._forward_output(), name=f"{self.name}-output")

    async def _forward_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            sys.stdout.write(line.decode("utf-8", "replace"))
            sys.stdout.flush()

    async def wait(self) -> int:
        assert self._proc is not None
        return await self._proc.wait()

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), WORKER_STOP_TIMEOUT_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
        if self._forward is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._forward, 5)
            self._forward = None


class ProxyWorkerPool:
    """N workers, kept at N: a worker that dies is started again."""

    def __init__(self, count: int, argv: list[str], metrics_host: str = "127.0.0.1") -> None:
        if count < 1:
            raise ValueError(f"--workers must be at least 1, got {count}")
        self.workers = [ProxyWorker(i, argv, metrics_host) for i in range(count)]
        self.restarts = 0

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid is not None]

    def readiness(self) -> bool | str:
        down = [w.name for w in self.workers if not w.running]
        return True if not down else f"not running: {', '.join(down)}"

    async def start(self) -> None:
        from orbitmq.common.metrics import hub

        try:
            await asyncio.gather(*(w.start() for w in self.workers))
        except BaseException:
            await self.shutdown()
            raise
        for w in self.workers:
            if w.metrics_port:
                hub().add_remote(w.metrics_host, w.metrics_port, w.name)

    async def supervise(self, stop: asyncio.Event) -> None:
        """Until ``stop``: start again each worker that exits."""
        stopping = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
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
                    await self._restart(worker, stop)
        finally:
            stopping.cancel()

    async def _restart(self, worker: ProxyWorker, stop: asyncio.Event) -> None:
        from orbitmq.common.metrics import hub

        if worker.metrics_port:
            hub().remove_remote(worker.metrics_host, worker.metrics_port)
            worker.metrics_port = None
        await worker.stop()
        wait = RESTART_INTERVAL_SECONDS - (time.monotonic() - worker.started_at)
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
        while not stop.is_set():
            try:
                await worker.start()
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("%s did not start again: %s; retrying", worker.name, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RESTART_INTERVAL_SECONDS)
                continue
            self.restarts += 1
            if worker.metrics_port:
                hub().add_remote(worker.metrics_host, worker.metrics_port, worker.name)
            return

    async def shutdown(self) -> None:
        from orbitmq.common.metrics import hub

        for w in self.workers:
            if w.metrics_port:
                hub().remove_remote(w.metrics_host, w.metrics_port)
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)
