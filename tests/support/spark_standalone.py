"""A standalone Spark cluster for the Spark tests (issue 27 item 1): orbitmq.bench.spark_cluster's
master and workers (pyspark's ``bin/spark-class`` launcher, free loopback ports, one executor per
application and worker), with its processes in the caller's ProcessRunner, which stops them by PID
and prints their logs when a test fails.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from orbitmq.bench import spark_cluster
from tests.support.process import ManagedProcess, ProcessRunner

BOOT_TIMEOUT = spark_cluster.BOOT_TIMEOUT
EXECUTOR_MAIN = spark_cluster.EXECUTOR_MAIN
spark_home = spark_cluster.spark_home


def launcher(runner: ProcessRunner) -> Callable[[str, list[str], Path, dict[str, str]], ManagedProcess]:
    """A launch function for orbitmq.bench's launchers that puts each process in ``runner``."""
    def launch(name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> ManagedProcess:
        log_path = runner.workdir / f"{name}.log"
        with open(log_path, "ab") as log_file:  # spark-class and java exec: the PID is the JVM's
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=cwd, env=env, start_new_session=True)
        proc = ManagedProcess(name, argv, log_path, popen)
        runner.processes.append(proc)
        return proc
    return launch


class SparkStandalone(spark_cluster.SparkStandalone):
    def __init__(self, runner: ProcessRunner, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        super().__init__(runner.workdir, workers=workers, cores=cores, memory=memory, home=runner.home)
        self.runner = runner
        self._in_runner = launcher(runner)

    def _launch(self, name: str, argv: list[str], env: dict[str, str]) -> ManagedProcess:
        return self._in_runner(name, argv, self.runner.workdir, env)
