"""`orbitmq bench spark` end to end at a small size (issue 27 items 2 and 5): a standalone Spark
cluster, OrbitMQ with two broker sets, then Apache Kafka in KRaft mode; the batch write and read
of a 16-queue topic (each message counted once), the rate-limited pipeline, the executor kill, the
CPU by process and the cProfile of the rocketmq source and sink. Only that it runs and prints every
figure for both is asserted: the figures are recorded in docs/benchmarks.md, never judged by a test
(85-110 s on the quiet 2-core machine: three Spark JVMs, both clusters, two executor restarts).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.source_roots import REPO

pytestmark = pytest.mark.timeout(400)


def test_bench_spark_small_run_prints_both_systems() -> None:
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", "spark", "--messages", "1600",
                          "--max-per-trigger", "400", "--write-partitions", "4", "--profile", "--json"],
                         cwd=REPO, capture_output=True, text=True, timeout=360, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    out = run.stdout
    for label in ("batch write rows/s", "batch read rows/s", "pipeline read -> transform -> write rows/s",
                  "micro-batch p50", "micro-batch p99", "recovery after an executor kill"):
        assert f"| {label}" in out, out
    assert "executor Python workers" in out and "orbitmq proxy" in out and "Kafka broker JVM" in out
    figures = json.loads(out.strip().splitlines()[-1])
    for system in ("rocketmq", "kafka"):
        fig = figures[system]
        assert fig["write"]["rows_per_s"] > 0 and fig["pipeline"]["rows_per_s"] > 0, fig
        assert fig["read"]["rows"] == 1600 and fig["read"]["exactly_once"], fig["read"]
        assert fig["pipeline"]["rows"] == 1600 and fig["pipeline"]["batches"] >= 4, fig["pipeline"]
        assert fig["recovery"]["recovery_s"] >= 0, fig["recovery"]
    assert figures["ratio_rocketmq_over_kafka"]["pipeline.rows_per_s"] > 0
    assert figures["rocketmq"]["profile"]["categories"], figures["rocketmq"]["profile"]
