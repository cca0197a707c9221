"""`orbitmq bench failover`: what clients see when kill -9 takes the master away.

Runs the `orbitmq local --ha` cluster (3 controllers, a broker set of 3 replicas, NameServer
and proxy; temporary data dir, free ports). Each trial: wait until all three replicas are in
the SyncStateSet, keep ``--senders`` producers sending ``--rate`` messages a second through the
proxy while ``--consumers`` of one consumer group receive (POP) and ack, SIGKILL the master, and
measure from the kill to the first acknowledgement of a send started after it (the proxy
re-resolves and retries on the new master). Sending goes on for ``--after`` seconds past the
kill (longer than the invisible time, so what the new master redelivers shows), then the
consumers drain, and the trial counts the acknowledged sends never delivered (lost) and the
deliveries beyond the first of each message (duplicates). The killed replica is restarted
before the next trial. Prints each trial, the median unavailability and the duplicate ratio;
never asserts.
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from orbitmq.bench.proxy_client import ProxyClient
from orbitmq.common.log import setup_logging
from orbitmq.common.net import free_port_pair, free_ports
from orbitmq.local_ha import HALocalCluster

TOPIC = "OrbitFailoverBench"
GROUP = "GOrbitFailoverBench"
INVISIBLE_MS = 10_000


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


@dataclass
class TrialLoad:
    """What one trial's producers and consumers did, for the counts after the drain."""

    prefix: str
    acked: set[str] = field(default_factory=set)
    delivered: Counter[str] = field(default_factory=Counter)

    def missing(self) -> int:
        return sum(1 for k in self.acked if k not in self.delivered)

    def duplicates(self) -> int:
        return sum(n - 1 for n in self.delivered.values() if n > 1)


@dataclass
class TrialResult:
    seconds: float | None
    sent: int
    lost: int
    duplicates: int


async def one_trial(cluster: HALocalCluster, senders: int, consumers: int, rate: float, after: float,  # noqa: PLR0913
                    timeout: float, trial: int) -> TrialResult | None:  # noqa: ASYNC109
    """Kill -9 of the master under load: unavailability, then lost and duplicate deliveries."""
    master = await cluster.master_addr()
    if master is None:
        return None
    index = [f"{cluster.host}:{p}" for p in cluster.broker_ports].index(master)
    killed_at: float | None = None
    first_ack: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    stop_sending = asyncio.Event()
    stop_receiving = asyncio.Event()
    warm = asyncio.Event()
    load = TrialLoad(f"t{trial}-")
    interval = senders / rate if rate > 0 else 0.0

    async def sender(client: ProxyClient, n: int) -> None:
        seq = 0
        next_at = time.monotonic()
        while not stop_sending.is_set():
            started = time.monotonic()
            key = f"{load.prefix}s{n}-{seq}"
            outcome = await client.send(TOPIC, key)
            if outcome.message_id is None:
                await asyncio.sleep(0.01)
                continue  # the same key again: an unknown outcome may be stored twice (counted)
            seq += 1
            load.acked.add(key)
            if len(load.acked) >= 20:
                warm.set()
            if killed_at is not None and started > killed_at and not first_ack.done():
                first_ack.set_result(time.monotonic())
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                next_at = time.monotonic()

    async def consumer(client: ProxyClient) -> None:
        while not stop_receiving.is_set():
            deliveries, error = await client.receive(TOPIC, GROUP, 16, INVISIBLE_MS, 1000)
            if error:
                await asyncio.sleep(0.2)
            for d in deliveries:
                if d.key.startswith(load.prefix):
                    load.delivered[d.key] += 1
            if deliveries:
                await client.ack(TOPIC, GROUP, deliveries)

    async with ProxyClient(cluster.endpoint, request_timeout=timeout) as client:
        receiving = [asyncio.create_task(consumer(client)) for _ in range(consumers)]
        tasks = [asyncio.create_task(sender(client, n)) for n in range(senders)]
        seconds = None
        try:
            await asyncio.wait_for(warm.wait(), 30)
            await asyncio.sleep(2.0)  # consumers keeping up before the fault
            pid = cluster.brokers[index].pid
            assert pid is not None
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                seconds = await asyncio.wait_for(first_ack, timeout) - killed_at
            await asyncio.sleep(max(0.0, killed_at + after - time.monotonic()))
            stop_sending.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            deadline = time.monotonic() + timeout
            while load.missing() and time.monotonic() < deadline:  # noqa: ASYNC110 - counted, not signalled
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # deliveries in flight
        finally:
            stop_sending.set()
            stop_receiving.set()
            await asyncio.gather(*tasks, *receiving, return_exceptions=True)
            if killed_at is not None:  # the replica back, as a slave, for the next trial
                await cluster.brokers[index].wait()
                await cluster.restart_broker(index)
    return TrialResult(seconds, len(load.acked), load.missing(), load.duplicates())


