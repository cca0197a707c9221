"""`orbitmq bench all`: a short local-cluster scenario against the issue's goals.

Starts `orbitmq local` in a child process (temporary data dir, free ports, ASYNC_FLUSH), then:
baseline vs proxy throughput for batches of 32 x 1 KiB, single-message send RT at a fixed rate
(next to the bare echo server's RT at the same rate, the floor of this load generator), and
end-to-end latency with a consumer running at that rate. Goals are printed, not asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench import baseline
from orbitmq.bench.consumer import ConsumeOptions, run_consume_load
from orbitmq.bench.load import LoadOptions, run_send_load
from orbitmq.bench.stats import format_summary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_local(data_dir: str, one_process: bool = False, pin_cpus: bool = False) -> tuple[subprocess.Popen, str]:
    ports = [_free_port() for _ in range(3)]
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
        produced = await run_send_load(LoadOptions(endpoint=endpoint, topic=topic, size=size, concurrency=32,
                                                   duration=duration, rate=rate))
        out, _ = await asyncio.wait_for(consumer.communicate(), duration + 30)
    except BaseException:
        if consumer.returncode is None:
            consumer.kill()
            await consumer.wait()
        raise
    consumed = json.loads(out.decode().strip().splitlines()[-1])
    return produced.summary(), consumed


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench all", description=__doc__)
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("-s", "--size", type=int, default=1024)
    parser.add_argument("--rate", type=float, default=1000.0, help="msgs/s for the latency runs")
    parser.add_argument("-w", "--concurrency", type=int, default=8, help="in-flight batch requests")
    parser.add_argument("--one-process", action="store_true",
                        help="run `orbitmq local --one-process` (broker on the proxy's event loop)")
    parser.add_argument("--pin-cpus", action="store_true",
                        help="run `orbitmq local --pin-cpus` (proxy and broker each on a CPU of their own)")
    args = parser.parse_args(list(argv or []))

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

    mode = "broker on the proxy's event loop" if args.one_process else "broker in its own process"
    if args.pin_cpus and not args.one_process:
        mode += ", --pin-cpus"
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
            print(format_summary(f"e2e producer at {args.rate:.0f}/s", produced), flush=True)
            print(format_summary("e2e consumer", consumed, "end-to-end"), flush=True)
            batch = asyncio.run(run_send_load(LoadOptions(endpoint=endpoint, size=args.size, batch=32,
                                                          concurrency=args.concurrency,
                                                          duration=args.duration))).summary()
            print(format_summary("producer batch 32", batch), flush=True)
        finally:
            stop_local(proc)

    ratio = batch["tps"] / base["tps"] if base["tps"] else 0.0
    print(f"== goals (1 KiB, ASYNC_FLUSH, local, {mode}; load average after: {_load_average()})")
    print(f"producer batch-32 throughput = {ratio * 100:.0f}% of baseline (goal >= 50%): {verdict(ratio >= 0.5)}")
    at_rate = single["tps"] >= 0.9 * args.rate
    print(f"single-message send p99 = {single['p99_ms']:.2f} ms at {single['tps']:.0f} msgs/s "
          f"(goal <= 10 ms at {args.rate:.0f}/s): {verdict(at_rate and single['p99_ms'] <= 10)}; "
          f"bare echo server at the same rate: p99 {base_single['p99_ms']:.2f} ms")
    kept_up = consumed["tps"] >= 0.9 * args.rate
    print(f"end-to-end p99 = {consumed['p99_ms']:.2f} ms at {consumed['tps']:.0f} msgs/s consumed "
          f"(goal <= 50 ms at {args.rate:.0f}/s): {verdict(kept_up and consumed['p99_ms'] <= 50)}")
    return 0
