"""`orbitmq bench all`: a short local-cluster scenario against the issue's goals.

Starts `orbitmq local` in a child process (temporary data dir, free ports, ASYNC_FLUSH), then:
baseline vs proxy throughput for batches of 32 x 1 KiB (the baseline measured before and again
after the cluster's runs, the ratio taken to their mean), single-message send RT at a fixed rate
(next to the bare echo server's RT at the same rate, the floor of this load generator), and
end-to-end latency with a consumer running at that rate (next to the same producer and consumer
through the echo server's in-memory relay: the floor of Python gRPC for that shape, and how busy
the machine was in each). Goals are printed, not asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench import baseline
from orbitmq.bench.consumer import ConsumeOptions, run_consume_load
from orbitmq.bench.load import LoadOptions, run_send_load
from orbitmq.bench.stats import format_summary
from orbitmq.common.net import free_ports


def start_local(data_dir: str, one_process: bool = False, pin_cpus: bool = False) -> tuple[subprocess.Popen, str]:
    ports = free_ports(3)
    proc = subprocess.Popen([sys.executable, "-m", "orbitmq", "local", "--data-dir", data_dir,
                             "--namesrv-port", str(ports[0]), "--broker-port", str(ports[1]),
                             "--proxy-port", str(ports[2]), "--log-level", "ERROR",
                             *(["--one-process"] if one_process else []),
                             *(["--pin-cpus"] if pin_cpus else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line and proc.poll() is not None:
            raise RuntimeError("orbitmq local exited before it was ready")
        if "Press Ctrl-C" in line:
            return proc, f"127.0.0.1:{ports[2]}"
    proc.kill()
    raise RuntimeError("orbitmq local did not become ready")


def stop_local(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


CONSUMER_READY = "bench consumer ready"


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the whole machine from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return sum(values) - values[3] - values[4], sum(values)


def machine_busy(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of all CPUs busy between two `_cpu_jiffies` readings (every process, not only ours)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


async def _e2e(endpoint: str, duration: float, rate: float, size: int) -> tuple[dict, dict]:
    """Produce at ``rate`` while a consumer group receives; the consumer stops once caught up.

    The consumer runs in a process of its own: sharing the producer's event loop, its receive
    and ack work delayed both the producer's schedule and the arrival times it records.
    """
    topic, group = "OrbitBenchE2E", "OrbitBenchE2EGroup"
    # Create the topic and let the consumer's group exist before the timed run.
    await run_send_load(LoadOptions(endpoint=endpoint, topic=topic, size=size, concurrency=1, duration=0.2, rate=50))
    await run_consume_load(ConsumeOptions(endpoint=endpoint, topic=topic, group=group, duration=1.5, concurrency=2))
    consumer = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orbitmq", "bench", "consumer", "--endpoint", endpoint, "-t", topic, "-g", group,
        "-w", "2", "-d", str(duration + 15), "--idle-stop", "2", "--json", "--ready-line", CONSUMER_READY,
        stdout=asyncio.subprocess.PIPE)
    try:
        assert consumer.stdout is not None
        while (line := await asyncio.wait_for(consumer.stdout.readline(), 30)) and CONSUMER_READY not in line.decode():
            pass
        if not line:
            raise RuntimeError("bench consumer exited before it was ready")
        before = _cpu_jiffies()
        produced = await run_send_load(LoadOptions(endpoint=endpoint, topic=topic, size=size, concurrency=32,
                                                   duration=duration, rate=rate))
        busy = machine_busy(before, _cpu_jiffies())
        out, _ = await asyncio.wait_for(consumer.communicate(), duration + 30)
    except BaseException:
        if consumer.returncode is None:
            consumer.kill()
            await consumer.wait()
        raise
    consumed = json.loads(out.decode().strip().splitlines()[-1])
    summary = produced.summary()
    summary["machine_busy"] = busy
    return summary, consumed


def _busy(summary: dict) -> str:
    busy = summary.get("machine_busy")
    return "unknown" if busy is None else f"{busy * 100:.0f}%"


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orbitmq bench all", description=__doc__)
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("-s", "--size", type=int, default=1024)
    parser.add_argument("--rate", type=float, default=1000.0, help="msgs/s for the latency runs")
    parser.add_argument("-w", "--concurrency", type=int, default=8, help="in-flight batch requests")
    parser.add_argument("--one-process", action="store_true",
                        help="run `orbitmq local --one-process` (broker on the proxy's event loop)")
    parser.add_argument("--pin-cpus", action="store_true",
                        help="run `orbitmq local --pin-cpus` (proxy and broker each on a CPU of their own)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run the whole scenario N times (each with its own baselines and cluster) and "
                             "judge the goals on the medians: on a shared machine one run is one sample")
    return parser


def run_scenario(args: argparse.Namespace, mode: str) -> dict[str, float]:
    """One pass: the baselines, then a fresh `orbitmq local` under the same loads; the goal figures."""
    print(f"== load average before the run: {_load_average()} ({os.cpu_count()} CPUs)", flush=True)
    ns = argparse.Namespace(endpoint="", topic="OrbitBench", size=args.size, concurrency=args.concurrency,
                            batch=32, duration=args.duration, rate=0.0)
    print(f"== baseline: bare grpc.aio echo, batch 32 x {args.size} B, {args.concurrency} in flight", flush=True)
    base = baseline.run_baseline(ns)
    print(format_summary("baseline batch 32", base), flush=True)
    # The same single-message schedule as the proxy's latency run: what this load generator and
    # Python gRPC measure on this machine when the server does nothing.
    ns_single = argparse.Namespace(endpoint="", topic="OrbitBench", size=args.size, concurrency=32,
                                   batch=1, duration=args.duration, rate=args.rate)
    base_single = baseline.run_baseline(ns_single)
    print(format_summary(f"baseline single message at {args.rate:.0f}/s", base_single), flush=True)
    # The end-to-end shape through the echo server's relay (no store, no broker).
    relay, relay_endpoint = baseline.start_server_process()
    try:
        relay_produced, relay_consumed = asyncio.run(_e2e(relay_endpoint, args.duration, args.rate, args.size))
    finally:
        baseline.stop_server_process(relay)
    print(format_summary(f"baseline e2e producer at {args.rate:.0f}/s", relay_produced)
          + f", machine busy {_busy(relay_produced)}", flush=True)
    print(format_summary("baseline e2e consumer (in-memory relay)", relay_consumed, "end-to-end"), flush=True)

    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-") as data_dir:
        proc, endpoint = start_local(data_dir, args.one_process, args.pin_cpus)
        try:
            print(f"== orbitmq local at {endpoint} (ASYNC_FLUSH, {mode}, data in {data_dir})", flush=True)
            # Latency runs first: the batch run leaves the broker a dispatch backlog to work off.
            single = asyncio.run(run_send_load(LoadOptions(endpoint=endpoint, topic="OrbitBenchSingle",
                                                           size=args.size, batch=1, concurrency=32,
                                                           duration=args.duration, rate=args.rate))).summary()
            print(format_summary(f"producer single message at {args.rate:.0f}/s", single), flush=True)
            produced, consumed = asyncio.run(_e2e(endpoint, args.duration, args.rate, args.size))
            print(format_summary(f"e2e producer at {args.rate:.0f}/s", produced)
                  + f", machine busy {_busy(produced)}", flush=True)
            print(format_summary("e2e consumer", consumed, "end-to-end"), flush=True)
            batch = asyncio.run(run_send_load(LoadOptions(endpoint=endpoint, size=args.size, batch=32,
                                                          concurrency=args.concurrency,
                                                          duration=args.duration))).summary()
            print(format_summary("producer batch 32", batch), flush=True)
        finally:
            stop_local(proc)
    # The baseline again, right after the proxy's batch run: a minute passes between the first
    # baseline and the proxy's run, and this host's speed drifts by a third within minutes. The
    # mean of a measurement before and one after is the baseline at the time of the proxy's run
    # when the drift is steady, and no worse than the first alone when it is not.
    base_after = baseline.run_baseline(ns)
    base_tps = (base["tps"] + base_after["tps"]) / 2
    print(format_summary("baseline batch 32, again after the cluster", base_after)
          + f"; mean of the two baselines {base_tps:.0f} msgs/s", flush=True)
    return {
        "ratio": batch["tps"] / base_tps if base_tps else 0.0,
        "single_p99_ms": single["p99_ms"], "single_tps": single["tps"], "echo_single_p99_ms": base_single["p99_ms"],
        "e2e_p99_ms": consumed["p99_ms"], "e2e_tps": consumed["tps"], "relay_e2e_p99_ms": relay_consumed["p99_ms"],
        "busy": produced.get("machine_busy") or 0.0, "relay_busy": relay_produced.get("machine_busy") or 0.0,
    }


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def print_goals(runs: list[dict[str, float]], rate: float, mode: str) -> None:
    """The goal verdicts on one run's figures, or on the medians of several (each run listed)."""
    n = len(runs)
    g = {key: _median([run[key] for run in runs]) for key in runs[0]}
    judged = "" if n == 1 else f", median of {n} runs"
    print(f"== goals (1 KiB, ASYNC_FLUSH, local, {mode}{judged}; load average after: {_load_average()})")
    if n > 1:
        print("runs: batch-32 ratio " + ", ".join(f"{r['ratio'] * 100:.0f}%" for r in runs)
              + "; single p99 " + ", ".join(f"{r['single_p99_ms']:.1f}" for r in runs)
              + " ms; end-to-end p99 " + ", ".join(f"{r['e2e_p99_ms']:.1f}" for r in runs) + " ms")
    ratio = g["ratio"]
    print(f"producer batch-32 throughput = {ratio * 100:.0f}% of baseline (mean of the baseline before and after; "
          f"goal >= 50%): {verdict(ratio >= 0.5)}")
    at_rate = g["single_tps"] >= 0.9 * rate
    print(f"single-message send p99 = {g['single_p99_ms']:.2f} ms at {g['single_tps']:.0f} msgs/s "
          f"(goal <= 10 ms at {rate:.0f}/s): {verdict(at_rate and g['single_p99_ms'] <= 10)}; "
          f"bare echo server at the same rate: p99 {g['echo_single_p99_ms']:.2f} ms")
    kept_up = g["e2e_tps"] >= 0.9 * rate
    print(f"end-to-end p99 = {g['e2e_p99_ms']:.2f} ms at {g['e2e_tps']:.0f} msgs/s consumed "
          f"(goal <= 50 ms at {rate:.0f}/s): {verdict(kept_up and g['e2e_p99_ms'] <= 50)}; "
          f"in-memory relay at the same rate: p99 {g['relay_e2e_p99_ms']:.2f} ms; "
          f"machine busy {g['busy'] * 100:.0f}% (relay {g['relay_busy'] * 100:.0f}%)")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(argv or []))
    if args.repeat < 1:
        raise SystemExit("orbitmq bench all: --repeat must be at least 1")
    mode = "broker on the proxy's event loop" if args.one_process else "broker in its own process"
    if args.pin_cpus and not args.one_process:
        mode += ", --pin-cpus"
    runs = []
    for i in range(args.repeat):
        if args.repeat > 1:
            print(f"== run {i + 1} of {args.repeat}", flush=True)
        runs.append(run_scenario(args, mode))
    print_goals(runs, args.rate, mode)
    return 0
