"""A Spark Connect server for the Spark tests (issue 27 item 4), from the pip package's jars.

pyspark's ``sbin/start-connect-server.sh`` hands ``org.apache.spark.sql.connect.service.SparkConnectServer``
to ``sbin/spark-daemon.sh``, which daemonizes it (or, with ``--wait``, runs it under a shell that
stays its parent). Here ``bin/spark-submit --class ...SparkConnectServer`` is started directly:
spark-submit execs spark-class, which execs the JVM, so the PID the caller's ProcessRunner holds
is the server's own and the server is stopped by it. The server runs ``local[N]`` with a small
heap on a free loopback port (``spark.connect.grpc.binding.port``); its Python workers run this
interpreter (PYSPARK_PYTHON), which has orbitmq installed: a data source registered by a Connect
client is pickled to the server, and unpickling imports ``orbitmq.spark`` there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass

from orbitmq.bench.spark_cluster import children, spark_home
from orbitmq.common.net import free_port
from tests.support.process import ManagedProcess, ProcessRunner

BOOT_TIMEOUT = 90.0
SERVER_MAIN = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_env() -> dict[str, str]:
    """The environment of a Spark launcher: this interpreter for Python workers, loopback only, and
    no Connect-client variables of the test process (a Connect client there sets
    SPARK_CONNECT_MODE_ENABLED)."""
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "SPARK_LOCAL_REMOTE"):
        env.pop(name, None)
    return env


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its descendants, by PID, the children first."""
    pids = [pid]
    i = 0
    while i < len(pids):
        pids += children(pids[i])
        i += 1
    for p in reversed(pids):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class SparkConnectServer:
    runner: ProcessRunner
    master: str = "local[2]"
    memory: str = "768m"
    proc: ManagedProcess | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the server and return its ``sc://`` URL once it serves."""
        home = spark_home()
        self.port = free_port()
        work = self.runner.workdir
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.pyspark.python": sys.executable,
            "spark.local.dir": str(work / "spark-local"),
            "spark.sql.warehouse.dir": str(work / "spark-warehouse"),
        }
        argv = [str(home / "bin" / "spark-submit"), "--class", SERVER_MAIN, "--name", "orbitmq-connect-tests",
                "--master", self.master, "--driver-memory", self.memory]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        env = {**spark_env(), "HOME": str(self.runner.home)}
        log_path = work / "spark-connect.log"
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=work, env=env, start_new_session=True)
        self.proc = ManagedProcess("spark-connect", argv, log_path, popen)
        self.runner.processes.append(self.proc)
        self.proc.wait_ready(("127.0.0.1", self.port), "Spark Connect server started at", BOOT_TIMEOUT)
        return self.url

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=20)

    def report(self) -> str:
        if self.proc is None:
            return "(Spark Connect server not started)"
        return f"----- {self.proc.name} (pid {self.proc.pid}) {self.proc.log_path} -----\n{self.proc.log_tail(120)}"

