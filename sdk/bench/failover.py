"""`orbitmq bench failover`: how long clients see no acknowledged send after kill -9 of the master.

Runs the `orbitmq local --ha` cluster (3 controllers, a broker set of 3 replicas, NameServer
and proxy; temporary data dir, free ports). Each trial: wait until all three replicas are in
the SyncStateSet, keep ``--senders`` producers sending through the proxy, SIGKILL the master,
and measure from the kill to the first acknowledgement of a send started after it (the proxy
re-resolves and retries on the new master). The killed replica is restarted before the next
trial. Prints each trial and the median; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench.proxy_client import ProxyClient
from orbitmq.common.net import free_port_pair, free_ports
from orbitmq.local_ha import HALocalCluster
from orbitmq.log import setup_logging

TOPIC = "OrbitFailoverBench"


def build_cluster(data_dir: str, log_level: str = "WARNING") -> HALocalCluster:
    ports = free_ports(8)
    return HALocalCluster(data_dir, namesrv_port=ports[0], proxy_port=ports[1], controller_ports=tuple(ports[2:5]),
                          raft_ports=tuple(ports[5:8]), broker_ports=tuple(free_port_pair() for _ in range(3)), log_level=log_level)


async def wait_all_in_sync(cluster: HALocalCluster, timeout: float) -> bool:  # noqa: ASYNC109
    everyone = {f"{cluster.host}:{p}" for p in cluster.broker_ports}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if await cluster.sync_state_set() == everyone:
                return True
        await asyncio.sleep(0.5)
    return False


async def one_trial(cluster: HALocalCluster, senders: int, timeout: float) -> float | None:  # noqa: ASYNC109
    """Seconds from kill -9 of the master to the first acknowledged send started after it."""
    master = await cluster.master_addr()
    if master is None:
        return None
    index = [f"{cluster.host}:{p}" for p in cluster.broker_ports].index(master)
    killed_at: float | None = None
    first_ack: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    warm = asyncio.Event()
    acks = 0

    async def sender(client: ProxyClient, n: int) -> None:
        nonlocal acks
        seq = 0
        while not stop.is_set():
            started = time.monotonic()
            outcome = await client.send(TOPIC, f"s{n}-{seq}")
            seq += 1
            if outcome.message_id is None:
                await asyncio.sleep(0.01)
                continue
            acks += 1
            if acks >= 20:
                warm.set()
            if killed_at is not None and started > killed_at and not first_ack.done():
                first_ack.set_result(time.monotonic())

    async with ProxyClient(cluster.endpoint, request_timeout=timeout) as client:
        tasks = [asyncio.create_task(sender(client, n)) for n in range(senders)]
        try:
            await asyncio.wait_for(warm.wait(), 30)
            pid = cluster.brokers[index].pid
            assert pid is not None
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            try:
                acked_at = await asyncio.wait_for(first_ack, timeout)
            except TimeoutError:
                return None
            return acked_at - killed_at
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            if killed_at is not None:  # the replica back, as a slave, for the next trial
                await cluster.brokers[index].wait()
                await cluster.restart_broker(index)


async def run(trials: int, senders: int, timeout: float, log_level: str) -> dict:  # noqa: ASYNC109
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-failover-") as data_dir:
        cluster = build_cluster(data_dir, log_level)
        await cluster.start()
        try:
            async with ProxyClient(cluster.endpoint) as client:  # the topic, created on first use
                await client.send(TOPIC, "warm-up")
            results: list[float | None] = []
            for trial in range(trials):
                in_sync = await wait_all_in_sync(cluster, 60)
                seconds = await one_trial(cluster, senders, timeout)
                results.append(seconds)
                shown = f"{seconds:.2f} s" if seconds is not None else f"no acknowledged send within {timeout:.0f} s"
                print(f"trial {trial + 1}/{trials}: unavailability {shown}"
                      + ("" if in_sync else " (SyncStateSet was not full before the kill)"), flush=True)
        finally:
            await cluster.shutdown()
    measured = [r for r in results if r is not None]
    return {"trials": trials, "measured": len(measured), "seconds": results,
            "median_s": statistics.median(measured) if measured else None,
            "max_s": max(measured) if measured else None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench failover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--trials", type=int, default=10)
    parser.add_argument("-w", "--senders", type=int, default=4, help="producers sending concurrently")
    parser.add_argument("--timeout", type=float, default=60.0, help="give a trial up after this many seconds")
    parser.add_argument("--log-level", default="ERROR", help="the cluster's log level (its child processes and "
                        "the NameServer and proxy in this one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    setup_logging(args.log_level)
    summary = asyncio.run(run(args.trials, args.senders, args.timeout, args.log_level))
    if args.json:
        print(json.dumps(summary))
    else:
        median = summary["median_s"]
        print(f"failover: median unavailability {median:.2f} s over {summary['measured']}/{summary['trials']} "
              f"trials (max {summary['max_s']:.2f} s)" if median is not None
              else f"failover: no trial measured ({summary['trials']} tried)")
    return 0
