"""`orbitmq bench producer|consumer|baseline` run against the cluster for a moment each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


@pytest.mark.timeout(660)  # above the run's own 600 s limit, which reports its output
def test_bench_all_runs_every_scenario_and_prints_the_goals() -> None:
    """`orbitmq bench all` on its own local cluster (pinned layout), each measurement cut to 1 s.

    Once: a run costs over a minute here. `--repeat`'s run headers and medians are checked in
    tests/unit/sdk/bench/test_bench_relay.py on the same code with made-up runs."""
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", "all", "-d", "1", "--rate", "200", "--pin-cpus",
                          "--repeat", "1", "--drain-messages", "320", "--messages", "320", "--search-start", "100",
                          "--search-duration", "1", "--search-steps", "1"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    out = run.stdout
    assert "broker in its own process, --pin-cpus" in out
    assert "== run 1 of" not in out
    for line in ("baseline batch 32:", "baseline e2e producer at 200/s:", "baseline e2e consumer (in-memory relay):",
                 "producer single message at 200/s:", "e2e consumer:", "producer batch 32:"):
        assert out.count(line) == 1, out
        for part in out.split(line)[1:]:
            assert " 0 errors" in part.splitlines()[0], out
    # The relay hands every message the producer sent at 200/s for 1 s to the consumer.
    relay_consumed = out.split("baseline e2e consumer (in-memory relay): ", 1)[1].splitlines()[0]
    assert int(relay_consumed.split("(", 1)[1].split(" msgs", 1)[0]) >= 200, relay_consumed
    assert "stored" not in relay_consumed  # the relay stores nothing: no split of its latency
    # Through the broker each message's latency is also split at its store timestamp.
    for consumed in out.split("e2e consumer: ")[1:]:
        assert "(p99 born -> stored " in consumed.splitlines()[0], consumed.splitlines()[0]
    # The batch-32 ratio is taken to the mean of the baseline measured before and after the cluster.
    again = "baseline batch 32, again after the cluster: "
    assert out.count(again) == 1 and all(" 0 errors" in p.splitlines()[0] for p in out.split(again)[1:]), out
    ratio = int(out.split("producer batch-32 throughput = ", 1)[1].split("%", 1)[0])

    def tps(prefix: str) -> float:
        return float(out.split(prefix, 1)[1].split(" msgs/s", 1)[0])
    mean = (tps("baseline batch 32: ") + tps(again)) / 2
    assert abs(tps("mean of the two baselines ") - mean) <= 1, out
    # The printed figures are rounded to whole msgs/s, the ratio to whole percent.
    assert abs(ratio - tps("producer batch 32: ") / mean * 100) <= 1, (ratio, out)
    assert "median of" not in out
    assert "single-message send p99 = " in out
    assert "end-to-end p99 = " in out and "in-memory relay at the same rate: p99 " in out
    # Issue 17's figures: each printed once per run, their goals once, on the medians.
    for line in ("baseline unary echo, single message, 64 in flight:", "producer single message, 64 in flight:",
                 "baseline drain from the in-memory relay:", "drain receive+ack:", "rate search 100/s:", "orbitmq local RSS (all processes): idle "):
        assert out.count(line) == 1, (line, out)
    relay = out.split("baseline drain from the in-memory relay: ")[1].splitlines()[0]
    assert "320 received of 320 sent, 320 unique, 0 duplicates, 0 missing, 0 errors" in relay, relay
    assert f"in-memory relay (no store, no broker) = {float(relay.split(' msgs/s')[0]):.0f} msgs/s" in out
    for drained in out.split("drain from the in-memory relay: ")[1:2]:
        assert "320 received of 320 sent, 320 unique, 0 duplicates, 0 missing, 0 errors" in drained.splitlines()[0]
    for drained in out.split("drain receive+ack: ")[1:]:
        assert "320 received of 320 sent, 320 unique, 0 duplicates, 0 missing, 0 errors" in drained.splitlines()[0]
    assert ("== NATS JetStream skipped: " in out) != ("NATS JetStream drain (fetch 32 + ack): " in out)
    goal = out.split("single-message send, 64 in flight = ", 1)[1].splitlines()[0]
    tps, echo = float(goal.split(" msgs/s")[0]), float(goal.split("echo's ")[1].split(" RPC/s")[0])
    assert abs(int(goal.split("msgs/s = ")[1].split("%")[0]) - tps / echo * 100) <= 1, goal
    assert "each message received exactly once" in out
    assert "orbitmq local RSS: idle " in out


def test_bench_all_refuses_a_repeat_below_one() -> None:
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", "all", "--repeat", "0"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "--repeat must be at least 1" in run.stderr


def test_remoting_benches_run_on_their_own_local_cluster() -> None:
    """`orbitmq bench remoting-producer|remoting-drain` without --namesrv start a temporary
    `orbitmq local`, measure the Remoting client beside the gRPC SDK and stop it again."""
    produced = _bench("remoting-producer", "-d", "0.5", "--window", "8", "--batch", "4")
    assert produced["errors"] == 0
    for window in (1, 8):
        assert produced[f"Remoting send to the broker (window {window})"] > 0
        assert produced[f"gRPC SDK send through the proxy (window {window})"] > 0
    assert produced["Remoting send_batch of 4 to the broker"] > 0
    assert produced["gRPC SDK send_many of 4 through the proxy (batched)"] > 0
    drained = _bench("remoting-drain", "-n", "300", "-s", "64")
    assert drained["Remoting push consumer from the broker"] > 0
    assert drained["gRPC SDK receive + ack through the proxy"] > 0
