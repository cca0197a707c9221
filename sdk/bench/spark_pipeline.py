"""`orbitmq bench spark`: one Spark pipeline on the `rocketmq` source and sink and on Kafka's, in one run.

Issue 27 items 2 and 5. Spark runs on a standalone cluster started here (orbitmq.bench.spark_cluster:
a master and ``--workers`` workers of one core, one executor each; ``--master local[N]`` runs in the
driver instead), the driver in this process. One system at a time, so the two never share the
cores: first OrbitMQ (a NameServer, two broker sets ``broker-a`` and ``broker-b``, one proxy; the
topics have ``--queues`` queues spread over both sets), then Apache Kafka 4.4.0 in KRaft mode
(orbitmq.bench.kafka_kraft, one combined broker + controller; topics of ``--queues`` partitions),
each stopped before the next starts. For each:

- batch write: ``--messages`` rows of ``--size`` bytes (``spark.range`` -> body, key) written to
  the source topic by the sink, rows/s of the Spark job;
- batch read: the whole topic read back, counted, and every message's key counted once
  (count == distinct keys == messages: each message read exactly once), rows/s;
- pipeline: a streaming query, source topic from the earliest offset -> transform (the body upper-
  cased) -> a second topic, ``maxOffsetsPerTrigger`` ``--max-per-trigger`` (the rocketmq source's
  alias of maxMessagesPerTrigger), Trigger.AvailableNow: rows/s from start to end, micro-batch
  duration (``durationMs.triggerExecution``) p50/p99;
- recovery (standalone only): the same pipeline again into a third topic, one executor killed
  with kill -9 once the third micro-batch's tasks run; the time from the kill to the end of the
  first micro-batch that completes after it, next to the micro-batches before it;
- where the time goes: CPU seconds of every process by role over each phase (/proc: the executor
  JVMs, their Python workers, the driver, the proxy, the brokers, Kafka's JVM) per message, and with
  ``--py-spy`` py-spy's samples of the executors' Python workers (every thread) during the rocketmq
  pipeline, and with ``--profile`` a cProfile of the rocketmq source's and sink's Python worker code
  (``spark.sql.pyspark.dataSource.profiler=perf``, the main thread only) on an extra, untimed read
  and write of ``--profile-messages``.

Prints each figure for both and the ratio rocketmq / Kafka; ``--json`` also prints them as one JSON
line. Exits 1 when a batch read does not count every message exactly once. Needs ``orbitmq[spark]``,
Java 17 and ``make kafka`` (the jars).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from orbitmq.bench.kafka_kraft import CONNECTOR_VERSION, KAFKA_VERSION, KafkaKRaft, connector_jars
from orbitmq.bench.rocketmq_profile import py_spy_binary, raw_stacks
from orbitmq.bench.spark_cluster import EXECUTOR_MAIN, ChildProcess, SparkStandalone
from orbitmq.common.net import free_port, free_port_pair

SYSTEMS = ("rocketmq", "kafka")
NAMESRV_BOOT = "The Name Server boot success"
BROKER_BOOT = "boot success"
COMMITLOG_SEGMENT = 256 * 1024 * 1024


# ---- OrbitMQ: a NameServer, two broker sets, a proxy -------------------------------------------

class OrbitCluster:
    """``orbitmq namesrv``, ``orbitmq broker`` x ``brokers`` (broker-a, broker-b...) and ``orbitmq
    proxy`` as child processes under ``workdir``, stopped by PID."""

    def __init__(self, workdir: Path, brokers: int = 2) -> None:
        self.workdir = workdir
        self.names = [f"broker-{chr(ord('a') + i)}" for i in range(brokers)]
        self.procs: list[ChildProcess] = []
        self.namesrv = self.endpoint = ""
        self.brokers: dict[str, str] = {}

    def _spawn(self, name: str, args: list[str]) -> ChildProcess:
        home = self.workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(home), "PYTHONUNBUFFERED": "1"}
        proc = ChildProcess.launch(name, [sys.executable, "-m", "orbitmq", *args], self.workdir, env)
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.namesrv = f"127.0.0.1:{port}"
        self._spawn("orbit-namesrv", ["namesrv", f"listenPort={port}", "bindAddress=127.0.0.1",
                                      f"kvConfigPath={self.workdir / 'namesrv' / 'kvConfig.json'}"]
                    ).wait_ready(("127.0.0.1", port), NAMESRV_BOOT, 30)
        for name in self.names:
            port = free_port_pair()  # listenPort - 2 (the fast server) and + 1 (HA) are free too
            keys = {"brokerClusterName": "DefaultCluster", "brokerName": name, "brokerIP1": "127.0.0.1",
                    "listenPort": port, "storePathRootDir": self.workdir / name, "namesrvAddr": self.namesrv,
                    "mappedFileSizeCommitLog": COMMITLOG_SEGMENT, "flushDiskType": "ASYNC_FLUSH",
                    "autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "true"}
            conf = self.workdir / f"{name}.conf"
            conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
            self._spawn(name, ["broker", "-c", str(conf)]).wait_ready(("127.0.0.1", port), BROKER_BOOT, 60)
            self.brokers[name] = f"127.0.0.1:{port}"
        port = free_port()
        self._spawn("orbit-proxy", ["proxy", "-n", self.namesrv, "--port", str(port), "remotingListenPort=0"]
                    ).wait_ready(("127.0.0.1", port), None, 30)
        self.endpoint = f"127.0.0.1:{port}"

    async def create_topic(self, topic: str, queues: int) -> None:
        """``queues`` queues spread over the broker sets; returns once the NameServer routes them all."""
        from orbitmq.client import MQClientAPI
        from orbitmq.common.topic_config import TopicConfig

        share = [queues // len(self.names) + (i < queues % len(self.names)) for i in range(len(self.names))]
        api = MQClientAPI(timeout=10)
        try:
            for (_name, addr), n in zip(self.brokers.items(), share, strict=True):
                await api.create_topic(addr, TopicConfig(topic, n, n))
            deadline = time.monotonic() + 30
            while True:
                try:
                    route = await api.get_topic_route(self.namesrv, topic)
                    if sum(q.read_queue_nums for q in route.queue_datas) == queues:
                        return
                except Exception:  # not registered yet
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic} not routed with {queues} queues after 30 s")
                await asyncio.sleep(0.2)
        finally:
            await api.close()

    async def stored(self, topic: str) -> int:
        """Messages of ``topic`` dispatched to its ConsumeQueues (the sum of the queues' max offsets)."""
        from orbitmq.client import MQClientAPI

        api = MQClientAPI(timeout=10)
        try:
            route = await api.get_topic_route(self.namesrv, topic)
            total = 0
            for q in route.queue_datas:
                addr = self.brokers[q.broker_name]
                for qid in range(q.read_queue_nums):
                    total += await api.get_max_offset(addr, topic, qid)
            return total
        finally:
            await api.close()

    async def wait_stored(self, topic: str, expected: int, timeout: float = 300.0) -> int:  # noqa: ASYNC109
        """Until the dispatch (reput) caught up with ``expected`` messages; returns what is stored."""
        deadline = time.monotonic() + timeout
        while True:
            n = await self.stored(topic)
            if n >= expected or time.monotonic() > deadline:
                return n
            await asyncio.sleep(0.2)

    async def ending_offsets(self, topic: str, messages: int) -> dict:
        """endingOffsets JSON of about the first ``messages`` messages of ``topic``, spread over its queues."""
        from orbitmq.client import MQClientAPI

        api = MQClientAPI(timeout=10)
        try:
            route = await api.get_topic_route(self.namesrv, topic)
            queues = sum(q.read_queue_nums for q in route.queue_datas)
            each = max(1, messages // max(1, queues))
            ends: dict[str, dict[str, int]] = {}
            for q in route.queue_datas:
                for qid in range(q.read_queue_nums):
                    top = await api.get_max_offset(self.brokers[q.broker_name], topic, qid)
                    ends.setdefault(q.broker_name, {})[str(qid)] = min(top, each)
            return {topic: ends}
        finally:
            await api.close()

    def pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in self.procs}

    def stop(self) -> None:
        for proc in self.procs:  # all at once, then wait for each
            if proc.is_running():
                proc.popen.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            proc.stop(30)

    def report(self) -> str:
        return "\n".join(f"----- {p.name} (pid {p.pid}) -----\n{p.log_tail(40)}" for p in self.procs)


# ---- CPU by role, from /proc -------------------------------------------------------------------

ROLES = ("executor JVMs", "executor Python workers", "driver (JVM + Python)", "Spark master + workers",
         "orbitmq proxy", "orbitmq brokers", "orbitmq namesrv", "Kafka broker JVM", "py-spy (--py-spy)")


def _stat(pid: int) -> tuple[int, float] | None:
    """(ppid, utime + stime + cutime + cstime seconds): reaped children count in their parent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


SERVICES = {"proxy": "orbitmq proxy", "broker": "orbitmq brokers", "namesrv": "orbitmq namesrv"}
MAINS = {"kafka.Kafka": "Kafka broker JVM", "org.apache.spark.executor.CoarseGrainedExecutorBackend": "executor JVMs",
         "org.apache.spark.deploy.master.Master": "Spark master + workers",
         "org.apache.spark.deploy.worker.Worker": "Spark master + workers"}


def _role(pid: int, parents: dict[int, int], argvs: dict[int, list[str]]) -> str | None:
    argv = argvs.get(pid, [])
    if argv and Path(argv[0]).name == "py-spy":
        return "py-spy (--py-spy)"
    for i, arg in enumerate(argv):  # `python -m orbitmq <service>`, `java ... <main class> ...`
        if arg == "orbitmq" and i + 1 < len(argv) and argv[i + 1] in SERVICES:
            return SERVICES[argv[i + 1]]
        if arg in MAINS:
            return MAINS[arg]
    seen, p = set(), pid
    while p > 1 and p not in seen:  # a Python worker: whose is it?
        seen.add(p)
        if EXECUTOR_MAIN in argvs.get(p, []):
            return "executor Python workers"
        if p == os.getpid():
            return "driver (JVM + Python)"
        p = parents.get(p, 0)
    return None


def _ours(pid: int, parents: dict[int, int]) -> bool:
    """``pid`` is this process or one of its descendants (not another run's broker or JVM)."""
    seen = set()
    while pid > 1 and pid not in seen:
        if pid == os.getpid():
            return True
        seen.add(pid)
        pid = parents.get(pid, 0)
    return False


def cpu_by_role() -> dict[str, float]:
    """CPU seconds so far of every process of this run, summed by role."""
    stats: dict[int, tuple[int, float]] = {}
    argvs: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                stats[int(entry)] = st
                argvs[int(entry)] = _argv(int(entry))
    parents = {pid: st[0] for pid, st in stats.items()}
    out = dict.fromkeys(ROLES, 0.0)
    for pid, (_ppid, cpu) in stats.items():
        role = _role(pid, parents, argvs) if _ours(pid, parents) else None
        if role is not None:
            out[role] += cpu
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: max(0.0, after[k] - before[k]) for k in ROLES}


# ---- the Spark side ----------------------------------------------------------------------------

def session(master: str, app: str, local_dir: Path, executor_memory: str):
    from pyspark.sql import SparkSession

    from orbitmq.spark import register

    # Spark's planning workers run PYSPARK_PYTHON: this interpreter, which has orbitmq installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.jars", ",".join(connector_jars()))  # Spark's Kafka source and sink
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.pyspark.python", sys.executable).config("spark.driver.memory", "1g")
             .config("spark.executor.memory", executor_memory)
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.local.dir", str(local_dir))
             .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
             .config("spark.sql.streaming.stopTimeout", "60s")
             .config("spark.task.maxFailures", "8")  # an executor killed mid-task: its tasks run again
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


class Target:
    """How one system's source and sink are named: formats, options, columns."""

    def __init__(self, system: str, address: str) -> None:
        self.system, self.address = system, address

    def source(self, reader: Any, topic: str) -> Any:
        if self.system == "rocketmq":
            return (reader.format("rocketmq").option("endpoints", self.address).option("topic", topic)
                    .option("startingOffsets", "earliest").option("includeProperties", "false"))
        return (reader.format("kafka").option("kafka.bootstrap.servers", self.address).option("subscribe", topic)
                .option("startingOffsets", "earliest"))

    def sink(self, writer: Any, topic: str) -> Any:
        if self.system == "rocketmq":
            return writer.format("rocketmq").option("endpoints", self.address).option("topic", topic)
        return writer.format("kafka").option("kafka.bootstrap.servers", self.address).option("topic", topic)

    def rows(self, df: Any, size: int) -> Any:
        """``spark.range`` -> the sink's columns: a key (the id) and a body of ``size`` bytes."""
        from pyspark.sql import functions as F

        key = F.col("id").cast("string")
        body = F.rpad(F.concat(F.lit("m-"), key, F.lit("-")), size, "x").cast("binary")
        if self.system == "rocketmq":
            return df.select(key.alias("keys"), body.alias("body"))
        return df.select(key.cast("binary").alias("key"), body.alias("value"))

    def key(self) -> Any:
        from pyspark.sql import functions as F

        return F.col("keys")[0] if self.system == "rocketmq" else F.col("key").cast("string")

    def transform(self, df: Any) -> Any:
        """The pipeline's step: the body upper-cased, the key kept."""
        from pyspark.sql import functions as F

        if self.system == "rocketmq":
            return df.select(F.col("keys"), F.upper(F.col("body").cast("string")).cast("binary").alias("body"))
        return df.select(F.col("key"), F.upper(F.col("value").cast("string")).cast("binary").alias("value"))


def create_kafka_topics(spark: Any, bootstrap: str, topics: Sequence[str], partitions: int) -> None:
    """Kafka's Admin#createTopics through the driver's JVM (kafka-clients comes with the connector):
    every topic made before the first write, with ``partitions`` partitions and one replica, so no
    producer waits on auto-creation."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", bootstrap)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        new = jvm.java.util.ArrayList()
        for topic in topics:  # NewTopic(name, Optional<Integer>, Optional<Short>): the broker's replication
            new.add(jvm.org.apache.kafka.clients.admin.NewTopic(topic, jvm.java.util.Optional.of(partitions),
                                                                jvm.java.util.Optional.empty()))
        admin.createTopics(new).all().get()
    finally:
        admin.close()


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile by nearest rank (p99 of fewer than 100 batches is the slowest but ~q)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def _end_time(progress: dict) -> float:
    """Epoch seconds at which a micro-batch ended: its trigger's start plus its duration."""
    start = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start + progress["durationMs"]["triggerExecution"] / 1000


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, dict[str, float]]:
    before_cpu, started = cpu_by_role(), time.monotonic()
    result = fn()
    return result, time.monotonic() - started, cpu_delta(before_cpu, cpu_by_role())


