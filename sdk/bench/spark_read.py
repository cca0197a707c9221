"""`orbitmq bench spark-read`: a Spark streaming read draining a backlog, against the SDK alone.

In one `orbitmq local` (or ``--endpoint``), ``--messages`` 1 KiB messages (1,000,000 by default)
are written with the SDK producer. Then, in the same run, the SDK PullConsumer drains them
(``orbitmq bench sdk-pull``'s ``drain_rate``) and a Spark Structured Streaming query of the
"rocketmq" source (local[N], Trigger.AvailableNow, the ``noop`` sink) drains them from the
earliest offset. Spark's msgs/s counts from the query's start to its end (the JVM and session
start before); the figure printed is its ratio to the PullConsumer's. Needs ``orbitmq[spark]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence

from orbitmq.bench.scenario import start_local, stop_local
from orbitmq.bench.sdk_pull import drain_rate, write_backlog


def spark_drain_rate(endpoint: str, topic: str, expected: int, cores: int, max_per_trigger: int | None
                     ) -> tuple[float, int, int]:
    """(msgs/s, rows read, micro-batches) of a streaming query reading ``topic`` from the earliest."""
    from pyspark.sql import SparkSession

    from orbitmq.spark import register

    # Spark's planning workers run PYSPARK_PYTHON (default: python3 on the PATH), not the
    # spark.pyspark.python conf: both must be this interpreter, which has orbitmq installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("orbitmq-bench-spark-read")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.pyspark.python", sys.executable).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        with tempfile.TemporaryDirectory(prefix="orbitmq-bench-spark-") as cp:
            reader = (spark.readStream.format("rocketmq").option("endpoints", endpoint).option("topic", topic)
                      .option("startingOffsets", "earliest"))
            if max_per_trigger:
                reader = reader.option("maxMessagesPerTrigger", max_per_trigger)
            started = time.monotonic()
            query = (reader.load().writeStream.format("noop").trigger(availableNow=True)
                     .option("checkpointLocation", cp).start())
            query.awaitTermination()
            elapsed = time.monotonic() - started
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            batches = sum(1 for p in query.recentProgress if p["numInputRows"])
            query.stop()
    finally:
        spark.stop()
    if rows != expected:
        print(f"warning: the query read {rows:,} rows, {expected:,} expected", file=sys.stderr)
    return rows / elapsed, rows, batches


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench spark-read", description=__doc__)
    p.add_argument("--endpoint", help="a running proxy (default: start a temporary orbitmq local)")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    p.add_argument("--max-per-trigger", type=int, default=0,
                   help="maxMessagesPerTrigger (default: none, one micro-batch for the whole backlog)")
    args = p.parse_args(list(argv or []))
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("orbitmq bench spark-read needs the spark extra: pip install -e '.[spark]'", file=sys.stderr)
        return 2
    tmp = None
    proc = None
    endpoint = args.endpoint
    if endpoint is None:
        tmp = tempfile.TemporaryDirectory(prefix="orbitmq-bench-spark-read-")
        proc, endpoint = start_local(tmp.name)
    topic = f"SparkReadBench{uuid.uuid4().hex[:8]}"
    try:
        asyncio.run(write_backlog(endpoint, topic, args.messages, args.size))
        sdk_rate, _ = asyncio.run(drain_rate(endpoint, topic, f"SparkReadBenchG{uuid.uuid4().hex[:8]}",
                                             args.messages))
        spark_rate, rows, batches = spark_drain_rate(endpoint, topic, args.messages, args.cores,
                                                     args.max_per_trigger or None)
    finally:
        if proc is not None:
            stop_local(proc)
        if tmp is not None:
            tmp.cleanup()
    print(f"SDK PullConsumer drained {args.messages:,} x {args.size} B messages: {sdk_rate:,.0f} msgs/s")
    print(f"Spark streaming read (local[{args.cores}], AvailableNow, {batches} micro-batch(es), noop sink) drained "
          f"{rows:,}: {spark_rate:,.0f} msgs/s = {spark_rate / sdk_rate:.0%} of the SDK PullConsumer (goal >= 50 %)")
    return 0
