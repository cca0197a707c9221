"""Apache Kafka in KRaft mode, the peer of `orbitmq bench spark` (issue 27 item 5), and the jars of
Spark's Kafka connector.

The broker is Kafka's own ``kafka.Kafka`` main from the Maven jars of tests/compat/kafka/pom.xml
(kafka_2.13 at :data:`KAFKA_VERSION`), one JVM acting as broker and controller
(``process.roles=broker,controller``, a static one-voter quorum) on free loopback ports, its
storage formatted first by Kafka's tool (``kafka.tools.StorageTool format``, what
``kafka-storage.sh format`` runs) and its log dir under the caller's work dir. Topics are not
created on first use (``auto.create.topics.enable=false``): a caller makes them with Kafka's Admin
API (``num.partitions`` partitions by default). It is stopped by PID.

Spark's connector (``spark-sql-kafka-0-10_2.13``, tests/compat/spark-kafka/pom.xml) reaches Spark
as ``spark.jars``: :func:`connector_jars` lists its jars less those pyspark already ships.
``make clients`` (or ``make kafka``) fetches both into .cache/m2 and writes each classpath to its
suite's target/classpath.txt.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from orbitmq.bench.spark_cluster import ChildProcess, Proc, spark_home
from orbitmq.common.net import free_port

KAFKA_VERSION = "4.4.0"
CONNECTOR_VERSION = "4.2.0"  # stands in for pyspark's 4.3.0, which the package mirror does not serve
REPO = Path(__file__).resolve().parents[2]
SERVER_SUITE = REPO / "tests" / "compat" / "kafka"
CONNECTOR_SUITE = REPO / "tests" / "compat" / "spark-kafka"
# KafkaRaftServer#startup logs KafkaBroker.STARTED_MESSAGE once broker and controller serve.
STARTED = "Kafka Server started"
BOOT_TIMEOUT = 90.0
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (G1, short pauses), with the heap given.
JVM_FLAGS = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
             "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
# Console only, WARN and above, but the start-up line the launcher waits for.
LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = STDOUT
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def _classpath(suite: Path, what: str) -> list[str]:
    path = suite / "target" / "classpath.txt"
    if not path.is_file():
        raise RuntimeError(f"{what} is not fetched ({path} is missing): run `make kafka` (or `make clients`)")
    return [e for e in path.read_text().strip().split(os.pathsep) if e]


def server_classpath() -> list[str]:
    """kafka_2.13 and its dependencies; a RuntimeError saying what to run when not fetched."""
    return _classpath(SERVER_SUITE, f"Apache Kafka {KAFKA_VERSION}")


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``: the name without its version."""
    stem = Path(jar).name.removesuffix(".jar")
    parts = stem.split("-")
    for i, part in enumerate(parts):
        if part[:1].isdigit():
            return "-".join(parts[:i])
    return stem


def connector_jars() -> list[str]:
    """spark.jars for Spark's Kafka source and sink: the connector's classpath without the jars
    pyspark ships already (Scala, Hadoop's client, lz4, snappy, slf4j, spark-tags: two copies of
    one library on one JVM is a conflict waiting, and Hadoop's client alone is tens of MiB)."""
    entries = _classpath(CONNECTOR_SUITE, f"Spark's Kafka connector {CONNECTOR_VERSION}")
    shipped = {_artifact(j.name) for j in (spark_home() / "jars").glob("*.jar")}
    jars = [e for e in entries if _artifact(e) not in shipped]
    if not any(Path(j).name.startswith("spark-sql-kafka-0-10_2.13-") for j in jars):
        raise RuntimeError(f"spark-sql-kafka-0-10_2.13 is not on {CONNECTOR_SUITE}/target/classpath.txt: "
                           "run `make kafka`")
    return jars


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("Apache Kafka needs Java 17 (java on the PATH or JAVA_HOME)")
    return found


def cluster_id() -> str:
    """A Kafka Uuid as ``kafka-storage.sh random-uuid`` prints it: 16 random bytes in URL-safe
    base64 without padding, never starting with '-' (Uuid#randomUuid's rule, for the CLI)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaKRaft:
    """One combined broker + controller under ``workdir``; ``launch`` starts the JVM (the tests
    pass one that registers it with their ProcessRunner)."""

    def __init__(self, workdir: Path, heap: str = "512m", partitions: int = 16,
                 launch: Callable[[str, list[str], Path, dict[str, str]], Proc] = ChildProcess.launch) -> None:
        self.workdir = Path(workdir)
        self.heap, self.partitions, self._launch = heap, partitions, launch
        self.port = self.controller_port = 0
        self.process: Proc | None = None

    @property
    def bootstrap(self) -> str:
        """``kafka.bootstrap.servers`` of this broker."""
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        keys = {
            "process.roles": "broker,controller", "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.workdir / "kraft-logs", "num.partitions": self.partitions,
            "auto.create.topics.enable": "false", "default.replication.factor": 1,
            # One node: every internal topic with one replica, few partitions.
            "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        conf = self.workdir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J2)
        return conf

    def _argv(self, main: str, *args: str) -> list[str]:
        return [java(), f"-Xms{self.heap}", f"-Xmx{self.heap}", *JVM_FLAGS,
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", os.pathsep.join(server_classpath()), main, *args]

    def start(self) -> str:
        """Format the storage, start the JVM, wait for "Kafka Server started"; returns the bootstrap."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self._write_config()
        fmt = subprocess.run(self._argv("kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(conf)),
                             capture_output=True, text=True, timeout=120, check=False, cwd=self.workdir)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({fmt.returncode}):\n{fmt.stdout[-3000:]}"
                               f"{fmt.stderr[-3000:]}")
        env = {**os.environ, "LOG_DIR": str(self.workdir)}
        self.process = self._launch("kafka", self._argv("kafka.Kafka", str(conf)), self.workdir, env)
        self.process.wait_ready(("127.0.0.1", self.port), STARTED, BOOT_TIMEOUT)
        return self.bootstrap

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(30)
