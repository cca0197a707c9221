"""A service run as a child `python -m orbitmq ...` of another (orbitmq local's broker, the
proxy's workers): started until it prints its ready line, its output forwarded, stopped in order.

The child's stdin is a pipe only the parent writes to: when the parent goes away, even by
SIGKILL, the child reads EOF and shuts itself down (``orbitmq.common.runtime.watch_parent``), so
it never outlives its parent. It runs in a session of its own, so a terminal's Ctrl-C reaches
the parent only, which then stops its children in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys


class ServiceChild:
    """``python -m orbitmq ARGV``; ready once it prints ``<ready> <port>``, and ``<metrics> <port>``
    (its own /metrics on a free port) before that when it exports any."""

    def __init__(self, what: str, argv: list[str], ready: str, metrics: str, *, start_timeout: float,
                 stop_timeout: float) -> None:
        self.what = what
        self.argv = argv
        self.ready = ready
        self.metrics = metrics
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self.metrics_port: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._forward: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        """Started (it printed its ready line) and not exited."""
        return self.port is not None and self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        self.port = self.metrics_port = None
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "orbitmq", *self.argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, start_new_session=True)
        assert self._proc.stdout is not None
        try:
            async with asyncio.timeout(self.start_timeout):
                while True:
                    line = (await self._proc.stdout.readline()).decode("utf-8", "replace")
                    if not line:
                        code = await self._proc.wait()
                        raise RuntimeError(f"{self.what} exited during start-up (exit code {code})")
                    if line.startswith(self.ready):
                        self.port = int(line.rsplit(" ", 1)[1])
                        break
                    if line.startswith(self.metrics):
                        self.metrics_port = int(line.rsplit(" ", 1)[1])
                        continue
                    sys.stdout.write(line)
        except BaseException:
            await self.stop()
            raise
        self._forward = asyncio.create_task(self._forward_output(), name=f"{self.what} output")

    async def _forward_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            sys.stdout.write(line.decode("utf-8", "replace"))
            sys.stdout.flush()

    async def wait(self) -> int:
        """The child's exit code once it exits (on its own only if something went wrong)."""
        if self._proc is None:
            return 0
        return await self._proc.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; a no-op when not started."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.stop_timeout)
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


def stop_popen(popen: subprocess.Popen, timeout: float) -> int:
    """SIGTERM, then SIGKILL if it lingers past ``timeout``; returns the exit code. For the
    synchronous launchers (the benches' JVMs, the tests' process runner), which stop by PID."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout)
    return popen.returncode
