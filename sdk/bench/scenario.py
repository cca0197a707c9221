"""`orbitmq bench all`: a short local-cluster scenario against the issue's goals.

Starts `orbitmq local` in a child process (temporary data dir, free ports, ASYNC_FLUSH), then:
baseline vs proxy throughput for batches of 32 x 1 KiB (the baseline measured before and again
after the cluster's runs, the ratio taken to their mean), single-message send RT at a fixed rate
(next to the bare echo server's RT at the same rate, the floor of this load generator), and
end-to-end latency with a consumer running at that rate (next to the same producer and consumer
through the echo server's in-memory relay: the floor of Python gRPC for that shape, and how busy
the machine was in each). Goals are printed, not asserted.

Issue 17's figures, each next to a reference measured in the same run: single-message sends with 64
in flight vs the bare unary echo (measured before and after the cluster, the mean taken); a drain
of --drain-messages stored messages (receive batches of 32, one AckMessage per batch, idle tail
not counted, every message id counted) vs NATS JetStream's drain; the highest rate of a x1.5
ladder held within 5 % with a consumer running, and its end-to-end p50/p99 vs NATS at that rate;
`orbitmq local`'s RSS idle and after draining --messages messages. NATS needs `nats-server` and
nats-py (`make bench` installs both); without them, or with --no-nats, it is skipped and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

from orbitmq.bench import baseline, memory, nats_bench
from orbitmq.bench.consumer import ConsumeOptions, run_consume_load
from orbitmq.bench.drain import fill_and_drain, format_drain
from orbitmq.bench.load import LoadOptions, run_send_load
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.stats import format_summary
from orbitmq.common.net import free_ports


def start_local(data_dir: str, one_process: bool = False, pin_cpus: bool = False) -> tuple[subprocess.Popen, str]:
    ports = free_ports(3)
    proc = launch_local(data_dir, [*local_ports_args(*ports), *(["--one-process"] if one_process else []),
                                   *(["--pin-cpus"] if pin_cpus else [])])
    return proc, f"127.0.0.1:{ports[2]}"


def stop_local(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def given_or_local(namesrv: str | None, endpoint: str | None, prefix: str) -> Iterator[tuple[str, str]]:
    """The (NameServer, proxy) a bench measures: the ones given, else a temporary `orbitmq local`
    in a directory named with ``prefix``, stopped and removed afterwards."""
    if namesrv is not None and endpoint is not None:
        yield namesrv, endpoint
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        ports = free_ports(3)
        proc = launch_local(tmp, local_ports_args(*ports))
        try:
            yield f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[2]}"
        finally:
            stop_local(proc)


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
    parser.add_argument("--drain-messages", type=int, default=50_000, metavar="N",
                        help="messages stored, then drained with receive + batched ack (OrbitMQ and NATS)")
    parser.add_argument("--messages", type=int, default=1_000_000, metavar="N",
                        help="messages drained before the RSS of `orbitmq local` is read again (0 = skip)")
    parser.add_argument("--search-start", type=float, default=500.0, metavar="RATE",
                        help="first msgs/s of the search for the highest rate held with a consumer running")
    parser.add_argument("--search-duration", type=float, default=5.0, metavar="S", help="seconds per search step")
    parser.add_argument("--search-steps", type=int, default=6, metavar="N", help="most rates tried (x1.5 each)")
    parser.add_argument("--no-nats", action="store_true", help="skip the NATS JetStream reference")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run the whole scenario N times (each with its own baselines and cluster) and "
                             "judge the goals on the medians: on a shared machine one run is one sample")
    return parser


def held(rate: float, produced: dict, consumed: dict) -> bool:
    """A fixed rate is held when producer and consumer both reach it within 5 % without errors."""
    return (produced["errors"] == 0 and produced["tps"] >= 0.95 * rate and consumed["tps"] >= 0.95 * rate
            and consumed["messages"] >= 0.95 * produced["messages"])


def find_rate(endpoint: str, args: argparse.Namespace) -> tuple[float, dict, dict]:
    """The highest rate of the ladder (x1.5 from --search-start) held with a consumer running, and its
    (produced, consumed) figures; (0, {}, {}) when not even the first is held."""
    best: tuple[float, dict, dict] = (0.0, {}, {})
    rate = args.search_start
    for _ in range(args.search_steps):
        produced, consumed = asyncio.run(_e2e(endpoint, args.search_duration, rate, args.size))
        ok = held(rate, produced, consumed)
        print(f"rate search {rate:.0f}/s: {'held' if ok else 'NOT held'}: produced {produced['tps']:.0f} msgs/s, "
              f"consumed {consumed['tps']:.0f} msgs/s, end-to-end p50 {consumed['p50_ms']:.2f} ms, "
              f"p99 {consumed['p99_ms']:.2f} ms", flush=True)
        if not ok:
            break
        best = (rate, produced, consumed)
        rate = round(rate * 1.5)
    return best


def run_nats(args: argparse.Namespace, rate: float) -> dict[str, float]:
    """The NATS JetStream reference: publishes 64 in flight, the drain, end to end at ``rate``."""
    why = None if not args.no_nats else "--no-nats"
    why = why or nats_bench.available()
    if why:
        print(f"== NATS JetStream skipped: {why}", flush=True)
        return {}
    server = nats_bench.NatsServer()
    try:
        print(f"== NATS JetStream at {server.url} (file storage, nats-py)", flush=True)
        pub = asyncio.run(nats_bench.publish_load(server.url, "orbitbench.pub", 64, args.duration, args.size))
        pub_s = pub.summary()
        print(format_summary("NATS JetStream publish, 64 in flight", pub_s), flush=True)
        drained = asyncio.run(nats_bench.drain(server.url, args.drain_messages, args.size)).summary()
        print(format_drain("NATS JetStream drain (fetch 32 + ack)", drained), flush=True)
        out = {"nats_single_tps": pub_s["tps"], "nats_drain_tps": drained["tps"]}
        if rate > 0:
            produced, consumed = asyncio.run(nats_bench.e2e(server.url, rate, args.search_duration, args.size))
            print(format_summary(f"NATS JetStream publisher at {rate:.0f}/s", produced), flush=True)
            print(format_summary("NATS JetStream pull consumer", consumed, "end-to-end"), flush=True)
            out.update(nats_e2e_p50_ms=consumed["p50_ms"], nats_e2e_p99_ms=consumed["p99_ms"],
                       nats_held=1.0 if held(rate, produced, consumed) else 0.0)
        return out
    finally:
        server.stop()


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
    # What the official clients send: one message per unary SendMessage, 64 in flight, unlimited.
    ns_unary = argparse.Namespace(endpoint="", topic="OrbitBench", size=args.size, concurrency=64,
                                  batch=1, duration=args.duration, rate=0.0)
    base_unary = baseline.run_baseline(ns_unary)
    print(format_summary("baseline unary echo, single message, 64 in flight", base_unary), flush=True)
    # The end-to-end shape through the echo server's relay (no store, no broker).
    relay, relay_endpoint = baseline.start_server_process()
    try:
        relay_produced, relay_consumed = asyncio.run(_e2e(relay_endpoint, args.duration, args.rate, args.size))
    finally:
        baseline.stop_server_process(relay)
    print(format_summary(f"baseline e2e producer at {args.rate:.0f}/s", relay_produced)
          + f", machine busy {_busy(relay_produced)}", flush=True)
    print(format_summary("baseline e2e consumer (in-memory relay)", relay_consumed, "end-to-end"), flush=True)
    # The drain's reference: the same fill and drain from the relay (no store, no broker).
    relay_drained = baseline.run_relay_drain(args.drain_messages, args.size)
    print(format_drain("baseline drain from the in-memory relay", relay_drained), flush=True)

    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-") as data_dir:
        proc, endpoint = start_local(data_dir, args.one_process, args.pin_cpus)
        try:
            print(f"== orbitmq local at {endpoint} (ASYNC_FLUSH, {mode}, data in {data_dir})", flush=True)
            time.sleep(1)
            idle_rss = memory.tree_rss_mib(proc.pid)
            idle_anon = memory.tree_rss_mib(proc.pid, "RssAnon")
            unary = asyncio.run(run_send_load(LoadOptions(endpoint=endpoint, topic="OrbitBenchUnary", size=args.size,
                                                          batch=1, concurrency=64,
                                                          duration=args.duration))).summary()
            print(format_summary("producer single message, 64 in flight", unary), flush=True)
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
            drained = asyncio.run(fill_and_drain(endpoint, "OrbitBenchDrain", "OrbitBenchDrainGroup",
                                                 args.drain_messages, args.size)).summary()
            print(format_drain("drain receive+ack", drained), flush=True)
            rate, _held_produced, held_consumed = find_rate(endpoint, args)
            mem = {"idle_mib": idle_rss, "half_mib": None, "after_mib": None, "messages": 0}
            if args.messages > 0:
                mem = memory.measure(endpoint, proc.pid, args.messages, args.size)
            mem.update(idle_mib=idle_rss, idle_anon_mib=idle_anon)  # before any load of this run
            print(memory.format_memory(mem), flush=True)
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
    # The unary echo again too: the single-message ratio is taken to the mean of both.
    base_unary_after = baseline.run_baseline(ns_unary)
    echo_unary_tps = (base_unary["tps"] + base_unary_after["tps"]) / 2
    print(format_summary("baseline unary echo, again after the cluster", base_unary_after)
          + f"; mean of the two {echo_unary_tps:.0f} RPC/s", flush=True)
    nats = run_nats(args, rate)
    return {
        "unary_tps": unary["tps"], "echo_unary_tps": echo_unary_tps,
        "drain_tps": drained["tps"], "relay_drain_tps": relay_drained["tps"],
        "drain_exact": 1.0 if drained["duplicates"] == drained["missing"] == 0 else 0.0,
        "held_rate": rate, "held_p50_ms": held_consumed.get("p50_ms", 0.0),
        "held_p99_ms": held_consumed.get("p99_ms", 0.0),
        "idle_rss_mib": mem["idle_mib"] or 0.0, "drained_rss_mib": mem["after_mib"] or 0.0,
        "half_rss_mib": mem["half_mib"] or 0.0, "rss_messages": mem["messages"],
        "idle_anon_mib": mem.get("idle_anon_mib") or 0.0, "half_anon_mib": mem.get("half_anon_mib") or 0.0,
        "drained_anon_mib": mem.get("after_anon_mib") or 0.0,
        **nats,
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
    # A figure some runs lack (NATS at a held rate when a run held none) is the median of those that have it.
    keys = dict.fromkeys(key for run in runs for key in run)
    g = {key: _median([run[key] for run in runs if key in run]) for key in keys}
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
    print_issue17_goals(g)


def print_issue17_goals(g: dict[str, float]) -> None:
    """Issue 17's goals, each a ratio of figures printed above (same run, or medians of the runs)."""
    if "unary_tps" not in g:
        return
    echo = g["echo_unary_tps"]
    unary = g["unary_tps"] / echo if echo else 0.0
    print(f"single-message send, 64 in flight = {g['unary_tps']:.0f} msgs/s = {unary * 100:.0f}% of the bare unary "
          f"echo's {echo:.0f} RPC/s (mean of before and after; goal >= 85%): {verdict(unary >= 0.85)}")
    exact = "each message received exactly once" if g["drain_exact"] >= 1 else "NOT each message exactly once"
    relay = ""
    if g.get("relay_drain_tps"):
        nats = (f" = {g['relay_drain_tps'] / g['nats_drain_tps'] * 100:.0f}% of NATS's" if g.get("nats_drain_tps")
                else "")
        relay = (f"; the same drain from the echo's in-memory relay (no store, no broker) = "
                 f"{g['relay_drain_tps']:.0f} msgs/s{nats}, OrbitMQ {g['drain_tps'] / g['relay_drain_tps'] * 100:.0f}% "
                 f"of it")
    if g.get("nats_drain_tps"):
        drain = g["drain_tps"] / g["nats_drain_tps"]
        print(f"drain receive+ack = {g['drain_tps']:.0f} msgs/s = {drain * 100:.0f}% of NATS JetStream's "
              f"{g['nats_drain_tps']:.0f} msgs/s (goal >= 100%): {verdict(drain >= 1)}; {exact}{relay}")
        if g.get("nats_single_tps"):
            print(f"single-message send, 64 in flight = {g['unary_tps'] / g['nats_single_tps'] * 100:.0f}% of NATS "
                  f"JetStream publish's {g['nats_single_tps']:.0f} msgs/s (informational)")
    else:
        print(f"drain receive+ack = {g['drain_tps']:.0f} msgs/s (NATS not measured); {exact}{relay}")
    rate = g["held_rate"]
    if rate <= 0:
        print("highest rate held within 5% with a consumer running: none of the ladder (goal not judged)")
    elif g.get("nats_e2e_p99_ms"):
        ratio = g["held_p99_ms"] / g["nats_e2e_p99_ms"]
        print(f"highest rate held within 5% with a consumer running = {rate:.0f} msgs/s: end-to-end p50 "
              f"{g['held_p50_ms']:.2f} ms, p99 {g['held_p99_ms']:.2f} ms; NATS at the same rate p50 "
              f"{g['nats_e2e_p50_ms']:.2f} ms, p99 {g['nats_e2e_p99_ms']:.2f} ms: p99 {ratio:.1f}x NATS's "
              f"(goal <= 3x): {verdict(ratio <= 3)}")
    else:
        print(f"highest rate held within 5% with a consumer running = {rate:.0f} msgs/s: end-to-end p50 "
              f"{g['held_p50_ms']:.2f} ms, p99 {g['held_p99_ms']:.2f} ms (NATS not measured)")
    print(f"orbitmq local RSS: idle {g['idle_rss_mib']:.0f} MiB, after draining {g['rss_messages']:,.0f} messages "
          f"{g['drained_rss_mib']:.0f} MiB (second half of the drain grew "
          f"{g['drained_rss_mib'] - g['half_rss_mib']:.0f} MiB); anonymous (heap) RSS: idle "
          f"{g.get('idle_anon_mib', 0):.0f} MiB, after draining {g.get('drained_anon_mib', 0):.0f} MiB (second half "
          f"grew {g.get('drained_anon_mib', 0) - g.get('half_anon_mib', 0):.0f} MiB; goal: no growth with messages "
          f"already consumed)")


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
