"""`orbitmq bench metrics`: what Prometheus metrics cost the send path.

In one run, the same send load (`bench producer`'s) against `orbitmq local` with
``metricsExporterType=DISABLE`` and with ``metricsExporterType=PROM``, alternating off/on for
``--rounds`` rounds (so drift of the machine hits both alike), each round a fresh cluster in a
child process with a temporary data dir and free ports. While metrics are on, /metrics is scraped
every ``--scrape-interval`` seconds, so the figure includes building the families (lag, storage)
as a Prometheus server would cause. Prints each run, the medians and their ratio; never asserts.

Throughput swings with whatever else the machine runs, so each run also reports the CPU time the
cluster's processes (the `orbitmq local` parent and its broker child, from /proc) spent per
message sent: on a shared machine that ratio is the steadier measure of what counting costs.
``--micro`` instead times the hot-path pieces themselves in this process (the broker's count of a
put, the Remoting latency wrapper, the proxy's SendMessage wrapper), each against the same call
without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence

from orbitmq.bench.load import LoadOptions, add_comparison_arguments, run_send_load
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.off_on import alternate_off_on, cpu_suffix, print_off_on
from orbitmq.bench.scenario import stop_local
from orbitmq.bench.stats import format_summary
from orbitmq.common.net import free_ports

TOPIC = "OrbitMetricsBench"


def start_local(data_dir: str, metrics: bool) -> tuple[subprocess.Popen, str, str | None]:
    """`orbitmq local` with metrics on or off: (process, proxy endpoint, metrics URL or None)."""
    ports = free_ports(4)
    proc = launch_local(data_dir, [*local_ports_args(*ports[:3]),
                                   f"metricsExporterType={'PROM' if metrics else 'DISABLE'}",
                                   f"metricsPromExporterPort={ports[3]}"])
    url = f"http://127.0.0.1:{ports[3]}/metrics" if metrics else None
    return proc, f"127.0.0.1:{ports[2]}", url


def tree_cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of ``pid`` and its direct children (Linux /proc); None elsewhere."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry) == pid or int(fields[1]) == pid:
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / ticks
    except (OSError, ValueError):
        return None


async def _scrape_loop(url: str, interval: float, sizes: list[int]) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
            sizes.append(len(body))
        except OSError as exc:
            print(f"metrics: scrape failed: {exc}", flush=True)


async def measure_send(pid: int, endpoint: str, opts: LoadOptions, url: str | None, interval: float) -> dict:
    """One measured send load (after a 1 s warm-up) with the server tree's CPU per message."""
    # Warm-up: creates the topic (first use) and the proxy's routes outside the measurement.
    await run_send_load(LoadOptions(endpoint=endpoint, topic=opts.topic, size=opts.size, concurrency=1,
                                    batch=opts.batch, duration=1.0, credentials=opts.credentials))
    sizes: list[int] = []
    scraper = asyncio.create_task(_scrape_loop(url, interval, sizes)) if url else None
    cpu_before = tree_cpu_seconds(pid)
    try:
        summary = (await run_send_load(LoadOptions(endpoint=endpoint, topic=opts.topic, size=opts.size,
                                                   concurrency=opts.concurrency, batch=opts.batch,
                                                   duration=opts.duration, rate=opts.rate,
                                                   credentials=opts.credentials,
                                                   connections=opts.connections))).summary()
    finally:
        if scraper is not None:
            scraper.cancel()
    cpu_after = tree_cpu_seconds(pid)
    summary["scrapes"] = len(sizes)
    msgs = summary.get("messages") or 0
    summary["cpu_us_per_msg"] = ((cpu_after - cpu_before) * 1e6 / msgs
                                 if cpu_before is not None and cpu_after is not None and msgs else None)
    return summary


async def compare_off_on(rounds: int, what: str, measure: Callable[[str], Awaitable[dict]]) -> dict:
    """``measure("off")`` and ``measure("on")`` alternately for ``rounds`` rounds, each printed as a
    send summary (orbitmq.bench.off_on has the medians and ratios)."""
    def describe(index: int, label: str, summary: dict) -> str:
        extra = f", {summary['scrapes']} scrapes" if summary.get("scrapes") else ""
        return format_summary(f"round {index} {what} {label}{extra}", summary) + cpu_suffix(summary)

    return await alternate_off_on(rounds, measure, describe)


