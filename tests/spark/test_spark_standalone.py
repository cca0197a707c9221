"""The "rocketmq" source and sink on a standalone Spark cluster (issue 27 items 1-2): a master and
two workers from pyspark's launcher (tests/support/spark_standalone.py), partitions planned on the
driver, pickled and read by Python workers of two executors in other JVMs. The driver runs in a
process of its own (tests/spark/standalone_driver.py): one SparkContext per process, and a driver
can be killed. Results are read back with the tests' local session.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.conftest import name
from tests.spark.test_spark_batch import _wait_dispatched, endpoints, produce
from tests.support.process import ProcessRunner
from tests.support.spark_standalone import SparkStandalone

DRIVER = [sys.executable, "-m", "tests.spark.standalone_driver"]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    runner = ProcessRunner(tmp_path_factory.mktemp("spark-standalone"))
    cluster = SparkStandalone(runner, workers=2, cores=1, memory="1g")
    try:
        cluster.start()
        yield cluster
    except BaseException:
        print("\n===== Spark standalone logs =====\n" + cluster.report(), file=sys.stderr)
        raise
    finally:
        cluster.stop()
        runner.stop_all()


class Driver:
    """standalone_driver.py in its own process; its JSON lines collected by a reader thread."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen([*DRIVER, *args], stdout=subprocess.PIPE, stderr=open(log, "w"),  # noqa: SIM115
                                     text=True, cwd=Path(__file__).resolve().parents[2])
        self.lines: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.startswith("{"):
                self.lines.append(json.loads(raw))

    def rows(self) -> int:
        return sum(x.get("rows", 0) for x in self.lines)

    def wait_for(self, predicate, what: str, timeout: float) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None or predicate(), f"driver exited ({what}):\n{self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"driver: no {what} after {timeout} s:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.reader.join(10)


def test_batch_read_and_write_across_two_executors(cluster, spark, standalone, tmp_path: Path) -> None:
    source = cluster.create_topic(name("SaSrc"), queues=16)
    sink = cluster.create_topic(name("SaSink"), queues=4)
    total = 3200
    produce(endpoints(cluster), source, [b"sa-%d" % i for i in range(total)])
    _wait_dispatched(cluster, source, 16, total)
    log = tmp_path / "driver.log"
    done = subprocess.run([*DRIVER, "batch", standalone.url, endpoints(cluster), source, sink], capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    log.write_text(done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] == total and result["partitions"] >= 8  # a queue (non-empty) a partition
    _wait_dispatched(cluster, sink, 4, total)
    rows = (spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", sink)
            .load().select("body").collect())
    assert sorted(bytes(r.body) for r in rows) == sorted(b"sa-%d" % i for i in range(total))


def test_stream_survives_an_executor_kill_and_a_driver_kill_exactly_once(cluster, spark, standalone,
                                                                          tmp_path: Path) -> None:
    """A streaming query into a parquet file sink: one executor is killed with kill -9 inside a
    micro-batch (the worker starts another, the tasks run again), later the driver is killed and
    started again on its checkpoint; the sink holds every message once."""
    source = cluster.create_topic(name("SaStream"), queues=8)
    first, total = 2000, 3200
    produce(endpoints(cluster), source, [b"st-%d" % i for i in range(first)])
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    args = ["stream", standalone.url, endpoints(cluster), source, str(out), str(checkpoint), str(total)]

    driver = Driver(args, tmp_path / "driver-1.log")
    try:
        driver.wait_for(lambda: driver.rows() >= 800, "two micro-batches", 180)
        executors = standalone.executors()
        assert len(executors) == 2, executors  # one per worker
        standalone.kill_executor(executors[0])
        produce(endpoints(cluster), source, [b"st-%d" % i for i in range(first, total - 400)])
        driver.wait_for(lambda: driver.rows() >= first + 400, "batches after the executor kill", 180)
    finally:
        driver.kill()  # kill -9 of the driver, mid-stream
    produce(endpoints(cluster), source, [b"st-%d" % i for i in range(total - 400, total)])

    driver = Driver(args, tmp_path / "driver-2.log")
    try:
        driver.wait_for(lambda: any("done" in x or "error" in x for x in driver.lines), "end", 240)
        assert driver.proc.wait(60) == 0, driver.log.read_text()[-3000:]
    finally:
        driver.kill()
    assert driver.lines[-1].get("done") == total, driver.lines[-3:]
    rows = spark.read.parquet(str(out)).select("body", "queueId", "queueOffset").collect()
    assert len(rows) == total, f"{len(rows)} rows for {total} messages"
    assert sorted(r.body for r in rows) == sorted(f"st-{i}" for i in range(total))
    assert len({(r.queueId, r.queueOffset) for r in rows}) == total


async def test_stream_keeps_going_across_a_master_kill_in_controller_mode(spark, standalone, tmp_path: Path) -> None:
    """The same streaming query against a controller-mode broker set of three replicas
    (tests/support/ha_cluster.py): its master killed with kill -9 mid-stream, a slave of the
    SyncStateSet elected, the readers' routes refreshed; the sink holds every message once."""
    from tests.support.ha_cluster import HACluster

    runner = ProcessRunner(tmp_path / "ha-run")
    ha = HACluster(runner, tmp_path / "ha")
    try:
        await ha.start()
        topic = name("SaFailover")
        await ha.create_topic(topic, queues=4)
        await ha.wait_topic_routed(topic)
        first, total = 1200, 2000
        await asyncio.to_thread(produce, ha.endpoint, topic, [b"fo-%d" % i for i in range(first)])
        out, checkpoint = tmp_path / "out", tmp_path / "cp"
        driver = Driver(["stream", standalone.url, ha.endpoint, topic, str(out), str(checkpoint), str(total)],
                        tmp_path / "driver.log")
        try:
            await asyncio.to_thread(driver.wait_for, lambda: driver.rows() >= 400, "a first micro-batch", 180)
            old = await ha.master_addr()
            assert old is not None
            await ha.kill(ha.replica_at(old))
            await ha.wait_master(not_addr=old)
            await asyncio.to_thread(produce, ha.endpoint, topic, [b"fo-%d" % i for i in range(first, total)])
            await asyncio.to_thread(driver.wait_for, lambda: any("done" in x or "error" in x for x in driver.lines),
                                    "end", 240)
            assert await asyncio.to_thread(driver.proc.wait, 60) == 0, driver.log.read_text()[-3000:]
        finally:
            await asyncio.to_thread(driver.kill)
        assert driver.lines[-1].get("done") == total, driver.lines[-3:]
        rows = await asyncio.to_thread(lambda: spark.read.parquet(str(out)).select("body").collect())
        assert sorted(r.body for r in rows) == sorted(f"fo-{i}" for i in range(total))
    except BaseException:
        print("\n===== controller-mode cluster logs =====\n" + runner.report(), file=sys.stderr)
        raise
    finally:
        await ha.close()
        runner.stop_all()
