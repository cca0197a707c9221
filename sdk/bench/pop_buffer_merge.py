"""`orbitmq bench pop-buffer-merge`: receive + ack drain with enablePopBufferMerge off and on.

In one run, the `bench drain` load (fill a topic with ``--messages`` messages, then receive them
in batches of 32 and ack each batch, counting every message id) against `orbitmq local` with
``enablePopBufferMerge=false`` and ``=true``, alternating off/on for ``--rounds`` rounds (so drift
of the machine hits both alike), each round a fresh cluster in a child process with a temporary
data dir and free ports. Each run also reports the server processes' CPU per message and how many
records the revive topic (rmq_sys_REVIVE_LOG_DefaultCluster) received: with buffer merge on, a
batch acked within popCkStayBufferTime writes neither its checkpoint nor its acks there. Prints
each run, the medians and their ratio; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence

from orbitmq.bench.drain import drain as run_drain
from orbitmq.bench.drain import fill, format_drain
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.metrics import tree_cpu_seconds
from orbitmq.bench.off_on import alternate_off_on, cpu_suffix, print_off_on
from orbitmq.bench.scenario import stop_local
from orbitmq.common.constants import DEFAULT_CLUSTER, revive_topic
from orbitmq.common.net import free_ports

TOPIC = "OrbitPopMergeBench"
GROUP = "OrbitPopMergeBenchGroup"
# reviveQueueNum's default: the queues whose max offsets are summed.
REVIVE_QUEUES = 8


async def revive_log_records(broker_addr: str) -> int | None:
    """Records in the revive topic's queues (their max offsets), None when the broker will not say."""
    from orbitmq.remoting import RemotingClient, RemotingCommand
    from orbitmq.remoting.codes import RequestCode, ResponseCode

    topic = revive_topic(DEFAULT_CLUSTER)
    total = 0
    try:
        async with RemotingClient() as client:
            for queue_id in range(REVIVE_QUEUES):
                request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
                response = await client.invoke(broker_addr, request, 5)
                if response.code != ResponseCode.SUCCESS:
                    return None
                total += int(response.ext_fields["offset"])
    except (OSError, TimeoutError, KeyError, ValueError):
        return None
    return total


async def measure(merge: bool, messages: int, size: int, concurrency: int) -> dict:
    """One fill + drain against a fresh `orbitmq local` (buffer merge on or off)."""
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-pop-merge-") as data_dir:
        ports = free_ports(3)
        proc = launch_local(data_dir, [*local_ports_args(*ports),
                                       f"enablePopBufferMerge={'true' if merge else 'false'}"])
        endpoint, broker_addr = f"127.0.0.1:{ports[2]}", f"127.0.0.1:{ports[1]}"
        try:
            sent = await fill(endpoint, TOPIC, messages, size)
            before_records = await revive_log_records(broker_addr)
            cpu_before = tree_cpu_seconds(proc.pid)
            result = await run_drain(endpoint, TOPIC, GROUP, len(sent), concurrency=concurrency)
            cpu_after = tree_cpu_seconds(proc.pid)
            after_records = await revive_log_records(broker_addr)
        finally:
            stop_local(proc)
    result.sent = len(sent)
    result.missing = len(set(sent) - set(result.ids))
    summary = result.summary()
    summary["cpu_us_per_msg"] = ((cpu_after - cpu_before) * 1e6 / summary["received"]
                                 if cpu_before is not None and cpu_after is not None and summary["received"] else None)
    summary["revive_log_records"] = (after_records - before_records
                                     if after_records is not None and before_records is not None else None)
    return summary


async def run(rounds: int, messages: int, size: int, concurrency: int, json_out: bool) -> dict:
    def describe(index: int, label: str, summary: dict) -> str:
        return (format_drain(f"round {index} pop buffer merge {label}", summary) + cpu_suffix(summary)
                + f", revive-log records {summary['revive_log_records']}")

    return await alternate_off_on(rounds, lambda label: measure(label == "on", messages, size, concurrency),
                                  None if json_out else describe)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench pop-buffer-merge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--messages", type=int, default=20_000, help="messages per drain")
    parser.add_argument("-s", "--size", type=int, default=1024, help="message body size in bytes")
    parser.add_argument("-w", "--concurrency", type=int, default=4, help="receive loops")
    parser.add_argument("-r", "--rounds", type=int, default=3, help="off/on pairs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    summary = asyncio.run(run(max(args.rounds, 1), args.messages, args.size, args.concurrency, args.json))
    if args.json:
        print(json.dumps(summary))
    else:
        print_off_on("pop buffer merge", "it", summary, measure="drain throughput")
    return 0
