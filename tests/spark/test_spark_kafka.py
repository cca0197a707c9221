"""Apache Kafka 4.4.0 in KRaft mode (orbitmq.bench.kafka_kraft: storage formatted by
kafka.tools.StorageTool, one kafka.Kafka JVM as broker and controller on free loopback ports) and
Spark's Kafka connector (spark-sql-kafka-0-10_2.13 4.2.0 via spark.jars) on pyspark 4.3.0: the peer
`orbitmq bench spark` measures the rocketmq source and sink against (issue 27 item 5). A batch
write, a batch read and a rate-limited stream, each checked row by row (about 20 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.bench.kafka_kraft import KafkaKRaft, connector_jars, server_classpath
from tests.support.process import ProcessRunner
from tests.support.source_roots import REPO
from tests.support.spark_standalone import launcher

pytestmark = pytest.mark.timeout(300)


def test_kafka_kraft_and_the_spark_kafka_connector(tmp_path: Path) -> None:
    # Not fetched is a failure naming `make kafka`, never a skip.
    assert server_classpath() and connector_jars()
    runner = ProcessRunner(tmp_path / "run")
    kafka = KafkaKRaft(tmp_path / "kafka", heap="256m", partitions=4, launch=launcher(runner))
    try:
        bootstrap = kafka.start()
        n = 400
        done = subprocess.run([sys.executable, "-m", "tests.spark.kafka_driver", bootstrap, "KafkaConn", str(n),
                               str(tmp_path / "cp")], cwd=REPO, capture_output=True, text=True, timeout=240,
                              check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        expected = sorted([str(i), f"v-{i}"] for i in range(n))
        assert sorted(seen["read"]) == expected
        assert {p for p, _ in seen["positions"]} == {0, 1, 2, 3}  # four partitions, all written
        assert len({tuple(x) for x in seen["positions"]}) == n  # each (partition, offset) once
        assert sum(seen["batches"]) == n and len(seen["batches"]) >= 4 and max(seen["batches"]) <= n // 4
        assert sorted(seen["out"]) == sorted([k, v.upper()] for k, v in expected)
    except BaseException:
        print("\n===== Kafka logs =====\n" + runner.report(), file=sys.stderr)
        raise
    finally:
        kafka.stop()
        runner.stop_all()
