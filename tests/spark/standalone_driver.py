"""The driver of tests/spark/test_spark_standalone.py, in a process of its own: a SparkSession on a
standalone cluster (one SparkContext per process, and the local[2] tests hold theirs), which a
test can also kill -9 and start again on the same checkpoint.

``python -m tests.spark.standalone_driver batch MASTER ENDPOINTS SOURCE SINK``: reads every
message of SOURCE and writes each body to SINK; prints ``{"rows": n}``.

``python -m tests.spark.standalone_driver stream MASTER ENDPOINTS SOURCE OUT CHECKPOINT EXPECT``:
a streaming query from SOURCE (earliest, 400 messages a trigger, each row a little slow) into a
parquet file sink at OUT with CHECKPOINT, until OUT holds EXPECT rows; prints
``{"batch": id}`` as each micro-batch ends, then ``{"done": rows}``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def session(master: str, app: str):
    from pyspark.sql import SparkSession

    from orbitmq.spark import register

    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.pyspark.python", sys.executable).config("spark.executor.memory", "512m")
             .config("spark.driver.memory", "512m").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.task.maxFailures", "8")  # an executor killed mid-task: its tasks run again
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def batch(master: str, endpoints: str, source: str, sink: str) -> None:
    spark = session(master, "orbitmq-standalone-batch")
    df = (spark.read.format("rocketmq").option("endpoints", endpoints).option("topic", source)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    rows = df.count()
    df.select("body").write.format("rocketmq").option("endpoints", endpoints).option("topic", sink) \
        .mode("append").save()
    print(json.dumps({"rows": rows, "partitions": df.rdd.getNumPartitions()}), flush=True)
    spark.stop()


def stream(master: str, endpoints: str, source: str, out: str, checkpoint: str, expect: int) -> None:
    from pyspark.sql import functions as F

    spark = session(master, "orbitmq-standalone-stream")

    @F.udf("string", useArrow=False)
    def slow(body):  # ~0.4 s a batch: an executor killed lands inside one
        time.sleep(0.001)
        return body.decode("utf-8")

    df = (spark.readStream.format("rocketmq").option("endpoints", endpoints).option("topic", source)
          .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "400").load())
    query = (df.select(slow(F.col("body")).alias("body"), "queueId", "queueOffset").writeStream
             .format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    seen = -1
    rows = 0
    try:
        while query.isActive:
            fresh = [p for p in query.recentProgress if p["batchId"] > seen]
            for progress in fresh:  # every micro-batch, also those that ended between two looks
                seen = progress["batchId"]
                print(json.dumps({"batch": seen, "rows": progress["numInputRows"]}), flush=True)
            if fresh and os.path.exists(os.path.join(out, "_spark_metadata")):  # committed files only
                rows = spark.read.parquet(out).count()
                if rows >= expect:
                    break
            time.sleep(0.2)
    finally:
        query.stop()
    if query.exception() is not None:
        print(json.dumps({"error": str(query.exception())}), flush=True)
        sys.exit(1)
    print(json.dumps({"done": rows}), flush=True)
    spark.stop()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "batch":
        batch(*args)
    elif mode == "stream":
        stream(*args[:5], int(args[5]))
    else:
        sys.exit(f"unknown mode {mode}")
