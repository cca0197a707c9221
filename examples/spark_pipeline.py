"""Demo: a Spark Structured Streaming job that reads topic A, transforms, and writes topic B.

With `make run` (orbitmq local on 127.0.0.1:8081) running in another terminal:

    .venv/bin/pip install -e '.[spark]'
    .venv/bin/orbitmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t DemoA -r 4 -w 4
    .venv/bin/orbitmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t DemoB -r 4 -w 4
    .venv/bin/python examples/spark_pipeline.py --produce 1000     # runs until Ctrl-C
    .venv/bin/orbitmq admin consumerProgress -n 127.0.0.1:9876 -g DemoPipeline

From a Spark Connect client instead (a Connect server with orbitmq installed for its Python
workers, docs/spark.md "From Spark Connect"), the same job with `--remote sc://127.0.0.1:15002`.

The job reads DemoA from the earliest offset, 500 messages a micro-batch at most, upper-cases each
body, tags it "long" or "short", keeps its keys, records where it came from in two properties and
writes it to DemoB with message ids derived from (query, batch, partition, row). Offsets live in
the checkpoint, so a restart goes on where it stopped; consumer group DemoPipeline shows its lag.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery


def transform(df: DataFrame) -> DataFrame:
    """Topic A's rows (the source schema) -> topic B's columns (the sink's)."""
    text = F.col("body").cast("string")
    return df.select(
        F.upper(text).alias("body"),
        F.when(F.length(text) > 16, "long").otherwise("short").alias("tag"),
        F.col("keys"),
        F.create_map(F.lit("sourceTopic"), F.col("topic"),
                     F.lit("sourceQueue"), F.concat_ws("/", F.col("broker"), F.col("queueId").cast("string"),
                                                       F.col("queueOffset").cast("string"))).alias("properties"))


def start(spark: SparkSession, endpoints: str, source: str, sink: str, checkpoint: str,
          group: str | None = "DemoPipeline", available_now: bool = False) -> StreamingQuery:
    reader = (spark.readStream.format("rocketmq").option("endpoints", endpoints).option("topic", source)
              .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 500))
    if group:
        reader = reader.option("consumerGroup", group)
    writer = (transform(reader.load()).writeStream.format("rocketmq").option("endpoints", endpoints)
              .option("topic", sink).option("deterministicMessageIds", "true")
              .option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")
    return writer.start()


def produce(endpoints: str, topic: str, count: int) -> None:
    from orbitmq import ClientConfig, Message, Producer

    with Producer(ClientConfig(endpoints)) as p:
        futures = [p.send_async(Message(topic, f"demo message {i}" + "!" * (i % 20), keys=[f"order-{i}"]))
                   for i in range(count)]
        for f in futures:
            f.result()
    print(f"sent {count} messages to {topic}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoints", default="127.0.0.1:8081", help="proxies, host:port[;host:port...]")
    p.add_argument("--source", default="DemoA")
    p.add_argument("--sink", default="DemoB")
    p.add_argument("--group", default="DemoPipeline", help="consumer group the job commits its offsets to")
    p.add_argument("--checkpoint", default="/tmp/orbitmq-spark-pipeline")
    p.add_argument("--produce", type=int, default=0, help="first send this many demo messages to --source")
    p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    p.add_argument("--remote", help="a Spark Connect server, sc://host:port, instead of a local Spark")
    args = p.parse_args(argv)
    if args.produce:
        produce(args.endpoints, args.source, args.produce)
    # Spark's planning workers run PYSPARK_PYTHON (default: python3 on the PATH), not the
    # spark.pyspark.python conf: both must be this interpreter, which has orbitmq installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.remote:  # the server's Python workers import orbitmq: it must be installed there
        spark = SparkSession.builder.remote(args.remote).getOrCreate()
    else:
        spark = (SparkSession.builder.master("local[2]").appName("orbitmq-spark-pipeline")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.pyspark.python", sys.executable).getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
    from orbitmq.spark import register

    register(spark)
    query = start(spark, args.endpoints, args.source, args.sink, args.checkpoint, args.group, args.available_now)
    print(f"pipeline {args.source} -> {args.sink} running (query {query.id}); Ctrl-C stops it")
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
