"""A Spark Declarative Pipeline (pyspark.pipelines) fed by a RocketMQ topic and writing back to one.

`orders` is a streaming table holding every message of the source topic as the `rocketmq` source
reads it (queue, offset, keys, properties...); the `orders_to_topic` flow sends each row, body
upper-cased and its origin in a property, to the sink topic through a `rocketmq` sink
(`dp.create_sink`). With `make run` (orbitmq local on 127.0.0.1:8081) in another terminal:

    .venv/bin/orbitmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t PipelineIn
    .venv/bin/orbitmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t PipelineOut
    .venv/bin/python -c "from examples.spark_pipeline import produce; produce('127.0.0.1:8081', 'PipelineIn', 100)"
    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-pipelines run --spec examples/rocketmq_pipeline/spark-pipeline.yml

The connection and the topics come from the spec's `configuration` (session confs `spark.orbitmq.*`).
spark-pipelines runs this file in a Spark Connect client (the CLI starts a local Connect server
unless given `--remote sc://...`): `register(spark)` sends the data source to that server, whose
Python workers (PYSPARK_PYTHON) must have orbitmq installed.
"""

from __future__ import annotations

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from orbitmq.spark import register

# spark-pipelines also injects `spark` into this module; active() names it for linters and readers.
spark = SparkSession.active()
register(spark)

ENDPOINTS = spark.conf.get("spark.orbitmq.endpoints", "127.0.0.1:8081")
SOURCE = spark.conf.get("spark.orbitmq.source", "PipelineIn")
SINK = spark.conf.get("spark.orbitmq.sink", "PipelineOut")


@dp.table(comment="Every message of the source topic, one row each, as the rocketmq source reads it.")
def orders() -> DataFrame:
    return (spark.readStream.format("rocketmq").option("endpoints", ENDPOINTS).option("topic", SOURCE)
            .option("startingOffsets", "earliest").load())


# deterministicMessageIds: a micro-batch run again after a failure resends the same message ids.
dp.create_sink("orders_topic", format="rocketmq",
               options={"endpoints": ENDPOINTS, "topic": SINK, "deterministicMessageIds": "true"})


@dp.append_flow(target="orders_topic")
def orders_to_topic() -> DataFrame:
    origin = F.concat_ws("/", "topic", "broker", F.col("queueId").cast("string"), F.col("queueOffset").cast("string"))
    return spark.readStream.table("orders").select(
        F.upper(F.col("body").cast("string")).alias("body"), "tag", "keys",
        F.map_concat("properties", F.create_map(F.lit("origin"), origin)).alias("properties"))
