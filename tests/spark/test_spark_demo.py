"""The demo pipeline (examples/spark_pipeline.py) end to end: topic A -> transform -> topic B."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from orbitmq import ClientConfig, PullConsumer
from tests.spark.conftest import name
from tests.spark.test_spark_batch import endpoints

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def load_example():
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_pipeline_end_to_end(cluster, spark, tmp_path: Path) -> None:
    demo = load_example()
    a, b = cluster.create_topic(name("DemoA"), queues=2), cluster.create_topic(name("DemoB"), queues=2)
    group = cluster.create_group(name("DemoPipeline"))
    demo.produce(endpoints(cluster), a, 1200)
    q = demo.start(spark, endpoints(cluster), a, b, str(tmp_path / "cp"), group, available_now=True)
    q.awaitTermination(120)
    q.stop()
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [500, 500, 200]

    with PullConsumer(ClientConfig(endpoints(cluster)), "orbitmq-spark-source") as c:
        got = []
        for mq in c.queues(b):
            offset = 0
            while msgs := c.pull(mq, offset, 32)[0]:
                got += msgs
                offset = msgs[-1].queue_offset + 1
    assert len(got) == 1200
    by_key = {m.keys[0]: m for m in got}
    m = by_key["order-7"]
    assert m.body == b"DEMO MESSAGE 7!!!!!!!" and m.tag == "long" and m.properties["sourceTopic"] == a
    assert by_key["order-0"].tag == "short"
    assert len({x.message_id for x in got}) == 1200

    done = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "consumerProgress", "-g", group, "-n",
                           cluster.namesrv, "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["diffTotal"] == 0
