"""The "rocketmq" source and sink from a Spark Connect client (issue 27 item 4).

One Spark Connect server for the module, started from the pip package
(tests/support/spark_connect.py), and this test process as its client (a
``pyspark.sql.connect.session.SparkSession`` of ``sc://...``). The data source is registered from
the client (``orbitmq.spark.register``): pyspark pickles the class to the server, whose Python
workers import orbitmq to read and write. A Connect client in a process sets
SPARK_CONNECT_MODE_ENABLED, which turns every pyspark.sql function of that process into its
Connect twin; the fixture puts the variable back afterwards, so the classic session of the other
Spark tests (tests/spark/conftest.py) keeps working in the same pytest process. The example
Declarative Pipeline runs here too with ``spark-pipelines --remote`` on this server
(tests/spark/test_spark_pipelines.py runs it on the CLI's own local server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from orbitmq.spark import register
from tests.spark.conftest import name
from tests.spark.test_spark_batch import _wait_dispatched, endpoints, produce
from tests.spark.test_spark_demo import EXAMPLE, load_example
from tests.spark.test_spark_pipelines import check_pipeline
from tests.support.process import ProcessRunner
from tests.support.spark_connect import SparkConnectServer

CLIENT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    runner = ProcessRunner(tmp_path_factory.mktemp("spark-connect"))
    server = SparkConnectServer(runner)
    try:
        server.start()
        yield server
    except BaseException:
        print("\n===== Spark Connect server log =====\n" + server.report(), file=sys.stderr)
        raise
    finally:
        server.stop()
        runner.stop_all()


@pytest.fixture(scope="module")
def connect(connect_server: SparkConnectServer):
    # pyspark.sql.SparkSession.builder.remote(...).getOrCreate() refuses a Connect session while a
    # classic SparkContext lives in the process (SESSION_ALREADY_EXIST), and the other Spark tests'
    # session does: the Connect builder itself has no such check. What the classic builder would
    # do besides, set SPARK_CONNECT_MODE_ENABLED (pyspark.sql.utils.is_remote), is done here.
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    saved = {key: os.environ.get(key) for key in CLIENT_ENV}
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = ConnectSession.builder.remote(connect_server.url).create()
    try:
        register(session)
        yield session
    except BaseException:
        print("\n===== Spark Connect server log =====\n" + connect_server.report(), file=sys.stderr)
        raise
    finally:
        session.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_the_session_is_a_connect_client(connect) -> None:
    assert type(connect).__module__ == "pyspark.sql.connect.session"
    assert connect.range(3).count() == 3  # planned and run on the server


def test_batch_write_then_read_through_connect(cluster, connect) -> None:
    topic = cluster.create_topic(name("ScBatch"), queues=4)
    n = 200
    df = (connect.range(n, numPartitions=2)
          .select(F.concat(F.lit("sc-"), F.col("id").cast("string")).alias("body"),
                  F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("tag"),
                  F.array(F.concat(F.lit("k"), F.col("id").cast("string"))).alias("keys"),
                  F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties")))
    df.write.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic).mode("append").save()
    _wait_dispatched(cluster, topic, 4, n)

    rows = (connect.read.format("rocketmq").option("endpoints", endpoints(cluster)).option("topic", topic).load()
            .select(F.col("body").cast("string").alias("b"), "tag", "keys", "properties", "queueId", "queueOffset")
            .collect())
    assert sorted(r.b for r in rows) == sorted(f"sc-{i}" for i in range(n))
    for r in rows:
        i = int(r.b[3:])
        assert r.tag == ("even" if i % 2 == 0 else "odd") and r.keys == [f"k{i}"] and r.properties == {"n": str(i)}
    assert len({(r.queueId, r.queueOffset) for r in rows}) == n


def test_demo_stream_through_connect_exactly_once(cluster, connect, connect_server, tmp_path: Path) -> None:
    """The demo job (examples/spark_pipeline.py) from Connect clients, twice on one checkpoint (on
    the server's file system, here the same machine's): first its own ``main --remote`` in a process
    of its own (it sends 120 messages first), then its ``start`` from this process after 80 more
    arrived. Trigger.AvailableNow both times; the second run reads only what the first did not."""
    demo = load_example()
    source = cluster.create_topic(name("ScSrc"), queues=4)
    sink = cluster.create_topic(name("ScSink"), queues=4)
    ep = endpoints(cluster)
    checkpoint = tmp_path / "checkpoint"
    first, total = 120, 200
    done = subprocess.run([sys.executable, str(EXAMPLE), "--remote", connect_server.url, "--endpoints", ep,
                           "--source", source, "--sink", sink, "--checkpoint", str(checkpoint), "--group", "",
                           "--produce", str(first), "--available-now"],
                          capture_output=True, text=True, timeout=240, cwd=EXAMPLE.parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]

    later = [b"later message %d" % i for i in range(first, total)]
    produce(ep, source, later, keys=["later"], properties={"p": "1"})
    _wait_dispatched(cluster, source, 4, total)
    query = demo.start(connect, ep, source, sink, str(checkpoint), group=None, available_now=True)
    query.awaitTermination()
    assert query.exception() is None

    _wait_dispatched(cluster, sink, 4, total)
    rows = (connect.read.format("rocketmq").option("endpoints", ep).option("topic", sink).load()
            .select(F.col("body").cast("string").alias("b"), "tag", "keys", "properties").collect())
    sent = [f"demo message {i}" + "!" * (i % 20) for i in range(first)] + [b.decode() for b in later]
    assert sorted(r.b for r in rows) == sorted(text.upper() for text in sent)
    for r in rows:
        assert r.tag == ("long" if len(r.b) > 16 else "short")
        assert r.keys == (["later"] if r.b.startswith("LATER") else [f"order-{r.b.split()[2].rstrip('!')}"])
        assert r.properties["sourceTopic"] == source
    assert len({r.properties["sourceQueue"] for r in rows}) == total  # each (queue, offset) once


def _error_of(action) -> str:  # noqa: ANN001
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)


def test_bad_input_through_connect_names_the_option(cluster, connect, tmp_path: Path) -> None:
    topic = cluster.create_topic(name("ScBad"), queues=1)
    ep = endpoints(cluster)
    msg = _error_of(lambda: connect.read.format("rocketmq").option("endpoints", ep).load().collect())
    assert "rocketmq: option topic is required" in msg, msg
    msg = _error_of(lambda: connect.read.format("rocketmq").option("endpoints", ep).option("topic", topic)
                    .option("startingOffsets", json.dumps({topic: {"broker-a": {"x": 1}}})).load().collect())
    assert "option startingOffsets: queue id 'x'" in msg, msg
    msg = _error_of(lambda: connect.range(1).select(F.lit("b").alias("body")).write.format("rocketmq")
                    .option("endpoints", ep).mode("append").save())
    assert "rocketmq: set option topic or give the DataFrame a topic column" in msg, msg

    query = (connect.readStream.format("rocketmq").option("endpoints", ep).load().writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        msg = _error_of(lambda: query.awaitTermination(60))
    finally:
        query.stop()
    assert "rocketmq: option topic is required" in msg, msg


def test_pipeline_on_the_connect_server(cluster, connect, connect_server, tmp_path: Path) -> None:
    """``spark-pipelines --remote sc://...`` (SparkPipelines passes it on instead of ``local``): the
    definitions file registers the source from the CLI's client, the flows run on this server."""
    check_pipeline(cluster, connect, tmp_path, remote=connect_server.url)