def batch_write(spark: Any, t: Target, topic: str, messages: int, size: int, partitions: int) -> dict[str, Any]:
    df = t.rows(spark.range(0, messages, numPartitions=partitions), size)
    _, elapsed, cpu = _timed(lambda: t.sink(df.write, topic).mode("append").save())
    return {"rows_per_s": messages / elapsed, "seconds": elapsed, "cpu": cpu}


def batch_read(spark: Any, t: Target, topic: str, messages: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    df = t.source(spark.read, topic).load()
    row, elapsed, cpu = _timed(lambda: df.agg(F.count(F.lit(1)).alias("n"),
                                              F.countDistinct(t.key()).alias("distinct")).first())
    return {"rows_per_s": row["n"] / elapsed if elapsed else 0.0, "seconds": elapsed, "cpu": cpu,
            "rows": row["n"], "distinct_keys": row["distinct"],
            "exactly_once": row["n"] == messages and row["distinct"] == messages}


def _start_pipeline(spark: Any, t: Target, source: str, sink: str, max_per_trigger: int, checkpoint: Path) -> Any:
    reader = t.source(spark.readStream, source).option("maxOffsetsPerTrigger", max_per_trigger)
    out = t.sink(t.transform(reader.load()).writeStream, sink)
    return out.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()


def _batches(query: Any) -> list[dict]:
    return [p for p in query.recentProgress if p["numInputRows"]]


def pipeline(spark: Any, t: Target, source: str, sink: str, max_per_trigger: int, checkpoint: Path,
             spy: PySpy | None = None) -> dict[str, Any]:
    def run() -> Any:
        query = _start_pipeline(spark, t, source, sink, max_per_trigger, checkpoint)
        if spy is not None:  # from the first micro-batch's end: the Python workers are running by then
            while query.isActive and not _batches(query):
                time.sleep(0.05)
            spy.start()
        query.awaitTermination()
        if spy is not None:
            spy.stop()
        if query.exception() is not None:
            raise RuntimeError(f"{t.system} pipeline failed: {query.exception()}")
        return query

    query, elapsed, cpu = _timed(run)
    batches = _batches(query)
    rows = sum(p["numInputRows"] for p in batches)
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in batches]
    written = [p["sink"].get("numOutputRows", -1) for p in batches]
    return {"rows_per_s": rows / elapsed, "seconds": elapsed, "cpu": cpu, "rows": rows, "batches": len(batches),
            "batch_p50_s": percentile(durations, 0.5), "batch_p99_s": percentile(durations, 0.99),
            "sink_rows": sum(written) if all(w >= 0 for w in written) else None}


