"""A standalone Spark cluster for the Spark tests (issue 27 item 1): a master and workers started
from pyspark's own launcher (``bin/spark-class org.apache.spark.deploy.master.Master`` /
``...worker.Worker``, shipped in the pip package), on free loopback ports, each worker with its
own work dir and one executor per application. The processes join the caller's ProcessRunner,
which stops them by PID; an executor is a child of its worker, found through /proc, so a test can
kill -9 one and :meth:`stop` leaves none behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.common.net import free_port
from tests.support.process import ManagedProcess, ProcessRunner

BOOT_TIMEOUT = 60.0
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/<pid>/task/*/children, else a scan of /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class SparkStandalone:
    runner: ProcessRunner
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    master: ManagedProcess | None = None
    worker_procs: list[ManagedProcess] = field(default_factory=list)
    url: str = ""

    def _spawn(self, name: str, main: str, args: list[str]) -> ManagedProcess:
        home = spark_home()
        log_path = self.runner.workdir / f"{name}.log"
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.runner.workdir / "spark-logs"), "PYSPARK_PYTHON": sys.executable,
               "SPARK_CONF_DIR": str(self._conf_dir()), "HOME": str(self.runner.home)}
        argv = [str(home / "bin" / "spark-class"), main, *args]
        with open(log_path, "ab") as log_file:  # spark-class execs the JVM: the PID is the JVM's
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=self.runner.workdir, env=env, start_new_session=True)
        proc = ManagedProcess(name, argv, log_path, popen)
        self.runner.processes.append(proc)
        return proc

    def _conf_dir(self) -> Path:
        conf = self.runner.workdir / "spark-conf"
        conf.mkdir(exist_ok=True)
        # No REST submission server (a fixed port, 6066) and no worker clean-up thread.
        (conf / "spark-defaults.conf").write_text("spark.master.rest.enabled false\n")
        return conf

    def start(self) -> str:
        """Master, then the workers; returns the master's ``spark://`` URL once every worker registered."""
        port = free_port()
        self.master = self._spawn("spark-master", "org.apache.spark.deploy.master.Master",
                                  ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())])
        self.master.wait_ready(("127.0.0.1", port), "I have been elected leader", BOOT_TIMEOUT)
        self.url = f"spark://127.0.0.1:{port}"
        for i in range(self.workers):
            work = self.runner.workdir / f"spark-worker-{i}"
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
        return [child for w in self.worker_procs if w.is_running() for child in _children(w.pid)
                if EXECUTOR_MAIN in _cmdline(child)]

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