async def run(trials: int, senders: int, timeout: float, log_level: str, consumers: int = 2,  # noqa: ASYNC109, PLR0913
              rate: float = 250.0, after: float = 2.0 * INVISIBLE_MS / 1000) -> dict:
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-failover-") as data_dir:
        cluster = build_cluster(data_dir, log_level)
        await cluster.start()
        try:
            async with ProxyClient(cluster.endpoint) as client:  # the topic, created on first use
                await client.send(TOPIC, "warm-up")
            results: list[float | None] = []
            sent = lost = duplicates = 0
            for trial in range(trials):
                in_sync = await wait_all_in_sync(cluster, 60)
                outcome = await one_trial(cluster, senders, consumers, rate, after, timeout, trial)
                seconds = outcome.seconds if outcome is not None else None
                results.append(seconds)
                shown = f"{seconds:.2f} s" if seconds is not None else f"no acknowledged send within {timeout:.0f} s"
                counts = ""
                if outcome is not None:
                    sent, lost, duplicates = sent + outcome.sent, lost + outcome.lost, duplicates + outcome.duplicates
                    counts = (f", sent {outcome.sent}, lost {outcome.lost}, duplicates {outcome.duplicates} "
                              f"({_ratio(outcome.duplicates, outcome.sent)})")
                print(f"trial {trial + 1}/{trials}: unavailability {shown}{counts}"
                      + ("" if in_sync else " (SyncStateSet was not full before the kill)"), flush=True)
        finally:
            await cluster.shutdown()
    measured = [r for r in results if r is not None]
    return {"trials": trials, "measured": len(measured), "seconds": results,
            "median_s": statistics.median(measured) if measured else None,
            "max_s": max(measured) if measured else None,
            "sent": sent, "lost": lost, "duplicates": duplicates,
            "duplicate_ratio": duplicates / sent if sent else None}


def _ratio(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.2f} %" if whole else "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench failover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--trials", type=int, default=10)
    parser.add_argument("-w", "--senders", type=int, default=4, help="producers sending concurrently")
    parser.add_argument("-c", "--consumers", type=int, default=2, help="consumers of the group receiving (POP)")
    parser.add_argument("--rate", type=float, default=250.0, help="messages a second, all producers together "
                        "(0: as fast as they can)")
    parser.add_argument("--after", type=float, default=2.0 * INVISIBLE_MS / 1000,
                        help="seconds to keep sending after the kill (redeliveries come after the invisible "
                        f"time, {INVISIBLE_MS // 1000} s)")
    parser.add_argument("--timeout", type=float, default=60.0, help="give a trial up after this many seconds")
    parser.add_argument("--log-level", default="ERROR", help="the cluster's log level (its child processes and "
                        "the NameServer and proxy in this one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    setup_logging(args.log_level)
    summary = asyncio.run(run(args.trials, args.senders, args.timeout, args.log_level, args.consumers, args.rate,
                              args.after))
    if args.json:
        print(json.dumps(summary))
    else:
        median = summary["median_s"]
        print(f"failover: median unavailability {median:.2f} s over {summary['measured']}/{summary['trials']} "
              f"trials (max {summary['max_s']:.2f} s)" if median is not None
              else f"failover: no trial measured ({summary['trials']} tried)")
        print(f"failover: sent {summary['sent']}, lost {summary['lost']}, duplicates {summary['duplicates']} "
              f"({_ratio(summary['duplicates'], summary['sent'])} of the messages sent)")
    return 0