def recovery(spark: Any, t: Target, cluster: SparkStandalone, source: str, sink: str, max_per_trigger: int,
             checkpoint: Path) -> dict[str, Any]:
    """The pipeline again; kill -9 of one executor inside its third micro-batch; seconds from the
    kill to the end of the first micro-batch that completes after it."""
    query = _start_pipeline(spark, t, source, sink, max_per_trigger, checkpoint)
    try:
        deadline = time.monotonic() + 600
        while len(_batches(query)) < 2:
            if not query.isActive or time.monotonic() > deadline:
                raise RuntimeError(f"{t.system}: the recovery pipeline ended before two micro-batches "
                                   f"(use more --messages or a smaller --max-per-trigger)")
            time.sleep(0.05)
        done = _batches(query)
        typical = statistics.median(p["durationMs"]["triggerExecution"] for p in done) / 1000
        tracker = spark.sparkContext.statusTracker()
        while not _tasks_running(tracker) and query.isActive and time.monotonic() < deadline:
            time.sleep(0.01)  # the kill lands while the executors run the next micro-batch's tasks
        victims = cluster.executors()
        if not victims:
            raise RuntimeError("no executor to kill")
        killed_at = time.time()
        cluster.kill_executor(victims[0])
        replaced = None

        def check_replaced() -> None:  # the master starts another executor on the worker
            nonlocal replaced
            now = cluster.executors()
            if replaced is None and len(now) >= len(victims) and victims[0] not in now:
                replaced = time.time() - killed_at

        while True:
            check_replaced()
            after = [p for p in _batches(query) if _end_time(p) > killed_at]
            if after or not query.isActive:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{t.system}: no micro-batch completed within 600 s of the executor kill")
            time.sleep(0.05)
        if not after:
            raise RuntimeError(f"{t.system}: the query ended after the executor kill without a micro-batch: "
                               f"{query.exception()}")
        first = min(after, key=_end_time)
        while replaced is None and time.monotonic() < deadline:
            check_replaced()
            time.sleep(0.1)
        return {"recovery_s": _end_time(first) - killed_at, "typical_batch_s": typical,
                "hit_batch_s": first["durationMs"]["triggerExecution"] / 1000,
                "executor_replaced_s": replaced, "killed_in_batch": first["batchId"]}
    finally:
        query.stop()


