"""The Kafka source's options on the "rocketmq" source, end to end with the cluster and local[2]:
minOffsetsPerTrigger/maxTriggerDelay (beside maxOffsetsPerTrigger), offsets by timestamp per queue,
minPartitions/maxRecordsPerPartition, topicPattern, includeProperties and the sink's properties,
the lag metrics of a progress, and the bad-input errors that come before any data moves."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from orbitmq import ClientConfig, Message, Producer
from orbitmq.spark import lag
from tests.spark.conftest import name
from tests.spark.test_spark_batch import _error_of, _wait_dispatched, endpoints, produce
from tests.spark.test_spark_stream import stream


def produce_spread(endpoints_: str, topic: str, bodies: list[bytes]) -> None:
    """One SendMessage per message, so they spread over the queues (a batch goes to one queue)."""
    with Producer(ClientConfig(endpoints_), linger=0) as p:
        for b in bodies:
            p.send(Message(topic, b))


def read(spark, cluster, topic: str | None = None, **opts):
    r = spark.read.format("rocketmq").option("endpoints", endpoints(cluster))
    if topic is not None:
        r = r.option("topic", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_offsets_by_timestamp_per_queue_and_the_strategy(cluster, spark) -> None:
    topic = cluster.create_topic(name("SparkTsQ"), queues=2)
    produce_spread(endpoints(cluster), topic, [b"old-%d" % i for i in range(20)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce_spread(endpoints(cluster), topic, [b"new-%d" % i for i in range(20)])
    _wait_dispatched(cluster, topic, 2, 40)
    every = read(spark, cluster, topic).select("queueId", "queueOffset", "storeTimestamp", "body").collect()
    cut = {q: min((r.queueOffset for r in every if r.queueId == q and r.body.startswith(b"new")), default=None)
           for q in (0, 1)}
    assert all(v is not None for v in cut.values()), cut

    # Queue 0 from the middle, queue 1 from the start; queue 1 ends at the middle.
    starting = json.dumps({topic: {"broker-a/0": middle, "broker-a/1": 0}})
    ending = json.dumps({topic: {"broker-a/0": middle + 3_600_000, "broker-a/1": middle}})
    got = read(spark, cluster, topic, startingOffsetsByTimestamp=starting, endingOffsetsByTimestamp=ending) \
        .select("queueId", "queueOffset", "body").collect()
    expected = sorted([(0, r.queueOffset) for r in every if r.queueId == 0 and r.queueOffset >= cut[0]]
                      + [(1, r.queueOffset) for r in every if r.queueId == 1 and r.queueOffset < cut[1]])
    assert sorted((r.queueId, r.queueOffset) for r in got) == expected
    assert {r.body[:3] for r in got if r.queueId == 0} == {b"new"} and {r.body[:3] for r in got if r.queueId == 1} \
        == {b"old"}

    future = json.dumps({topic: {"broker-a/0": middle, "broker-a/1": middle + 3_600_000}})
    msg = _error_of(lambda: read(spark, cluster, topic, startingOffsetsByTimestamp=future).collect())
    assert (f"option startingOffsetsByTimestamp: no message of topic {topic} queue broker-a/1 was stored at or "
            f"after {middle + 3_600_000}") in msg, msg
    latest = read(spark, cluster, topic, startingOffsetsByTimestamp=future,
                  startingOffsetsByTimestampStrategy="latest").select("queueId", "body").collect()
    assert {r.queueId for r in latest} == {0} and len(latest) == sum(1 for r in every if r.queueId == 0
                                                                     and r.queueOffset >= cut[0])
    # startingTimestamp: latest by default (as before the strategy existed), error when asked.
    assert read(spark, cluster, topic, startingTimestamp=str(middle + 3_600_000)).count() == 0
    assert "option startingTimestamp: no message" in _error_of(
        lambda: read(spark, cluster, topic, startingTimestamp=str(middle + 3_600_000),
                     startingOffsetsByTimestampStrategy="error").collect())

    unknown = json.dumps({topic: {"broker-a/0": 0, "broker-a/1": 0, "broker-a/9": 0}})
    msg = _error_of(lambda: read(spark, cluster, topic, startingOffsetsByTimestamp=unknown).collect())
    assert f"option startingOffsetsByTimestamp names queue broker-a/9 of topic {topic}, which has no such" in msg
    missing = json.dumps({topic: {"broker-a/0": 0}})
    msg = _error_of(lambda: read(spark, cluster, topic, startingOffsetsByTimestamp=missing).collect())
    assert f"option startingOffsetsByTimestamp gives no timestamp for {topic} broker-a/1" in msg, msg
    msg = _error_of(lambda: read(spark, cluster, topic, endingOffsetsByTimestamp=json.dumps({"Else": {"b/0": 1}}))
                    .collect())
    assert "option endingOffsetsByTimestamp names topic 'Else', which is not in option topic" in msg, msg


def test_min_partitions_and_max_records_per_partition_read_exact_slices(cluster, spark) -> None:
    topic = cluster.create_topic(name("SparkParts"), queues=2)
    produce_spread(endpoints(cluster), topic, [b"p-%d" % i for i in range(200)])
    _wait_dispatched(cluster, topic, 2, 200)

    def slices(**opts) -> tuple[int, list]:
        df = read(spark, cluster, topic, **opts)
        rows = df.select(F.spark_partition_id().alias("pid"), "queueId", "queueOffset").collect()
        return df.rdd.getNumPartitions(), rows

    def check(rows) -> None:
        assert len(rows) == 200 and len({(r.queueId, r.queueOffset) for r in rows}) == 200
        per_part: dict[int, list] = {}
        for r in rows:
            per_part.setdefault(r.pid, []).append((r.queueId, r.queueOffset))
        for items in per_part.values():  # one queue per partition, a contiguous slice of it
            assert len({q for q, _ in items}) == 1
            offsets = sorted(o for _, o in items)
            assert offsets == list(range(offsets[0], offsets[-1] + 1))

    n, rows = slices()
    assert n == 2
    check(rows)
    n, rows = slices(minPartitions="7")
    assert n >= 6
    check(rows)
    n, rows = slices(maxRecordsPerPartition="30")
    assert n == 8  # each queue's ~100 in 4 slices of at most 30
    check(rows)
    # With a filter the slices still split offsets: only the matching messages come back, once each.
    produce(endpoints(cluster), topic, [b"t-%d" % i for i in range(40)], tag="keep")
    _wait_dispatched(cluster, topic, 2, 240)
    kept = read(spark, cluster, topic, filterExpression="keep", maxRecordsPerPartition="7").collect()
    assert sorted(r.body for r in kept) == sorted(b"t-%d" % i for i in range(40))


def test_topic_pattern_picks_up_new_matching_topics(cluster, spark, tmp_path: Path) -> None:
    prefix = name("SparkPat")
    first = cluster.create_topic(f"{prefix}-a", queues=1)
    other = cluster.create_topic(name("SparkNotPat"), queues=1)
    produce(endpoints(cluster), first, [b"a-%d" % i for i in range(10)])
    produce(endpoints(cluster), other, [b"x-%d" % i for i in range(5)])
    pattern = f"{prefix}-.*"
    batch = read(spark, cluster, topicPattern=pattern, namesrvAddr=cluster.namesrv).collect()
    assert sorted(r.body for r in batch) == sorted(b"a-%d" % i for i in range(10))
    # The cluster's and brokers' own topics, system, retry and DLQ topics never match.
    wide = read(spark, cluster, topicPattern=f"{prefix}-a|DefaultCluster|broker-.*|TBW102|rmq_sys_.*|%RETRY%.*|%DLQ%.*",
                namesrvAddr=cluster.namesrv).select("topic").collect()
    assert {r.topic for r in wide} == {first}

    seen: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def collect(df, _):
        with lock:
            seen.extend((r.topic, r.body) for r in df.select("topic", "body").collect())

    r = (spark.readStream.format("rocketmq").option("endpoints", endpoints(cluster)).option("topicPattern", pattern)
         .option("namesrvAddr", cluster.namesrv).option("startingOffsets", "earliest").load())
    q = (r.writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
         .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 10 and time.monotonic() < deadline:
            time.sleep(0.2)
            assert q.exception() is None
        second = cluster.create_topic(f"{prefix}-b", queues=2)  # matches: read from its earliest
        produce(endpoints(cluster), second, [b"b-%d" % i for i in range(6)])
        produce(endpoints(cluster), other, [b"x-more"])
        while len(seen) < 16 and time.monotonic() < deadline:
            time.sleep(0.2)
            assert q.exception() is None
        time.sleep(1)
    finally:
        q.stop()
    assert sorted(seen) == sorted([(first, b"a-%d" % i) for i in range(10)] + [(second, b"b-%d" % i)
                                                                                for i in range(6)])


def test_include_properties_and_the_sinks_properties_column(cluster, spark) -> None:
    topic = cluster.create_topic(name("SparkProps"), queues=1)
    df = spark.range(5, numPartitions=1).select(
        F.concat(F.lit("b-"), F.col("id").cast("string")).alias("body"),
        F.create_map(F.lit("region"), F.lit("eu"), F.lit("n"), F.col("id").cast("string")).alias("properties"))
    df.write.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic).mode("append").save()
    _wait_dispatched(cluster, topic, 1, 5)
    rows = read(spark, cluster, topic, includeProperties="true").select("body", "properties").collect()
    assert {r.body.decode(): (r.properties["region"], r.properties["n"]) for r in rows} == \
        {f"b-{i}": ("eu", str(i)) for i in range(5)}
    bare = read(spark, cluster, topic, includeProperties="false")
    assert "properties" not in bare.columns and bare.count() == 5
    assert sorted(r.body for r in bare.collect()) == sorted(b"b-%d" % i for i in range(5))


def _wait_first_trigger(q, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not q.lastProgress and time.monotonic() < deadline:
        time.sleep(0.1)
    assert q.lastProgress, "no trigger ran"


def test_min_offsets_per_trigger_waits_for_enough_messages(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkMin"), queues=1)
    sizes: list[int] = []
    q = (stream(spark, cluster, topic, minOffsetsPerTrigger="50", maxTriggerDelay="1h", maxOffsetsPerTrigger="100")
         .writeStream.foreachBatch(lambda df, _: sizes.append(df.count()))
         .trigger(processingTime="200 milliseconds").option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        _wait_first_trigger(q)  # the first trigger (no data) starts the delay's clock
        produce(endpoints(cluster), topic, [b"few-%d" % i for i in range(20)])
        _wait_dispatched(cluster, topic, 1, 20)
        time.sleep(2.5)  # a dozen triggers: all skipped, 20 < 50
        assert [n for n in sizes if n] == []
        assert q.exception() is None
        produce(endpoints(cluster), topic, [b"more-%d" % i for i in range(40)])
        deadline = time.monotonic() + 60
        while sum(sizes) < 60 and time.monotonic() < deadline:
            time.sleep(0.2)
            assert q.exception() is None
    finally:
        q.stop()
    assert [n for n in sizes if n] == [60]


def test_max_trigger_delay_fires_below_the_minimum(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkDelay"), queues=1)
    batches: list[tuple[float, int]] = []
    started = time.monotonic()  # the first trigger, which starts the delay's clock, is after this
    q = (stream(spark, cluster, topic, minOffsetsPerTrigger="1000", maxTriggerDelay="3s")
         .writeStream.foreachBatch(lambda df, _: batches.append((time.monotonic(), df.count())))
         .trigger(processingTime="200 milliseconds").option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        _wait_first_trigger(q)
        sent = time.monotonic()
        produce(endpoints(cluster), topic, [b"d-%d" % i for i in range(5)])
        deadline = time.monotonic() + 60
        while not [n for _, n in batches if n] and time.monotonic() < deadline:
            time.sleep(0.1)
            assert q.exception() is None
    finally:
        q.stop()
    fired = [(t, n) for t, n in batches if n]
    assert [n for _, n in fired] == [5]
    assert fired[0][0] - started >= 2.9, f"fired {fired[0][0] - started:.2f}s after the start: not delayed"
    assert fired[0][0] - sent < 20


def test_lag_metrics_from_the_progress(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkLagM"), queues=2)
    produce(endpoints(cluster), topic, [b"x" * 100 for _ in range(300)])
    _wait_dispatched(cluster, topic, 2, 300)
    q = (stream(spark, cluster, topic, startingOffsets="earliest", maxOffsetsPerTrigger="100").writeStream
         .format("noop").trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "cp")).start())
    q.awaitTermination(120)
    q.stop()
    assert q.exception() is None
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in progress] == [100, 100, 100]
    assert progress[0]["sources"][0]["metrics"] == {}  # pyspark gives a Python source no metrics hook
    first = lag(progress[0], options={"endpoints": endpoints(cluster)})
    assert first["minOffsetsBehindLatest"] + first["maxOffsetsBehindLatest"] == 200
    assert first["avgOffsetsBehindLatest"] == pytest.approx(100.0)
    assert 200 * 100 <= first["estimatedTotalBytesBehindLatest"] <= 200 * 200, first
    last = lag(progress[-1], options={"endpoints": endpoints(cluster)})
    assert last == {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 0, "avgOffsetsBehindLatest": 0.0,
                    "estimatedTotalBytesBehindLatest": 0}


def test_bad_kafka_options_fail_before_any_data_moves(cluster, spark, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("SparkKBad"), queues=1)
    produce(endpoints(cluster), topic, [b"untouched"])
    ep = endpoints(cluster)
    assert "option topicPattern is not a valid regular expression" in _error_of(
        lambda: read(spark, cluster, topicPattern="([", namesrvAddr=cluster.namesrv).collect())
    assert "options topic and topicPattern exclude each other" in _error_of(
        lambda: read(spark, cluster, topic, topicPattern=".*", namesrvAddr=cluster.namesrv).collect())
    assert "option minPartitions must be a positive integer" in _error_of(
        lambda: read(spark, cluster, topic, minPartitions="0").collect())
    assert "option startingOffsetsByTimestamp names topic 'Nope'" in _error_of(
        lambda: read(spark, cluster, topic, startingOffsetsByTimestamp='{"Nope": {"broker-a/0": 1}}').collect())

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

    assert "option maxTriggerDelay must be a duration such as '15m'" in error(minOffsetsPerTrigger="5",
                                                                             maxTriggerDelay="fortnight")
    assert "option minOffsetsPerTrigger (10) is greater than maxOffsetsPerTrigger (5)" in error(
        minOffsetsPerTrigger="10", maxOffsetsPerTrigger="5")
    assert f"option startingOffsetsByTimestamp names queue broker-b/0 of topic {topic}" in error(
        startingOffsetsByTimestamp=json.dumps({topic: {"broker-a/0": 1, "broker-b/0": 1}}))
    # Nothing read anything: the one message is still there to read from the earliest.
    assert [r.body for r in read(spark, cluster, topic).collect()] == [b"untouched"]
    assert ep
