"""failOnDataLoss both ways, after retention really deleted the CommitLog segments holding the
first messages of a queue (deleteExpiredCommitLog with fileReservedTime=0, as
tests/admin/test_admin_ops.py::test_delete_expired_commit_log forces it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orbitmq import ClientConfig, MessageQueue, PullConsumer
from tests.spark.conftest import name
from tests.spark.test_spark_batch import endpoints, produce


def admin(cluster, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", cluster.namesrv],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def truncated(cluster) -> tuple[str, int, int]:
    """A one-queue topic of 700 messages whose first ones retention deleted: (topic, min, max)."""
    topic = cluster.create_topic(name("SparkLoss"), queues=1)
    produce(endpoints(cluster), topic, [(b"%05d" % i) * 2048 for i in range(700)])  # 10 KiB each: 7 MB
    mq = MessageQueue(topic, "broker-a", 0)
    admin(cluster, "updateBrokerConfig", "-b", cluster.broker, "-k", "fileReservedTime", "-v", "0")
    try:
        admin(cluster, "deleteExpiredCommitLog", "-c", "DefaultCluster")
        with PullConsumer(ClientConfig(endpoints(cluster)), "orbitmq-spark-source") as c:
            deadline = time.monotonic() + 30
            while c.min_offset(mq) == 0:
                assert time.monotonic() < deadline, "retention deleted nothing"
                time.sleep(0.2)
            low, high = c.min_offset(mq), c.max_offset(mq)
    finally:
        admin(cluster, "updateBrokerConfig", "-b", cluster.broker, "-k", "fileReservedTime", "-v", "72")
    assert 0 < low < high == 700
    return topic, low, high


def test_batch_read_below_the_queue_minimum(cluster, spark, truncated) -> None:
    topic, low, high = truncated
    start = json.dumps({topic: {"broker-a": {"0": 0}}})

    def read(**opts):
        r = spark.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic) \
            .option("startingOffsets", start)
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load()

    with pytest.raises(Exception) as info:
        read().collect()
    assert f"data loss in topic {topic} queue broker-a/0: offsets [0, {low}) are no longer available" \
        in str(info.value)
    rows = read(failOnDataLoss="false").select("queueOffset", "body").collect()
    assert sorted(r.queueOffset for r in rows) == list(range(low, high))
    assert len({r.body for r in rows}) == high - low and all(r.body == r.body[:5] * 2048 for r in rows)


def test_stream_read_below_the_queue_minimum(cluster, spark, truncated, tmp_path: Path) -> None:
    topic, low, high = truncated

    def query(checkpoint: str, sink, **opts):
        r = (spark.readStream.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic)
             .option("startingOffsets", json.dumps({topic: {"broker-a": {"0": 0}}})).option("maxMessagesPerTrigger", 200))
        for k, v in opts.items():
            r = r.option(k, v)
        q = r.load().writeStream.foreachBatch(sink).trigger(availableNow=True) \
            .option("checkpointLocation", str(tmp_path / checkpoint)).start()
        return q

    q = query("strict", lambda df, _: df.count())
    with pytest.raises(Exception) as info:
        q.awaitTermination(60)
    q.stop()
    assert f"data loss in topic {topic} queue broker-a/0: offsets [0, {low})" in str(info.value)

    got: list[int] = []
    q = query("lenient", lambda df, _: got.extend(r.queueOffset for r in df.select("queueOffset").collect()),
              failOnDataLoss="false")
    q.awaitTermination(120)
    q.stop()
    assert q.exception() is None
    assert sorted(got) == list(range(low, high))
