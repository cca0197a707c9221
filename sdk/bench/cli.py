"""``orbitmq bench <target> [options]``: dispatch to a benchmark's own ``main(argv)``.

Add a benchmark by adding one line to BENCHMARKS; each target is imported only when chosen.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Sequence

# target -> (module with main(argv), help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "store": ("orbitmq.broker.store.bench", "storage engine: CommitLog appends (async/sync flush) and reads"),
    "producer": ("orbitmq.bench.producer", "send TPS and RT through a proxy's gRPC SendMessage"),
    "consumer": ("orbitmq.bench.consumer", "consume TPS and end-to-end latency through ReceiveMessage/AckMessage"),
    "drain": ("orbitmq.bench.drain", "fill a topic, then receive + batched ack it all, counting each message id"),
    "nats": ("orbitmq.bench.nats_bench", "the same loads against NATS JetStream (nats-server + nats-py) when installed"),
    "memory": ("orbitmq.bench.memory", "orbitmq local RSS when idle and after draining --messages messages"),
    "baseline": ("orbitmq.bench.baseline", "the same send load against a bare grpc.aio echo server"),
    "all": ("orbitmq.bench.scenario", "a short orbitmq-local scenario printed against the proxy goals"),
    "proxy-workers": ("orbitmq.bench.proxy_workers", "single-message send TPS with `orbitmq local --proxy-workers N`"),
    "failover": ("orbitmq.bench.failover", "client-visible unavailability after kill -9 of the master (local --ha)"),
    "replicas": ("orbitmq.bench.replicas", "send TPS with 3 replicas (allAckInSyncStateSet) vs a single broker"),
    "metrics": ("orbitmq.bench.metrics", "send TPS with Prometheus metrics on vs off, same run"),
    "auth": ("orbitmq.bench.auth", "send throughput with ACL 2.0 (authentication + authorization) on vs off"),
    "transaction": ("orbitmq.bench.transaction", "transactional send + commit msgs/s vs normal sends/s"),
    "timer": ("orbitmq.bench.timer", "timer messages: msgs/s filed into the wheel, delivery lateness p99"),
    "sdk-producer": ("orbitmq.bench.sdk_producer", "SDK producer with automatic batching vs the official Python client"),
    "remoting-producer": ("orbitmq.bench.remoting_producer",
                          "Remoting producer straight to the broker vs the gRPC SDK through the proxy (single sends)"),
    "remoting-drain": ("orbitmq.bench.remoting_drain",
                       "Remoting push / lite pull consumers draining a backlog from the broker vs the gRPC SDK via the proxy"),
    "pop-buffer-merge": ("orbitmq.bench.pop_buffer_merge",
                         "receive + ack drain with enablePopBufferMerge off vs on, same run"),
    "proxy-mode": ("orbitmq.bench.proxy_mode",
                   "single-message sends and the drain with proxyMode=cluster vs local, same run"),
    "sdk-pull": ("orbitmq.bench.sdk_pull", "SDK PullConsumer draining a backlog (msgs/s)"),
    "sql-filter": ("orbitmq.broker.filter.bench",
                   "SQL92 consumer matching 1 percent of a backlog, ConsumeQueue extension + bloom bit maps off vs on"),
    "spark-read": ("orbitmq.bench.spark_read", "Spark streaming read draining a backlog vs the SDK PullConsumer"),
    "spark": ("orbitmq.bench.spark_pipeline",
              "Spark batch write/read and a streaming pipeline, rocketmq source/sink vs Kafka's, same run"),
    "metadata": ("orbitmq.bench.metadata",
                 "topic/group creation rate at 1k/10k/100k topics, broker memory per topic, restart time"),
    "rocketmq": ("orbitmq.bench.rocketmq",
                 "the same loads against Apache RocketMQ and OrbitMQ in one run, both figures and the ratio"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in BENCHMARKS:
        parser = argparse.ArgumentParser(prog="orbitmq bench", description="OrbitMQ benchmarks")
        sub = parser.add_subparsers(dest="target", metavar="<target>")
        for name, (_module, help_text) in BENCHMARKS.items():
            sub.add_parser(name, help=help_text, add_help=False)
        parser.parse_args(args)
        parser.print_help(sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[args[0]][0])
    result = module.main(args[1:])
    if inspect.isawaitable(result):
        result = asyncio.run(result)
    return 0 if result is None else int(result)


if __name__ == "__main__":
    sys.exit(main())
