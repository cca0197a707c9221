"""Streaming reads and writes of the "rocketmq" data source: admission control, AvailableNow,
exactly-once after a stop mid-batch, consumer-group lag, deterministic message ids."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from pyspark.sql import functions as F

from orbitmq import ClientConfig, PullConsumer
from tests.spark.conftest import name
from tests.spark.test_spark_batch import _wait_dispatched, endpoints, produce


def stream(spark, cluster, topic: str, **opts):
    r = spark.readStream.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_max_messages_per_trigger_and_available_now(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkLimit"), queues=4)
    produce(endpoints(cluster), topic, [b"m-%d" % i for i in range(1000)])
    batches: list[list[tuple[int, int]]] = []

    def collect(df, batch_id: int) -> None:
        batches.append([(r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect()])

    q = (stream(spark, cluster, topic, startingOffsets="earliest", maxMessagesPerTrigger="300").writeStream
         .foreachBatch(collect).trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "cp-now")).start())
    q.awaitTermination(120)
    assert [len(b) for b in batches] == [300, 300, 300, 100]
    seen = [x for b in batches for x in b]
    assert len(seen) == len(set(seen)) == 1000
    # Each batch is split across the queues in proportion to their backlog.
    per_queue = [sum(1 for qid, _ in batches[0] if qid == i) for i in range(4)]
    assert all(60 <= n <= 90 for n in per_queue), per_queue

    # A running query (processing-time trigger) from "latest": only what comes after it started,
    # in batches of at most 250. The 700 are sent from inside the first batch that has data (one
    # message sent to start it), and dispatched before that batch returns, so the next batches
    # are planned with all 700 readable whatever the machine's speed: 250, 250, 200.
    sizes: list[int] = []

    def count_and_feed(df, _batch_id: int) -> None:
        sizes.append(df.count())
        if sizes[-1] and sum(sizes) == 1:
            produce(endpoints(cluster), topic, [b"late-%d" % i for i in range(700)])
            _wait_dispatched(cluster, topic, 4, 1000 + 1 + 700)

    q = (stream(spark, cluster, topic, maxMessagesPerTrigger="250").writeStream
         .foreachBatch(count_and_feed).trigger(processingTime="200 milliseconds")
         .option("checkpointLocation", str(tmp_path / "cp-run")).start())
    try:
        deadline = time.monotonic() + 60
        while not q.lastProgress and time.monotonic() < deadline:
            time.sleep(0.2)
        produce(endpoints(cluster), topic, [b"late-start"])
        while sum(sizes) < 701 and time.monotonic() < deadline:
            time.sleep(0.2)
            assert q.exception() is None
    finally:
        q.stop()
    assert [n for n in sizes if n] == [1, 250, 250, 200], sizes


def _mid_batch(checkpoint: Path) -> bool:
    """The offset log has a batch the commit log has not: a micro-batch is running."""
    offsets = {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")} if (checkpoint / "offsets").exists() \
        else set()
    commits = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")} if (checkpoint / "commits").exists() \
        else set()
    return bool(offsets) and max(offsets) not in commits and len(commits) >= 1


def test_stopped_mid_batch_and_restarted_delivers_each_message_exactly_once(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkOnce"), queues=4)
    total = 3000
    produce(endpoints(cluster), topic, [b"once-%d" % i for i in range(total)])
    checkpoint, out = tmp_path / "cp", tmp_path / "out"

    @F.udf("string", useArrow=False)
    def slow(body):  # every batch takes a while (~0.4 s): the stop lands inside one
        time.sleep(0.002)
        return body.decode("utf-8")

    def start(trigger: dict):
        df = stream(spark, cluster, topic, startingOffsets="earliest", maxMessagesPerTrigger="400")
        return (df.select(slow(F.col("body")).alias("body"), "queueId", "queueOffset").writeStream
                .format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
                .trigger(**trigger).start())

    q = start({"processingTime": "100 milliseconds"})
    stopped_mid_batch = False
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and q.isActive:
            if _mid_batch(checkpoint):
                q.stop()
                stopped_mid_batch = True
                break
            time.sleep(0.02)
    finally:
        q.stop()
    assert stopped_mid_batch
    assert _mid_batch(checkpoint)  # the interrupted batch was never committed
    partial = spark.read.parquet(str(out)).count() if out.exists() else 0
    assert partial < total

    q = start({"availableNow": True})
    q.awaitTermination(180)
    q.stop()
    assert q.exception() is None
    rows = spark.read.parquet(str(out)).select("body", "queueId", "queueOffset").collect()
    assert len(rows) == total, f"{len(rows)} rows for {total} messages"
    assert sorted(r.body for r in rows) == sorted(f"once-{i}" for i in range(total))


def test_consumer_group_commits_offsets_and_lag_shows_in_the_admin_cli(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkLag"), queues=2)
    group = cluster.create_group(name("SparkLagGroup"))
    produce(endpoints(cluster), topic, [b"lag-%d" % i for i in range(300)])
    q = (stream(spark, cluster, topic, startingOffsets="earliest", consumerGroup=group,
                maxMessagesPerTrigger="100").writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "cp")).start())
    q.awaitTermination(120)
    assert q.exception() is None
    produce(endpoints(cluster), topic, [b"more-%d" % i for i in range(50)])

    def progress() -> dict:
        done = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "consumerProgress", "-g", group, "-n",
                               cluster.namesrv, "--json"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    report = progress()
    assert report["diffTotal"] == 50, report
    assert sum(r["consumerOffset"] for r in report["offsets"]) == 300


def test_stream_write_with_deterministic_ids_replays_the_same_ids(cluster, spark, tmp_path: Path) -> None:
    source = cluster.create_topic(name("SparkWSrc"), queues=2)
    sink = cluster.create_topic(name("SparkWDst"), queues=2)
    produce(endpoints(cluster), source, [b"w-%d" % i for i in range(200)])
    checkpoint = tmp_path / "cp"

    def run() -> None:
        q = (stream(spark, cluster, source, startingOffsets="earliest", maxMessagesPerTrigger="100")
             .select(F.upper(F.col("body").cast("string")).alias("body"), F.lit("copied").alias("tag"))
             .writeStream.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", sink)
             .option("deterministicMessageIds", "true").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        q.stop()
        assert q.exception() is None

    run()
    # Replay the last batch: forget that it was committed, as a crash before the commit would.
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (checkpoint / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    with PullConsumer(ClientConfig(endpoints(cluster)), "orbitmq-spark-source") as c:
        got = []
        for mq in c.queues(sink):
            offset = 0
            while True:
                msgs, offset = c.pull(mq, offset, 32)
                if not msgs:
                    break
                got += msgs
    assert len(got) == 300  # the replayed batch (100 rows) was sent again: at-least-once
    assert {m.body.decode() for m in got} == {f"W-{i}" for i in range(200)} and {m.tag for m in got} == {"copied"}
    ids = [m.message_id for m in got]
    assert len(set(ids)) == 200  # ... with the same message ids, so consumers can drop duplicates


def test_stream_bad_input_fails_the_query_before_it_reads(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkSBad"), queues=1)

    def error(**opts) -> str:
        q = (stream(spark, cluster, topic, **opts).writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / name("cp"))).start())
        try:
            q.awaitTermination(60)
        except Exception as exc:  # noqa: BLE001 -- StreamingQueryException
            return str(exc)
        finally:
            q.stop()
        raise AssertionError("the query did not fail")

    assert "does not apply to a streaming read" in error(endingOffsets="latest")
    assert "option maxMessagesPerTrigger must be >= 1" in error(maxMessagesPerTrigger="0")
    assert "option startingOffsets names topic 'Other'" in error(startingOffsets=json.dumps({"Other": {}}))


def test_new_queues_are_read_from_earliest(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkGrow"), queues=1)
    produce(endpoints(cluster), topic, [b"a-%d" % i for i in range(20)])
    seen: list[str] = []
    lock = threading.Lock()

    def collect(df, _):
        with lock:
            seen.extend(r.body.decode() for r in df.collect())

    q = (stream(spark, cluster, topic, startingOffsets="earliest").writeStream.foreachBatch(collect)
         .trigger(processingTime="200 milliseconds").option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        cluster.create_topic(topic, queues=3)  # expanded: queues 1 and 2 are new
        produce(endpoints(cluster), topic, [b"b-%d" % i for i in range(60)])
        while len(seen) < 80 and time.monotonic() < deadline:
            time.sleep(0.2)
            assert q.exception() is None
    finally:
        q.stop()
    assert sorted(seen) == sorted([f"a-{i}" for i in range(20)] + [f"b-{i}" for i in range(60)])
