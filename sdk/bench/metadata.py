"""`orbitmq bench metadata`: topic creation as a user does it, one UPDATE_AND_CREATE_TOPIC at a time.

Starts a NameServer and a broker (``orbitmq namesrv`` / ``orbitmq broker`` child processes on
free loopback ports, a temporary store), then creates ``--topics`` topics of ``--queues``
queues one after another with UPDATE_AND_CREATE_TOPIC (what mqadmin updateTopic sends), and
prints the creation rate over the ``--window`` creations before each checkpoint (1,000, 10,000
and 100,000 topics by default; ``--topics`` smaller for a quick run). Then: the rate of
deleting ``--window`` topics, the same for subscription groups (``--groups``), the broker's
resident memory per topic (VmRSS and RssAnon growth over the run divided by the topics made),
and the broker's restart time with all of them, after a clean stop and after kill -9 (start of
the process to its "boot success" line). Every checkpoint also checks that the NameServer
routes the last topic created.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from orbitmq.bench.memory import tree_rss_mib
from orbitmq.client.api import MQClientAPI
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig

BOOT_TEXT = "boot success"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(args: list[str], log_path: Path, timeout: float = 300.0) -> tuple[subprocess.Popen, float]:  # noqa: ASYNC109
    """``python -m orbitmq ARGS``, returned with the seconds it took to print its boot line."""
    seen = log_path.stat().st_size if log_path.exists() else 0  # the log is appended to across restarts
    started = time.monotonic()
    log = open(log_path, "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen([sys.executable, "-m", "orbitmq", *args], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = started + timeout
    while time.monotonic() < deadline:
        text = log_path.read_bytes()[seen:]
        if BOOT_TEXT.encode() in text:
            return proc, time.monotonic() - started
        if proc.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with {proc.returncode}; see {log_path}")
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"{args[0]} did not boot in {timeout:.0f} s; see {log_path}")


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 120.0) -> float:  # noqa: ASYNC109
    started = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return time.monotonic() - started


class Cluster:
    def __init__(self, workdir: Path, extra: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.namesrv_port = _free_port()
        self.broker_port = _free_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"
        self.conf = workdir / "broker.conf"
        keys = {"brokerClusterName": "BenchCluster", "brokerName": "bench-broker", "brokerIP1": "127.0.0.1",
                "listenPort": self.broker_port, "storePathRootDir": workdir / "store",
                "namesrvAddr": self.namesrv_addr, "mappedFileSizeCommitLog": 4 * 1024 * 1024}
        lines = [f"{k}={v}" for k, v in keys.items()] + list(extra)
        self.conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.namesrv: subprocess.Popen | None = None
        self.broker: subprocess.Popen | None = None

    def start_namesrv(self) -> None:
        self.namesrv, _ = _spawn(["namesrv", f"listenPort={self.namesrv_port}", "bindAddress=127.0.0.1",
                                  f"kvConfigPath={self.workdir / 'kvConfig.json'}"], self.workdir / "namesrv.log")

    def start_broker(self) -> float:
        self.broker, took = _spawn(["broker", "-c", str(self.conf)], self.workdir / "broker.log")
        return took

    def stop(self) -> None:
        for proc in (self.broker, self.namesrv):
            if proc is not None:
                _stop(proc)


async def _timed_creates(api: MQClientAPI, addr: str, names: list[str], queues: int) -> tuple[float, float]:
    """(seconds for all, slowest single create in seconds)."""
    started = time.perf_counter()
    slowest = 0.0
    for name in names:
        one = time.perf_counter()
        await api.create_topic(addr, TopicConfig(name, read_queue_nums=queues, write_queue_nums=queues))
        slowest = max(slowest, time.perf_counter() - one)
    return time.perf_counter() - started, slowest


async def run(args: argparse.Namespace, workdir: Path) -> dict:
    checkpoints = sorted({c for c in args.checkpoints if c <= args.topics} | {args.topics})
    window = max(1, args.window)
    cluster = Cluster(workdir, args.broker_key)
    results: dict = {"topics": args.topics, "queues": args.queues, "checkpoints": []}
    cluster.start_namesrv()
    cluster.start_broker()
    api = MQClientAPI(timeout=30.0)
    try:
        pid = cluster.broker.pid
        rss0, anon0 = tree_rss_mib(pid), tree_rss_mib(pid, "RssAnon")
        made = 0
        run_started = time.perf_counter()
        for checkpoint in checkpoints:
            # Creations up to the window before the checkpoint, then the timed window.
            segment_start, segment_started = made, time.perf_counter()
            bulk_end = max(made, checkpoint - window)
            slowest = 0.0
            if bulk_end > made:
                _took, slowest = await _timed_creates(api, cluster.broker_addr,
                                                      [f"BenchTopic-{i}" for i in range(made, bulk_end)], args.queues)
                made = bulk_end
            names = [f"BenchTopic-{i}" for i in range(made, checkpoint)]
            took, window_slowest = await _timed_creates(api, cluster.broker_addr, names, args.queues)
            made = checkpoint
            segment = (checkpoint - segment_start) / (time.perf_counter() - segment_started)
            routed = await _route_lag(api, cluster.namesrv_addr, names[-1])
            rate = len(names) / took if took > 0 else float("inf")
            results["checkpoints"].append({"topics": checkpoint, "rate": rate, "window": len(names),
                                           "segment_rate": segment, "segment_from": segment_start,
                                           "slowest": max(slowest, window_slowest),
                                           "routed": routed, "elapsed": time.perf_counter() - run_started})
            print(f"  {checkpoint:>8,} topics: {rate:8.1f} creations/s over the last {len(names):,}, "
                  f"{segment:8.1f}/s since {segment_start:,} (slowest create {max(slowest, window_slowest) * 1000:.0f} ms; "
                  f"NameServer routed the last one after {routed * 1000:.0f} ms; "
                  f"{time.perf_counter() - run_started:.0f} s so far)", flush=True)
        await asyncio.sleep(1)
        rss1, anon1 = tree_rss_mib(pid), tree_rss_mib(pid, "RssAnon")
        if None not in (rss0, rss1, anon0, anon1):
            results["rss_per_topic"] = (rss1 - rss0) * 1024 * 1024 / made
            results["anon_per_topic"] = (anon1 - anon0) * 1024 * 1024 / made
            results["rss_mib"] = rss1
        # Deletions of the last `window` topics, the broker keeping the rest.
        doomed = [f"BenchTopic-{i}" for i in range(max(0, made - window), made)]
        started = time.perf_counter()
        for name in doomed:
            await api.delete_topic_in_broker(cluster.broker_addr, name)
        results["delete_rate"] = len(doomed) / (time.perf_counter() - started)
        for name in doomed:  # put them back, so that the restarts load args.topics topics
            await api.create_topic(cluster.broker_addr, TopicConfig(name, read_queue_nums=args.queues,
                                                                    write_queue_nums=args.queues))
        if args.groups:
            started = time.perf_counter()
            for i in range(args.groups):
                await api.create_subscription_group(cluster.broker_addr, SubscriptionGroupConfig(f"BenchGroup-{i}"))
            results["group_rate"] = args.groups / (time.perf_counter() - started)
            started = time.perf_counter()
            for i in range(min(window, args.groups)):
                await api.delete_subscription_group(cluster.broker_addr, f"BenchGroup-{i}")
            results["group_delete_rate"] = min(window, args.groups) / (time.perf_counter() - started)
        await api.close()
        # Restart after a clean stop, then after kill -9.
        results["stop_s"] = _stop(cluster.broker)
        results["restart_s"] = cluster.start_broker()
        results["count_after_restart"] = await _topic_count(cluster.broker_addr)
        _stop(cluster.broker, signal.SIGKILL)
        results["restart_kill9_s"] = cluster.start_broker()
        results["count_after_kill9"] = await _topic_count(cluster.broker_addr)
        config_dir = workdir / "store" / "config"
        results["files"] = {p.name: p.stat().st_size for p in sorted(config_dir.iterdir())
                            if p.name.startswith(("topics", "subscriptionGroup"))}
    finally:
        await api.close()
        cluster.stop()
    return results


async def _route_lag(api: MQClientAPI, namesrv_addr: str, topic: str, timeout: float = 60.0) -> float:  # noqa: ASYNC109
    """Seconds from now until the NameServer routes ``topic`` (0 when it already does)."""
    started = time.perf_counter()
    while True:
        try:
            route = await api.get_topic_route(namesrv_addr, topic)
            if route.queue_datas:
                return time.perf_counter() - started
        except Exception:
            if time.perf_counter() - started > timeout:
                raise
        await asyncio.sleep(0.01)


async def _topic_count(addr: str) -> int:
    api = MQClientAPI(timeout=30.0)
    try:
        info = await api.get_broker_runtime_info(addr)
        return int(info.get("topicCount", "-1"))
    finally:
        await api.close()


def format_results(r: dict) -> str:
    lines = [f"metadata: {r['topics']:,} topics of {r['queues']} queues, one UPDATE_AND_CREATE_TOPIC at a time"]
    for c in r["checkpoints"]:
        lines.append(f"  rate at {c['topics']:>8,} topics: {c['rate']:8.1f}/s over the last {c['window']:,} creations; "
                     f"{c['segment_rate']:.1f}/s on average since {c['segment_from']:,}, slowest create "
                     f"{c['slowest'] * 1000:.0f} ms")
    lines.append(f"  delete rate at {r['topics']:,} topics: {r['delete_rate']:.1f}/s")
    if "group_rate" in r:
        lines.append(f"  subscription groups: create {r['group_rate']:.1f}/s, delete {r['group_delete_rate']:.1f}/s")
    if "rss_per_topic" in r:
        lines.append(f"  broker memory: RSS {r['rss_mib']:.0f} MiB, {r['rss_per_topic'] / 1024:.1f} KiB RSS and "
                     f"{r['anon_per_topic'] / 1024:.1f} KiB heap (RssAnon) per topic")
    lines.append(f"  restart with {r['topics']:,} topics: {r['restart_s']:.1f} s after a clean stop "
                 f"(stop took {r['stop_s']:.1f} s; {r['count_after_restart']:,} topics loaded), "
                 f"{r['restart_kill9_s']:.1f} s after kill -9 ({r['count_after_kill9']:,} topics loaded)")
    lines.append("  config files: " + ", ".join(f"{k} {v:,} B" for k, v in r["files"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench metadata", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-t", "--topics", type=int, default=100_000)
    parser.add_argument("-q", "--queues", type=int, default=8)
    parser.add_argument("--checkpoints", type=lambda s: [int(x) for x in s.split(",") if x],
                        default=[1_000, 10_000, 100_000], help="topic counts to report the rate at")
    parser.add_argument("-w", "--window", type=int, default=500, help="creations timed before each checkpoint")
    parser.add_argument("-g", "--groups", type=int, default=1_000, help="subscription groups created (0: none)")
    parser.add_argument("--broker-key", action="append", default=[], metavar="KEY=VALUE",
                        help="extra broker.conf line (repeatable), e.g. enableSplitRegistration=true")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, store) and print it")
    args = parser.parse_args(list(argv or []))
    workdir = Path(tempfile.mkdtemp(prefix="orbitmq-bench-metadata-"))
    try:
        results = asyncio.run(run(args, workdir))
        print(format_results(results))
    finally:
        if args.keep:
            print(f"work dir: {workdir}")
        else:
            import shutil
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
