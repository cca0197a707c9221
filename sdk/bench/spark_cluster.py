"""A standalone Spark cluster and the JVM processes of the Spark benchmark, stopped by PID.

The master and workers come from pyspark's own launcher (``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``, shipped in the pip package), on
free loopback ports, each worker with its own work dir and one executor per application. An
executor (CoarseGrainedExecutorBackend) is a child of its worker, found through /proc, so a
caller can kill -9 one and :meth:`SparkStandalone.stop` leaves none behind.

`orbitmq bench spark` runs on it, and so do the Spark tests (tests/support/spark_standalone.py
subclasses :class:`SparkStandalone` so that its processes join a test's ProcessRunner).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orbitmq.common.child_process import stop_popen
from orbitmq.common.net import free_port

BOOT_TIMEOUT = 60.0
STOP_GRACE = 10.0
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class Proc(Protocol):
    """What the launchers need of a process (ChildProcess here, ManagedProcess in the tests)."""

    name: str

    @property
    def pid(self) -> int: ...

    def is_running(self) -> bool: ...

    def own_log_text(self) -> str: ...

    def log_tail(self, lines: int = 60) -> str: ...

    def wait_ready(self, ready_port: tuple[str, int] | None = None, ready_text: str | None = None,
                   timeout: float = BOOT_TIMEOUT) -> None: ...

    def stop(self, timeout: float = STOP_GRACE) -> int: ...


class ChildProcess:
    """One child process (a JVM, an orbitmq service) in a session of its own; stdout and stderr go
    to ``log_path``."""

    def __init__(self, name: str, argv: list[str], log_path: Path, popen: subprocess.Popen[bytes]) -> None:
        self.name, self.argv, self.log_path, self.popen = name, argv, log_path, popen

    @classmethod
    def launch(cls, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> ChildProcess:
        log_path = cwd / f"{name}.log"
        with open(log_path, "ab") as log_file:  # spark-class and java exec: the PID is the JVM's
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=cwd, env=env, start_new_session=True)
        return cls(name, argv, log_path, popen)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def is_running(self) -> bool:
        return self.popen.poll() is None

    def own_log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.own_log_text().splitlines()[-lines:])

    def wait_ready(self, ready_port: tuple[str, int] | None = None, ready_text: str | None = None,
                   timeout: float = BOOT_TIMEOUT) -> None:
        """Until ``ready_text`` is logged and ``ready_port`` accepts; fails with the log's tail."""
        deadline = time.monotonic() + timeout
        while not ((ready_text is None or ready_text in self.own_log_text())
                   and (ready_port is None or port_open(*ready_port))):
            if not self.is_running():
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} before it was ready:\n"
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self, timeout: float = STOP_GRACE) -> int:
        """SIGTERM, then SIGKILL if it lingers; returns the exit code."""
        return stop_popen(self.popen, timeout)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/<pid>/task/*/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class SparkStandalone:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, under ``workdir``."""

    workdir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    home: Path | None = None  # HOME of the JVMs (default: the caller's)
    master: Proc | None = None
    worker_procs: list[Proc] = field(default_factory=list)
    url: str = ""

    def _launch(self, name: str, argv: list[str], env: dict[str, str]) -> Proc:
        """Start one JVM; the tests' subclass registers it with their ProcessRunner instead."""
        return ChildProcess.launch(name, argv, self.workdir, env)

    def _spawn(self, name: str, main: str, args: list[str]) -> Proc:
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.workdir / "spark-logs"), "PYSPARK_PYTHON": sys.executable,
               "SPARK_CONF_DIR": str(self._conf_dir())}
        if self.home is not None:
            env["HOME"] = str(self.home)
        return self._launch(name, [str(home / "bin" / "spark-class"), main, *args], env)

    def _conf_dir(self) -> Path:
        conf = self.workdir / "spark-conf"
        conf.mkdir(parents=True, exist_ok=True)
        # No REST submission server (a fixed port, 6066).
        (conf / "spark-defaults.conf").write_text("spark.master.rest.enabled false\n")
        return conf

    def start(self) -> str:
        """Master, then the workers; returns the master's ``spark://`` URL once every worker registered."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.master = self._spawn("spark-master", "org.apache.spark.deploy.master.Master",
                                  ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())])
        self.master.wait_ready(("127.0.0.1", port), "I have been elected leader", BOOT_TIMEOUT)
        self.url = f"spark://127.0.0.1:{port}"
        for i in range(self.workers):
            work = self.workdir / f"spark-worker-{i}"
            work.mkdir(exist_ok=True)
            self.worker_procs.append(self._spawn(
                f"spark-worker-{i}", "org.apache.spark.deploy.worker.Worker",
                ["--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
                 "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work), self.url]))
        deadline = time.monotonic() + BOOT_TIMEOUT
        while self.master.own_log_text().count("Registering worker") < self.workers:
            if time.monotonic() > deadline or not self.master.is_running():
                raise RuntimeError("Spark workers never registered:\n" + self.report())
            time.sleep(0.2)
        return self.url

    def executors(self) -> list[int]:
        """PIDs of the executor JVMs the workers run now."""
        return [child for w in self.worker_procs if w.is_running() for child in children(w.pid)
                if EXECUTOR_MAIN in cmdline(child)]

    def kill_executor(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Workers (their executors first, so none outlives them), then the master."""
        for pid in self.executors():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in [*self.worker_procs, *([self.master] if self.master else [])]:
            proc.stop()

    def report(self) -> str:
        procs = [*([self.master] if self.master else []), *self.worker_procs]
        return "\n".join(f"----- {p.name} (pid {p.pid}) -----\n{p.log_tail(80)}" for p in procs)
