"""`orbitmq bench producer|consumer|baseline` run against the cluster for a moment each."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.interop.harness import Cluster, unique


def _bench(*args: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", *args, "--json"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_bench_producer_consumer_and_baseline(cluster: Cluster) -> None:
    topic = cluster.create_topic(unique("BenchT"), queues=2)
    group = cluster.create_group(unique("BenchG"))
    produced = _bench("producer", "--endpoint", cluster.proxy, "-t", topic, "-b", "8", "-w", "4", "-d", "1")
    assert produced["messages"] > 0 and produced["errors"] == 0
    consumed = _bench("consumer", "--endpoint", cluster.proxy, "-t", topic, "-g", group, "-d", "2")
    assert consumed["messages"] > 0 and consumed["errors"] == 0
    assert consumed["p99_ms"] >= consumed["p50_ms"] > 0
    base = _bench("baseline", "-b", "8", "-w", "4", "-d", "1")
    assert base["messages"] > 0 and base["errors"] == 0
