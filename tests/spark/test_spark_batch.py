"""Batch reads and writes of the "rocketmq" data source, and its bad-input errors."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from pyspark.sql import functions as F

from orbitmq import ClientConfig, Message, Producer, PullConsumer
from orbitmq.client import MQClientAPI
from tests.spark.conftest import name


def produce(endpoints: str, topic: str, bodies: list[bytes], **fields) -> None:
    with Producer(ClientConfig(endpoints), max_batch_messages=256) as p:
        futures = [p.send_async(Message(topic, b, **fields)) for b in bodies]
        for f in futures:
            f.result()


def endpoints(cluster) -> str:
    return ";".join(cluster.proxies)


def _wait_dispatched(cluster, topic: str, queues: int, total: int, timeout: float = 60) -> None:  # noqa: ASYNC109
    async def max_offsets() -> int:
        api = MQClientAPI(timeout=10)
        try:
            return sum([await api.get_max_offset(cluster.broker, topic, q) for q in range(queues)])
        finally:
            await api.close()

    deadline = time.monotonic() + timeout
    while (found := asyncio.run(max_offsets())) < total:
        assert time.monotonic() < deadline, f"only {found} of {total} messages dispatched after {timeout}s"
        time.sleep(0.2)


def test_batch_write_then_read_exactly_those_rows(cluster, spark) -> None:
    topic = cluster.create_topic(name("SparkBatch"), queues=4)
    n = 100_000
    df = (spark.range(n, numPartitions=4)
          .select(F.concat(F.lit("row-"), F.col("id").cast("string")).alias("body"),
                  F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("tag"),
                  F.array(F.concat(F.lit("k"), F.col("id").cast("string"))).alias("keys"),
                  F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties")))
    df.write.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic).mode("append").save()
    # Acknowledged means in the CommitLog; readable means dispatched to the ConsumeQueues, which
    # a loaded machine does a moment later (as RocketMQ): "latest" is read once all are there.
    _wait_dispatched(cluster, topic, 4, n)

    read = (spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic).load())
    assert read.schema.simpleString() == (
        "struct<topic:string,broker:string,queueId:int,queueOffset:bigint,messageId:string,tag:string,"
        "keys:array<string>,body:binary,properties:map<string,string>,messageGroup:string,"
        "bornTimestamp:timestamp,storeTimestamp:timestamp>")
    rows = read.select(F.col("body").cast("string").alias("b"), "tag", "keys", "properties", "topic", "broker",
                       "queueId", "queueOffset", "messageId", "storeTimestamp").collect()
    assert len(rows) == n
    assert sorted(r.b for r in rows) == sorted(f"row-{i}" for i in range(n))
    one = next(r for r in rows if r.b == "row-7")
    assert one.tag == "odd" and one.keys == ["k7"] and one.properties == {"n": "7"} and one.topic == topic
    assert one.broker == "broker-a" and 0 <= one.queueId < 4 and one.queueOffset >= 0 and one.messageId
    assert one.storeTimestamp is not None
    assert len({(r.queueId, r.queueOffset) for r in rows}) == n

    # A range of offsets.
    ranged = (spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
              .option("startingOffsets", json.dumps({topic: {"broker-a": {"0": 10, "1": -1, "2": -1, "3": -1}}}))
              .option("endingOffsets", json.dumps({topic: {"broker-a": {"0": 20, "1": -1, "2": -1, "3": -1}}}))
              .load().select("queueId", "queueOffset").collect())
    assert sorted((r.queueId, r.queueOffset) for r in ranged) == [(0, o) for o in range(10, 20)]


def test_batch_read_from_timestamp_and_with_a_filter(cluster, spark) -> None:
    import time

    topic = cluster.create_topic(name("SparkTs"), queues=2)
    produce(endpoints(cluster), topic, [b"old-%d" % i for i in range(50)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(endpoints(cluster), topic, [b"new-%d" % i for i in range(30)])
    df = (spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
          .option("startingTimestamp", str(middle)).load())
    assert sorted(r.body.decode() for r in df.collect()) == sorted(f"new-{i}" for i in range(30))
    before = (spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
              .option("endingTimestamp", str(middle)).load())
    assert before.count() == 50
    produce(endpoints(cluster), topic, [b"tagged-%d" % i for i in range(40)], tag="even")
    evens = (spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
             .option("filterExpression", "even || none").load())
    assert sorted(r.body.decode() for r in evens.collect()) == sorted(f"tagged-{i}" for i in range(40))


def test_deterministic_message_ids_are_kept_by_the_proxy(cluster, spark) -> None:
    topic = cluster.create_topic(name("SparkIds"), queues=2)
    df = spark.range(20, numPartitions=2).select(F.col("id").cast("string").alias("body"))
    writer = (df.write.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
              .option("deterministicMessageIds", "true").mode("append"))
    writer.save()
    ids = {r.messageId for r in spark.read.format("rocketmq").option("endpoints", endpoints(cluster))
           .option("topic", topic).load().collect()}
    assert len(ids) == 20 and all(len(i) == 32 and i == i.upper() for i in ids)
    with PullConsumer(ClientConfig(endpoints(cluster)), "orbitmq-spark-source") as c:
        got = []
        for mq in c.queues(topic):
            got += c.pull(mq, 0, 32)[0]
    assert {m.message_id for m in got} == ids


def _error_of(action) -> str:
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)


def test_bad_input_fails_naming_the_option_or_column(cluster, spark) -> None:
    topic = cluster.create_topic(name("SparkBad"), queues=2)
    ep = endpoints(cluster)

    def read(**opts):
        r = spark.read.format("rocketmq").option("endpoints", ep).option("topic", topic)
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load().collect()

    assert "unknown option 'startingoffset'" in _error_of(lambda: read(startingOffset="earliest"))
    msg = _error_of(lambda: read(startingOffsets=json.dumps({topic: {"broker-a": {"0": 1}}})[:-1]))
    assert "option startingOffsets is neither" in msg and "valid JSON" in msg
    assert "option startingOffsets: queue id 'x'" in _error_of(
        lambda: read(startingOffsets=json.dumps({topic: {"broker-a": {"x": 1}}})))
    assert "does not apply to a batch read" in _error_of(lambda: read(maxMessagesPerTrigger="10"))
    assert "option failOnDataLoss must be true or false" in _error_of(lambda: read(failOnDataLoss="maybe"))
    assert "topic 'NoSuchTopicSpark' does not exist" in _error_of(
        lambda: spark.read.format("rocketmq").option("endpoints", ep).option("topic", "NoSuchTopicSpark").load()
        .collect())
    dead = "127.0.0.1:1;127.0.0.1:2"
    msg = _error_of(lambda: spark.read.format("rocketmq").option("endpoints", dead).option("topic", topic).load()
                    .collect())
    assert "no proxy reachable (endpoints tried: 127.0.0.1:1, 127.0.0.1:2)" in msg, msg

    def write(df, **opts):
        w = df.write.format("rocketmq").option("endpoints", ep).mode("append")
        for k, v in opts.items():
            w = w.option(k, v)
        w.save()

    ints = spark.range(3).select(F.col("id").alias("body"))
    assert "column body must be binary or string, not bigint" in _error_of(lambda: write(ints, topic=topic))
    nobody = spark.range(3).select(F.col("id").cast("string").alias("value"))
    assert "needs a column body" in _error_of(lambda: write(nobody, topic=topic))
    nulls = spark.range(3).select(F.when(F.col("id") == 1, None).otherwise("x").alias("body"))
    assert "column body is null in row 1" in _error_of(lambda: write(nulls.coalesce(1), topic=topic))
    ok = spark.range(3).select(F.col("id").cast("string").alias("body"))
    assert "unknown option 'topics'" in _error_of(lambda: write(ok, topics=topic))
    assert "set option topic or give the DataFrame a topic column" in _error_of(lambda: write(ok))
    assert "topic 'NoSuchTopicSpark' does not exist" in _error_of(lambda: write(ok, topic="NoSuchTopicSpark"))
    # A send the server refuses fails the task with the server's code.
    far = spark.range(2).select(F.lit("x").alias("body"),
                                (F.current_timestamp() + F.expr("INTERVAL 30 DAYS")).alias("deliveryTimestamp"))
    msg = _error_of(lambda: write(far, topic=topic))
    assert f"rocketmq: sending to topic {topic} failed: ILLEGAL_DELIVERY_TIME" in msg, msg
    # Nothing was sent by any of these.
    assert read().__len__() == 0
