"""`orbitmq bench replicas`: what replication costs a producer.

In one run, the same send load (`bench producer`'s) against `orbitmq local` (one broker) and
against `orbitmq local --ha` (a broker set of three replicas, allAckInSyncStateSet: every send
waits until the whole SyncStateSet has it), each in a child process with a temporary data dir
and free ports. Prints both throughputs and their ratio; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench.load import LoadOptions, add_comparison_arguments, run_send_load
from orbitmq.bench.local_process import launch_local
from orbitmq.bench.scenario import start_local, stop_local
from orbitmq.bench.stats import format_summary
from orbitmq.common.net import free_port_pair, free_ports
from orbitmq.local_ha import BROKER_NAME, sync_state_set

TOPIC = "OrbitReplicasBench"
HA_START_TIMEOUT_SECONDS = 180.0


def start_local_ha(data_dir: str) -> tuple[subprocess.Popen, str, list[str]]:
    """`orbitmq local --ha` in a child process; (process, proxy endpoint, controller addresses)
    once it is ready."""
    ports = free_ports(8)
    controllers = [f"127.0.0.1:{p}" for p in ports[2:5]]
    broker_ports = tuple(free_port_pair() for _ in range(3))
    proc = launch_local(data_dir, ["--ha", "--namesrv-port", str(ports[0]), "--proxy-port", str(ports[1]),
                                   "--controller-ports", ",".join(map(str, ports[2:5])),
                                   "--raft-ports", ",".join(map(str, ports[5:8])),
                                   "--broker-ports", ",".join(map(str, broker_ports)), "--log-level", "ERROR"],
                        timeout=HA_START_TIMEOUT_SECONDS)
    return proc, f"127.0.0.1:{ports[1]}", controllers


async def wait_all_in_sync(controllers: list[str], timeout: float = 60.0) -> None:  # noqa: ASYNC109
    """Until all three replicas are in the SyncStateSet (else every send waits for fewer)."""
    deadline = time.monotonic() + timeout
    while len(await sync_state_set(controllers, BROKER_NAME)) < 3:
        if time.monotonic() > deadline:
            print("replicas: the SyncStateSet never held all three replicas; measuring anyway", flush=True)
            return
        await asyncio.sleep(0.5)


async def _measure(endpoint: str, opts: LoadOptions) -> dict:
    # Warm-up: creates the topic (first use) and the proxy's routes outside the measurement.
    await run_send_load(LoadOptions(endpoint=endpoint, topic=opts.topic, size=opts.size, concurrency=1,
                                    batch=opts.batch, duration=1.0))
    return (await run_send_load(opts)).summary()


async def run(opts: LoadOptions) -> dict:
    results = {}
    for label, ha in (("single broker", False), ("3 replicas, allAckInSyncStateSet", True)):
        with tempfile.TemporaryDirectory(prefix="orbitmq-bench-replicas-") as data_dir:
            if ha:
                proc, endpoint, controllers = start_local_ha(data_dir)
            else:
                proc, endpoint = start_local(data_dir)
            try:
                if ha:
                    await wait_all_in_sync(controllers)
                summary = await _measure(endpoint, LoadOptions(endpoint=endpoint, topic=opts.topic, size=opts.size,
                                                               concurrency=opts.concurrency, batch=opts.batch,
                                                               duration=opts.duration))
            finally:
                stop_local(proc)
        results[label] = summary
        print(format_summary(label, summary), flush=True)
    single, replicated = results.values()
    ratio = replicated["tps"] / single["tps"] if single["tps"] else None
    return {"single": single, "replicated": replicated, "ratio": ratio}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench replicas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_comparison_arguments(parser, concurrency=16, duration=10.0)
    args = parser.parse_args(list(argv or []))
    opts = LoadOptions(topic=TOPIC, size=args.size, concurrency=args.concurrency, batch=args.batch,
                       duration=args.duration)
    summary = asyncio.run(run(opts))
    if args.json:
        print(json.dumps(summary))
    elif summary["ratio"] is not None:
        print(f"replicas: 3-replica throughput is {summary['ratio']:.2f} x the single broker's "
              f"({summary['replicated']['tps']:.0f} vs {summary['single']['tps']:.0f} msgs/s)")
    return 0