def _tasks_running(tracker: Any) -> bool:
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None and info.numActiveTasks > 0:
            return True
    return False


class PySpy:
    """py-spy (``pip install py-spy``) sampling every Python worker of the executors (the
    pyspark.daemon of each executor JVM and the workers it forks: ``--subprocesses``), all threads,
    without pausing them (``--nonblocking``), as collapsed stacks; :meth:`summary` sorts the samples by
    the file their innermost frame runs in."""

    def __init__(self, out_dir: Path, rate: int = 50) -> None:
        self.out_dir, self.rate = out_dir, rate
        self.procs: list[subprocess.Popen[bytes]] = []
        self.files: list[Path] = []

    @staticmethod
    def binary() -> str | None:
        return py_spy_binary()

    def start(self) -> None:
        exe = self.binary()
        if exe is None:
            raise RuntimeError("--py-spy needs py-spy: pip install -e '.[bench]'")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        argvs = {pid: _argv(pid) for pid in (int(e) for e in os.listdir("/proc") if e.isdigit())}
        daemons = [pid for pid, argv in argvs.items() if "pyspark.daemon" in argv
                   and EXECUTOR_MAIN in argvs.get(_stat(pid)[0] if _stat(pid) else 0, [])]
        for pid in daemons:
            out = self.out_dir / f"py-spy-{pid}.txt"
            self.files.append(out)
            self.procs.append(subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--subprocesses", "--nonblocking", "--threads", "--full-filenames",
                 "--rate", str(self.rate), "--format", "raw", "--output", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for proc in self.procs:  # Ctrl-C: py-spy writes what it sampled and exits
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def summary(self) -> dict[str, Any]:
        categories: dict[str, int] = {}
        leaves: dict[str, int] = {}
        for path in self.files:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            for frames, count in raw_stacks(text):
                leaf = frames[-1] if frames else ""
                if "pyspark/daemon.py" in leaf:  # the daemon waiting to fork a worker, not a worker
                    continue
                cat = _spy_category(frames)
                categories[cat] = categories.get(cat, 0) + count
                leaves[leaf] = leaves.get(leaf, 0) + count
        total = sum(categories.values()) or 1
        return {"samples": total, "dir": str(self.out_dir),
                "categories": {k: v / total for k, v in sorted(categories.items(), key=lambda kv: -kv[1])},
                "top": [f"{v / total:.1%} {k}" for k, v in sorted(leaves.items(), key=lambda kv: -kv[1])[:12]]}


SPY_PATHS = (("pyarrow", "Arrow (pyarrow)"), ("/grpc/", "gRPC (grpc.aio)"), ("google/protobuf", "protobuf"),
             ("_pb2", "protobuf"), ("/asyncio/", "asyncio event loop"), ("/pyspark/", "Spark's Python worker"),
             ("/sdk/spark/", "the rocketmq data source"), ("orbitmq/spark/", "the rocketmq data source"),
             ("/sdk/", "OrbitMQ SDK client"), ("/core/", "OrbitMQ SDK client"), ("/orbitmq/", "OrbitMQ SDK client"))
# py-spy --nonblocking cannot tell a thread blocked in C from one running: these leaves are waits.
IDLE = (("selectors.py", "idle: asyncio loop waiting for the network"),
        ("Thread.run (", "idle: gRPC's C-core poller thread (native)"),
        ("Condition.wait (", "idle: a thread waiting for another"),
        ("socket.py", "idle: waiting for the JVM's socket"))


def _spy_category(frames: list[str]) -> str:
    """The innermost frame's module decides (py-spy samples where a thread is, not who called)."""
    leaf = frames[-1] if frames else ""
    for needle, name in IDLE:
        if needle in leaf:
            return name
    if ("/sdk/spark/" in leaf or "orbitmq/spark/" in leaf) and "arrow" in leaf:
        return "Arrow conversion (to_arrow, to_pylist)"
    for needle, name in SPY_PATHS:
        if needle in leaf:
            return name
    if "threading.py" in leaf or "queue.py" in leaf or "concurrent/futures" in leaf:
        return "thread hand-offs (futures, locks)"
    if "<frozen" in leaf or "/python3." in leaf:
        return "Python's standard library"
    return "other"


def python_profile(spark: Any, t: Target, source: str, sink: str, out_dir: Path, ending: dict | None
                   ) -> dict[str, Any]:
    """cProfile of the data source's worker code (Spark's dataSource profiler) over one untimed
    batch read of ``source`` (up to ``ending``) and one write of what it read to ``sink``;
    tottime by category."""
    spark.conf.set("spark.sql.pyspark.dataSource.profiler", "perf")
    try:
        reader = t.source(spark.read, source)
        if ending is not None:
            reader = reader.option("endingOffsets", json.dumps(ending))
        t.sink(t.transform(reader.load()).write, sink).mode("append").save()
    finally:
        spark.conf.unset("spark.sql.pyspark.dataSource.profiler")
    collector = spark.profile.profiler_collector
    stats = [s for s in collector._perf_profile_results.values() if s is not None]
    out_dir.mkdir(parents=True, exist_ok=True)
    categories: dict[str, float] = {}
    top: list[tuple[float, str]] = []
    for i, st in enumerate(stats):
        st.dump_stats(str(out_dir / f"datasource-{i}.pstats"))
        for (filename, line, func), (_cc, _nc, tottime, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
            cat = _category(filename, func)
            categories[cat] = categories.get(cat, 0.0) + tottime
            top.append((tottime, f"{filename}:{line}({func})"))
    top.sort(reverse=True)
    total = sum(categories.values()) or 1.0
    return {"categories": {k: v / total for k, v in sorted(categories.items(), key=lambda kv: -kv[1])},
            "seconds": total, "top": [f"{s:.2f}s {name}" for s, name in top[:12]], "dir": str(out_dir)}


def _category(filename: str, func: str) -> str:
    """Which part of a Python worker's main thread a profiled function belongs to."""
    if "lock" in func and "acquire" in func or filename in ("threading.py", "_base.py") or "wait" == func:
        return "waiting for the SDK's gRPC event loop thread"
    if filename == "ipc.py":  # pyarrow.ipc's stream reader: the JVM's batches read off the socket
        return "Arrow stream from the JVM (read, and waiting for it)"
    if "pyarrow" in func or filename == "source.py" and func == "to_arrow" or "arrow" in filename \
            or "to_pylist" in func:
        return "Arrow conversion (to and from Python objects)"
    if filename in ("serializers.py", "worker.py", "worker_util.py", "daemon.py") or "socket" in func \
            or "write" in func and filename == "~":
        return "Spark's worker (batches to and from the JVM)"
    if filename in ("source.py", "clients.py", "options.py", "message.py", "producer.py", "pull.py"):
        return "data source and SDK code (messages, offsets)"
    return "other"


# ---- one system ----------------------------------------------------------------------------------

def measure(system: str, args: argparse.Namespace, spark: Any, cluster: SparkStandalone | None,
            workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    run = uuid.uuid4().hex[:6]
    source, sink, again, prof = (f"SparkBench{run}{x}" for x in ("Src", "Out", "Rec", "Prof"))
    server: OrbitCluster | KafkaKRaft
    print(f"== {system}: starting", flush=True)
    if system == "rocketmq":
        server = OrbitCluster(workdir / "orbitmq")
        server.start()
        for topic in (source, sink, again, prof):
            asyncio.run(server.create_topic(topic, args.queues))
        t = Target(system, server.endpoint)
        print(f"  NameServer {server.namesrv}, broker sets {', '.join(server.brokers)}, proxy {server.endpoint}; "
              f"topics of {args.queues} queues over {len(server.brokers)} broker sets", flush=True)
    else:
        server = KafkaKRaft(workdir / "kafka", heap=args.kafka_heap, partitions=args.queues)
        server.start()
        create_kafka_topics(spark, server.bootstrap, [source, sink, again, prof], args.queues)
        t = Target(system, server.bootstrap)
        print(f"  Kafka {KAFKA_VERSION} (KRaft, broker + controller) at {server.bootstrap}; topics of "
              f"{args.queues} partitions", flush=True)
    try:
        out["write"] = batch_write(spark, t, source, args.messages, args.size, args.write_partitions)
        print(f"  batch write of {args.messages:,} x {args.size} B: {out['write']['rows_per_s']:,.0f} rows/s "
              f"({out['write']['seconds']:.1f} s)", flush=True)
        if isinstance(server, OrbitCluster):
            stored = asyncio.run(server.wait_stored(source, args.messages))
            if stored != args.messages:
                print(f"  warning: {stored:,} messages stored for {args.messages:,} written", flush=True)
        out["read"] = batch_read(spark, t, source, args.messages)
        r = out["read"]
        print(f"  batch read: {r['rows']:,} rows, {r['distinct_keys']:,} distinct keys "
              f"({'each message once' if r['exactly_once'] else 'NOT each message once'}): "
              f"{r['rows_per_s']:,.0f} rows/s ({r['seconds']:.1f} s)", flush=True)
        keep = Path(args.profile_dir) if args.profile_dir else workdir
        spy = PySpy(keep / "py-spy") if args.py_spy and system == "rocketmq" else None
        out["pipeline"] = pipeline(spark, t, source, sink, args.max_per_trigger, workdir / f"cp-{system}", spy)
        if spy is not None:
            out["py_spy"] = spy.summary()
        p = out["pipeline"]
        print(f"  pipeline: {p['rows']:,} rows in {p['batches']} micro-batches: {p['rows_per_s']:,.0f} rows/s; "
              f"micro-batch p50 {p['batch_p50_s']:.2f} s, p99 {p['batch_p99_s']:.2f} s", flush=True)
        if cluster is not None and not args.no_kill:
            out["recovery"] = recovery(spark, t, cluster, source, again, args.max_per_trigger,
                                       workdir / f"cp-{system}-kill")
            rec = out["recovery"]
            print(f"  executor kill -9 inside micro-batch {rec['killed_in_batch']}: it ended {rec['recovery_s']:.1f} s "
                  f"after the kill and took {rec['hit_batch_s']:.1f} s (those before it: {rec['typical_batch_s']:.1f} s); "
                  f"a new executor ran {rec['executor_replaced_s'] or float('nan'):.1f} s after the kill", flush=True)
        if args.profile and isinstance(server, OrbitCluster):
            ending = asyncio.run(server.ending_offsets(source, args.profile_messages))
            out["profile"] = python_profile(spark, t, source, prof, keep / "profile", ending)
    except Exception:
        log = server.report() if isinstance(server, OrbitCluster) else (
            server.process.log_tail(60) if server.process else "")
        print(log[-6000:], file=sys.stderr)
        raise
    finally:
        server.stop()
    return out


# ---- the table -----------------------------------------------------------------------------------

def _get(fig: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(fig, dict) or fig.get(part) is None:
            return None
        fig = fig[part]
    return fig


ROWS = (("batch write rows/s ({queues} queues; rocketmq: 2 broker sets)", "write.rows_per_s", "higher", ",.0f"),
        ("batch read rows/s (each message once)", "read.rows_per_s", "higher", ",.0f"),
        ("pipeline read -> transform -> write rows/s", "pipeline.rows_per_s", "higher", ",.0f"),
        ("micro-batch p50 s (maxOffsetsPerTrigger {mpt})", "pipeline.batch_p50_s", "lower", ".2f"),
        ("micro-batch p99 s (maxOffsetsPerTrigger {mpt})", "pipeline.batch_p99_s", "lower", ".2f"),
        ("recovery after an executor kill -9, s", "recovery.recovery_s", "lower", ".1f"))


def _cell(value: float | None, fmt: str) -> str:
    return "not measured" if value is None else format(value, fmt)


def table(figures: dict[str, dict[str, Any]], args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    lines = ["| figure | rocketmq | Kafka | rocketmq / Kafka | better |", "|---|---:|---:|---:|---|"]
    ratios: dict[str, Any] = {}
    for label, path, better, fmt in ROWS:
        a, b = (_get(figures.get(s, {}), path) for s in SYSTEMS)
        ratio = a / b if a is not None and b else None
        ratios[path] = ratio
        lines.append(f"| {label.format(queues=args.queues, mpt=f'{args.max_per_trigger:,}')} | {_cell(a, fmt)} | "
                     f"{_cell(b, fmt)} | {'-' if ratio is None else f'{ratio:.3f} x'} | {better} |")
    return "\n".join(lines), ratios


def cpu_table(figures: dict[str, dict[str, Any]], messages: int) -> str:
    """CPU per message (µs) of each role in each phase of each system: where the time goes."""
    lines = ["| CPU µs per message | " + " | ".join(f"{s} {ph}" for s in SYSTEMS for ph in ("write", "read",
                                                                                            "pipeline")) + " |",
             "|---|" + "---:|" * 6]
    for role in ROLES:
        cells = []
        for s in SYSTEMS:
            for ph in ("write", "read", "pipeline"):
                cpu = _get(figures.get(s, {}), f"{ph}.cpu")
                cells.append("-" if cpu is None else f"{cpu[role] * 1e6 / messages:,.0f}")
        if any(c not in ("-", "0") for c in cells):
            lines.append(f"| {role} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench spark", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=1024, help="body bytes")
    p.add_argument("--queues", type=int, default=16, help="queues (Kafka: partitions) of each topic")
    p.add_argument("--max-per-trigger", type=int, default=50_000, help="maxOffsetsPerTrigger of the pipeline")
    p.add_argument("--write-partitions", type=int, default=16, help="Spark partitions of the batch write")
    p.add_argument("--master", default="standalone", help="standalone (default: a master and --workers "
                                                          "workers started here) or a Spark master URL")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--executor-memory", default="1g")
    p.add_argument("--kafka-heap", default="512m")
    p.add_argument("--only", default=",".join(SYSTEMS), help="rocketmq,kafka")
    p.add_argument("--no-kill", action="store_true", help="skip the executor-kill recovery run")
    p.add_argument("--profile", action="store_true",
                   help="also cProfile the rocketmq source and sink in the Python workers (untimed)")
    p.add_argument("--profile-messages", type=int, default=100_000,
                   help="messages the --profile read and write go over")
    p.add_argument("--py-spy", action="store_true",
                   help="sample the executors' Python workers with py-spy during the rocketmq pipeline")
    p.add_argument("--profile-dir", help="keep the py-spy stacks and pstats here (default: removed with the run)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    args = p.parse_args(list(argv or []))
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if set(only) - set(SYSTEMS):
        p.error(f"--only takes {','.join(SYSTEMS)}")
    if args.messages < 1 or args.max_per_trigger < 1:
        p.error("--messages and --max-per-trigger must be positive")
    try:
        import pyspark
    except ImportError:
        print("orbitmq bench spark needs the spark extra: pip install -e '.[spark]'", file=sys.stderr)
        return 2
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-spark-") as tmp:
        work = Path(tmp)
        cluster = None
        master = args.master
        if master == "standalone":
            cluster = SparkStandalone(work / "spark", workers=args.workers, cores=1, memory=args.executor_memory)
        try:
            if cluster is not None:
                master = cluster.start()
                print(f"Spark {pyspark.__version__} standalone: {master}, {args.workers} workers x 1 core, "
                      f"connector spark-sql-kafka-0-10_2.13 {CONNECTOR_VERSION}", flush=True)
            spark = session(master, "orbitmq-bench-spark", work / "spark-local", args.executor_memory)
            try:
                for system in only:
                    figures[system] = measure(system, args, spark, cluster, work)
            finally:
                spark.stop()
        except Exception:
            if cluster is not None:
                print(cluster.report()[-4000:], file=sys.stderr)
            raise
        finally:
            if cluster is not None:
                cluster.stop()
    print(f"\n{args.messages:,} x {args.size} B messages, Spark {pyspark.__version__} on "
          f"{'a standalone cluster of ' + str(args.workers) + ' one-core workers' if cluster else master}, "
          f"the driver in this process:\n")
    text, ratios = table(figures, args)
    print(text)
    if cluster is None:
        print("\nrecovery not measured: a local master has no executor process to kill")
    print("\nWhere the time goes (CPU of each process role over each phase, µs per message):\n")
    print(cpu_table(figures, args.messages))
    prof = figures.get("rocketmq", {}).get("profile")
    if prof:
        print(f"\nrocketmq source + sink in the Python workers (cProfile, main thread, {prof['seconds']:.1f} s; "
              f"pstats in {prof['dir']}):")
        for cat, share in prof["categories"].items():
            print(f"  {share:6.1%}  {cat}")
        for line in prof["top"]:
            print(f"    {line}")
    spied = figures.get("rocketmq", {}).get("py_spy")
    if spied:
        print(f"\nrocketmq pipeline's Python workers (py-spy, every thread, {spied['samples']:,} samples; "
              f"stacks in {spied['dir']}):")
        for cat, share in spied["categories"].items():
            print(f"  {share:6.1%}  {cat}")
        for line in spied["top"]:
            print(f"    {line}")
    ok = all(figures[s]["read"]["exactly_once"] for s in figures)
    if args.json:
        print(json.dumps({"messages": args.messages, "size": args.size, "queues": args.queues,
                          "max_per_trigger": args.max_per_trigger, **figures,
                          "ratio_rocketmq_over_kafka": ratios}, default=str))
    if not ok:
        print("a batch read did not count every message exactly once", file=sys.stderr)
        return 1
    return 0