async def run(opts: LoadOptions, rounds: int, interval: float) -> dict:
    async def measure(label: str) -> dict:
        with tempfile.TemporaryDirectory(prefix="orbitmq-bench-metrics-") as data_dir:
            proc, endpoint, url = start_local(data_dir, metrics=label == "on")
            try:
                return await measure_send(proc.pid, endpoint, opts, url, interval)
            finally:
                stop_local(proc)

    return await compare_off_on(rounds, "metrics", measure)


def micro(n: int = 200_000) -> dict[str, float]:
    """Microseconds each hot-path piece adds per call (best of three runs of ``n`` calls)."""
    from types import SimpleNamespace

    from orbitmq.broker.metrics.manager import BrokerMetricsManager
    from orbitmq.broker.processors.registry import guard
    from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
    from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
    from orbitmq.proxy.metrics import ProxyMetrics
    from orbitmq.remoting.processor import WRAPPED_ATTR

    broker = BrokerMetricsManager(SimpleNamespace(config=SimpleNamespace(
        broker_cluster_name="c", broker_name="b", metrics_label="")), hub=SimpleNamespace())
    props = {"KEYS": "k", "TAGS": "t", "UNIQ_KEY": "0" * 32, "WAIT": "true"}

    def best(fn) -> float:
        return min(fn() for _ in range(3))

    def put_cost() -> float:
        start = time.perf_counter()
        for _ in range(n):
            broker.on_put("BenchTopic", props, 0, 1, 1200)
        return (time.perf_counter() - start) / n * 1e6

    async def processor(request, channel):
        return SimpleNamespace(code=0)

    guarded = guard(310, processor)
    direct, timed = getattr(guarded, WRAPPED_ATTR), broker.timed(310, guarded)
    proxy = ProxyMetrics(SimpleNamespace(metrics_label="", rocket_mq_cluster_name="c", proxy_name="p",
                                         proxy_mode="cluster"), lambda: None)
    request = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="T"), body=b"x" * 1024)])
    ok = spb.SendMessageResponse(status=pb.Status(code=pb.Code.OK))

    async def send(req, context):
        return ok

    wrapped_send = proxy._wrap_unary("SendMessage", send)

    async def calls(fn, arg) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await fn(arg, None)
        return (time.perf_counter() - start) / n * 1e6

    async def extra(base, wrapped, arg) -> float:
        return min([await calls(wrapped, arg) - await calls(base, arg) for _ in range(3)])

    remoting_request = SimpleNamespace(flag=0, ext_fields={})
    return {"broker_put_us": best(put_cost),
            "remoting_wrapper_us": asyncio.run(extra(direct, timed, remoting_request)),
            "proxy_send_wrapper_us": asyncio.run(extra(send, wrapped_send, request))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench metrics", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_comparison_arguments(parser, concurrency=16, duration=10.0, rounds_help="off/on pairs")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="messages per second (0 = as fast as possible); below saturation the CPU per "
                             "message compares like with like")
    parser.add_argument("--scrape-interval", type=float, default=5.0, help="seconds between scrapes while on")
    parser.add_argument("--micro", action="store_true", help="time the hot-path pieces in this process instead")
    args = parser.parse_args(list(argv or []))
    if args.micro:
        costs = micro()
        print(json.dumps(costs) if args.json else
              "metrics hot path, extra us per call: " + ", ".join(f"{k} {v:.2f}" for k, v in costs.items()))
        return 0
    opts = LoadOptions(topic=TOPIC, size=args.size, concurrency=args.concurrency, batch=args.batch,
                       duration=args.duration, rate=args.rate)
    summary = asyncio.run(run(opts, max(args.rounds, 1), args.scrape_interval))
    if args.json:
        print(json.dumps(summary))
    else:
        print_off_on("metrics", "metrics", summary)
    return 0
