"""Run ``orbitmq <service>`` subprocesses for integration tests and always clean them up.

Each process writes stdout and stderr to its own log file under the test's tmp_path; the
``procs`` fixture prints those logs when a test fails, and stops every process at teardown
(SIGTERM, then SIGKILL if it lingers).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from orbitmq.common.child_process import stop_popen

from .net import port_open

DEFAULT_READY_TIMEOUT = 15.0
STOP_GRACE = 5.0


class ProcessFailed(RuntimeError):
    """A service exited or never became ready; the message carries its log tail."""


class ManagedProcess:
    """One running ``orbitmq`` service."""

    def __init__(self, name: str, argv: list[str], log_path: Path, popen: subprocess.Popen[bytes],
                 log_start: int = 0) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.popen = popen
        self.log_start = log_start  # a restart appends to the same log: readiness looks past here

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def is_running(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def own_log_text(self) -> str:
        """What this run of the service logged (not an earlier run's lines in the same file)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                return f.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def _ready(self, ready_port: tuple[str, int] | None, ready_text: str | None) -> bool:
        if ready_text is not None and ready_text not in self.own_log_text():
            return False
        return ready_port is None or port_open(*ready_port)

    def _not_ready_error(self, why: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} (pid {self.pid}) {why}; log {self.log_path}:\n{self.log_tail()}")

    def wait_ready(self, ready_port: tuple[str, int] | None = None, ready_text: str | None = None,
                   timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready(ready_port, ready_text):
            if not self.is_running():
                raise self._not_ready_error(f"exited with code {self.returncode} before it was ready")
            if time.monotonic() >= deadline:
                raise self._not_ready_error(f"not ready after {timeout:.1f}s")
            time.sleep(0.05)

    async def async_wait_ready(self, ready_port: tuple[str, int] | None = None,
                               ready_text: str | None = None,
                               timeout: float = DEFAULT_READY_TIMEOUT) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self._ready, ready_port, ready_text):
            if not self.is_running():
                raise self._not_ready_error(f"exited with code {self.returncode} before it was ready")
            if time.monotonic() >= deadline:
                raise self._not_ready_error(f"not ready after {timeout:.1f}s")
            await asyncio.sleep(0.05)

    def signal(self, sig: int) -> None:
        if self.is_running():
            self.popen.send_signal(sig)

    def stop(self, timeout: float = STOP_GRACE) -> int:
        """SIGTERM, wait, then SIGKILL; returns the exit code."""
        return stop_popen(self.popen, timeout)

    def kill(self) -> int:
        """SIGKILL at once (a crash, for chaos tests)."""
        if self.is_running():
            self.popen.kill()
        return self.popen.wait(STOP_GRACE)

    async def async_stop(self, timeout: float = STOP_GRACE) -> int:  # noqa: ASYNC109
        return await asyncio.to_thread(self.stop, timeout)


class ProcessRunner:
    """Starts ``python -m orbitmq <service> args...`` with HOME pointed into the test's tmp dir."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.home = self.workdir / "home"
        self.home.mkdir(exist_ok=True)
        self.extra_env = dict(env or {})
        self.processes: list[ManagedProcess] = []
        self._counter = 0

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        merged = dict(os.environ)
        merged.update({"HOME": str(self.home), "PYTHONUNBUFFERED": "1"})
        merged.update(self.extra_env)
        merged.update(env or {})
        return merged

    def spawn(self, service: str, args: Sequence[str] = (), *, name: str | None = None,
              env: dict[str, str] | None = None, prefix: Sequence[str] = ()) -> ManagedProcess:
        """Start without waiting for readiness; ``prefix`` must exec the command (same PID),
        e.g. ``ip netns exec NAME``."""
        self._counter += 1
        name = name or f"{service}-{self._counter}"
        log_path = self.workdir / f"{name}.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        args = [str(a) for a in args]
        if service == "proxy" and not any(a.startswith("remotingListenPort=") for a in args):
            # The proxy's Remoting port defaults to 8080 (upstream's): tests running side by side
            # take an ephemeral one unless they name one.
            args.append("remotingListenPort=0")
        argv = [*prefix, sys.executable, "-m", "orbitmq", service, *args]
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=self.workdir, env=self._env(env), start_new_session=True)
        proc = ManagedProcess(name, argv, log_path, popen, log_start)
        self.processes.append(proc)
        return proc

    def start(self, service: str, args: Sequence[str] = (), *, ready_port: tuple[str, int] | int | None = None,
              ready_text: str | None = None, timeout: float = DEFAULT_READY_TIMEOUT, name: str | None = None,
              env: dict[str, str] | None = None) -> ManagedProcess:
        """Start and block until ``ready_port`` accepts connections and/or ``ready_text`` is logged."""
        proc = self.spawn(service, args, name=name, env=env)
        port = ("127.0.0.1", ready_port) if isinstance(ready_port, int) else ready_port
        proc.wait_ready(port, ready_text, timeout)
        return proc

    async def astart(self, service: str, args: Sequence[str] = (), *,
                     ready_port: tuple[str, int] | int | None = None, ready_text: str | None = None,
                     timeout: float = DEFAULT_READY_TIMEOUT,  # noqa: ASYNC109
                     name: str | None = None, env: dict[str, str] | None = None,
                     prefix: Sequence[str] = ()) -> ManagedProcess:
        """``start`` for async tests: waits without blocking the event loop."""
        proc = self.spawn(service, args, name=name, env=env, prefix=prefix)
        port = ("127.0.0.1", ready_port) if isinstance(ready_port, int) else ready_port
        await proc.async_wait_ready(port, ready_text, timeout)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.processes):
            try:
                proc.stop()
            except Exception:  # teardown must reach every process
                try:
                    proc.kill()
                except Exception:
                    pass

    def report(self) -> str:
        parts = []
        for proc in self.processes:
            parts.append(f"----- {proc.name} (pid {proc.pid}, exit {proc.returncode}) {proc.log_path} -----\n"
                         f"{proc.log_tail(200)}")
        # Last, where a truncated CI log still shows it: who ran, and their warnings in short.
        parts.append("----- summary -----")
        for proc in self.processes:
            warnings = [line for line in proc.log_text().splitlines() if " WARNING " in line or " ERROR " in line]
            parts.append(f"{proc.name}: pid {proc.pid}, exit {proc.returncode}, {len(warnings)} warnings/errors"
                         + "".join(f"\n    {line[:240]}" for line in warnings[-5:]))
        return "\n".join(parts)


@contextlib.contextmanager
def running(workdir: Path, env: dict[str, str] | None = None) -> Iterator[ProcessRunner]:
    """A ProcessRunner for a module- or session-scoped fixture, where the per-test ``procs`` cannot
    serve: if the block raises, its services' logs are printed at once (a fixture's setup error
    shows only what setup printed), and every service is stopped on exit."""
    runner = ProcessRunner(workdir, env)
    try:
        yield runner
    except BaseException:
        print("\n===== service logs =====\n" + runner.report(), file=sys.stderr)
        raise
    finally:
        runner.stop_all()
