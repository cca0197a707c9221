"""The driver of tests/spark/test_spark_kafka.py, in a process of its own: Spark's Kafka connector
reaches Spark through ``spark.jars``, which only a new SparkContext takes (the local[2] tests hold
theirs in the pytest process).

``python -m tests.spark.kafka_driver BOOTSTRAP TOPIC N CHECKPOINT``: makes TOPIC and TOPICOut with
four partitions (Kafka's Admin API, orbitmq.bench.spark_pipeline.create_kafka_topics), writes N
rows with Spark's Kafka sink, reads them back with its batch source, runs a streaming query of at
most N/4 rows a micro-batch from TOPIC (upper-casing each value) into TOPICOut, reads that back,
and prints one JSON line of what it saw.
"""

from __future__ import annotations

import json
import os
import sys


def main(bootstrap: str, topic: str, n: int, checkpoint: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from orbitmq.bench.kafka_kraft import connector_jars
    from orbitmq.bench.spark_pipeline import create_kafka_topics

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("orbitmq-kafka-connector")
             .config("spark.jars", ",".join(connector_jars())).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "512m").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out_topic = topic + "Out"
    create_kafka_topics(spark, bootstrap, [topic, out_topic], 4)

    def read(name: str):
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", name)
                .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())

    (spark.range(n, numPartitions=2)
     .select(F.col("id").cast("string").cast("binary").alias("key"),
             F.concat(F.lit("v-"), F.col("id").cast("string")).alias("value"))
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
    rows = read(topic).select(F.col("key").cast("string").alias("k"), F.col("value").cast("string").alias("v"),
                              "partition", "offset").collect()

    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max(1, n // 4)).load()
             .select("key", F.upper(F.col("value").cast("string")).alias("value"))
             .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    out = read(out_topic).select(F.col("key").cast("string").alias("k"), F.col("value").cast("string").alias("v"))
    print(json.dumps({"read": [[r.k, r.v] for r in rows], "positions": [[r.partition, r.offset] for r in rows],
                      "batches": batches, "out": [[r.k, r.v] for r in out.collect()]}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
