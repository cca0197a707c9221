"""`orbitmq bench proxy-mode`: single-message sends and the drain, proxyMode=cluster vs local.

In one run, against a fresh `orbitmq local` child per measurement (temporary data dir, free ports):

* ``cluster``: the default layout, the broker in a child process and the proxy (one process,
  ``--proxy-workers 1``) calling it over Remoting on loopback: two processes, two cores;
* ``cluster-1p``: ``--one-process``, the proxy still calling the broker over Remoting, but on the
  broker's own event loop: the same one core local mode has, so the difference is the hop alone;
* ``local``: ``--proxy-mode local`` (services/proxy/local.py), the proxy in the broker's process
  calling its processors directly.

Each measurement is the `bench producer` load (one message per SendMessage, ``--concurrency`` in
flight, ``--duration`` seconds) and then the `bench drain` load (fill ``--messages`` messages,
receive them in batches of 32 and ack each batch), with the servers' CPU per message from /proc.
The modes alternate for ``--rounds`` rounds so drift of the machine hits all alike; the medians
and the ratios local / cluster and local / cluster-1p are printed. Never asserts.

``--profile DIR`` runs each mode once more under cProfile (the `orbitmq local` process; in
``cluster`` mode that is the proxy's process only) with the same loads, and prints where that
process's time went: the share of Remoting (codec, channel), the proxy, the broker and its store,
gRPC and the event loop, in microseconds per message (inflated by cProfile itself, so compare
the modes' figures with each other only), and the top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import statistics
import subprocess
import tempfile
from collections.abc import Sequence

from orbitmq.bench.drain import drain as run_drain
from orbitmq.bench.drain import fill, format_drain
from orbitmq.bench.load import LoadOptions, run_send_load
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.metrics import tree_cpu_seconds
from orbitmq.bench.scenario import stop_local
from orbitmq.bench.stats import format_summary
from orbitmq.common.net import free_ports

MODES = {
    "cluster": ["--proxy-workers", "1"],
    "cluster-1p": ["--one-process", "--proxy-workers", "1"],
    "local": ["--proxy-mode", "local"],
}
TOPIC = "OrbitProxyModeBench"
DRAIN_TOPIC = "OrbitProxyModeDrain"
GROUP = "OrbitProxyModeDrainGroup"
# Where a profiled process's own time (tottime) went, by the source folder of each function.
# "idle": the loop waiting in epoll; "C callbacks": C code run straight from the loop's callbacks
# (grpc's core and servicer glue, the compiled speedups), which cProfile cannot split further.
BUCKETS = (("idle", ("<method 'poll' of 'select.epoll' objects>",)),
           ("C callbacks", ("<method 'run' of '_contextvars.Context' objects>",)),
           ("startup", ("<built-in method builtins.compile>", "<built-in method builtins.exec>",
                        "<frozen importlib", "<built-in method _imp.")),
           ("remoting", ("core/remoting/", "orbitmq/remoting/")),
           ("proxy", ("services/proxy/", "orbitmq/proxy/")),
           ("broker store", ("services/broker/store/", "orbitmq/broker/store/")),
           ("broker", ("services/broker/", "orbitmq/broker/")),
           ("grpc", ("/grpc/", "grpc._cython", "cygrpc")),
           ("protobuf", ("/google/protobuf/", "upb", "_message")),
           ("asyncio", ("/asyncio/", "selectors.py", "uvloop")))


def launch(mode: str, data_dir: str, ports: list[int], profile: str | None = None) -> subprocess.Popen:
    """`orbitmq local` in ``mode``, under cProfile writing ``profile`` when given."""
    return launch_local(data_dir, [*local_ports_args(*ports), *MODES[mode], "metricsExporterType=DISABLE"],
                        timeout=120, python_args=["-m", "cProfile", "-o", profile] if profile else [],
                        what=f"orbitmq local ({mode})")


async def measure(mode: str, opts: LoadOptions, messages: int, profile: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"orbitmq-bench-proxy-{mode}-") as data_dir:
        ports = free_ports(3)
        proc = launch(mode, data_dir, ports, profile)
        endpoint = f"127.0.0.1:{ports[2]}"
        try:
            load = LoadOptions(**{**opts.__dict__, "endpoint": endpoint})
            await fill(endpoint, TOPIC, 64, opts.size)  # routes and topic created before the clock runs
            cpu0 = tree_cpu_seconds(proc.pid)
            send = (await run_send_load(load)).summary()
            cpu1 = tree_cpu_seconds(proc.pid)
            sent = await fill(endpoint, DRAIN_TOPIC, messages, opts.size)
            cpu2 = tree_cpu_seconds(proc.pid)
            result = await run_drain(endpoint, DRAIN_TOPIC, GROUP, len(sent))
            cpu3 = tree_cpu_seconds(proc.pid)
        finally:
            stop_local(proc)
    result.sent = len(sent)
    result.missing = len(set(sent) - set(result.ids))
    drained = result.summary()
    if None not in (cpu0, cpu1, cpu2, cpu3):
        send["cpu_us_per_msg"] = (cpu1 - cpu0) * 1e6 / send["messages"] if send["messages"] else None
        drained["cpu_us_per_msg"] = (cpu3 - cpu2) * 1e6 / drained["received"] if drained["received"] else None
    return {"send": send, "drain": drained, "messages": send["messages"] + 64 + len(sent) + drained["received"]}


def _cpu(summary: dict) -> str:
    cpu = summary.get("cpu_us_per_msg")
    return f", server CPU {cpu:.0f} us/msg" if cpu is not None else ""


def where_time_went(path: str, messages: int, top: int = 12) -> dict:
    """The profiled process's own time by BUCKETS, in microseconds per message (``messages``: sent,
    filled and drained), and its ``top`` functions."""
    stats = pstats.Stats(path)
    total = 0.0
    shares: dict[str, float] = {name: 0.0 for name, _ in BUCKETS}
    shares["other"] = 0.0
    rows = []
    for (filename, line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        total += tottime
        for name, needles in BUCKETS:
            if any(n in filename or n in func for n in needles):
                shares[name] += tottime
                break
        else:
            shares["other"] += tottime
        rows.append((tottime, f"{os.path.basename(filename)}:{line}({func})"))
    rows.sort(reverse=True)
    busy = total - shares["idle"] - shares["startup"]
    return {"total_s": total, "busy_s": busy, "messages": messages,
            "us_per_msg": {k: v * 1e6 / messages if messages else 0.0 for k, v in shares.items()},
            "busy_us_per_msg": busy * 1e6 / messages if messages else 0.0,
            "top": [(name, t) for t, name in rows[:top]]}


def median(runs: list[dict], phase: str, key: str) -> float | None:
    values = [r[phase][key] for r in runs if r[phase].get(key) is not None]
    return statistics.median(values) if values else None


async def run(opts: LoadOptions, messages: int, rounds: int, modes: list[str], profile_dir: str | None,
              quiet: bool) -> dict:
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for index in range(rounds):
        for mode in modes:
            r = await measure(mode, opts, messages)
            runs[mode].append(r)
            if not quiet:
                print(format_summary(f"round {index + 1} {mode:10} send", r["send"]) + _cpu(r["send"]), flush=True)
                print(format_drain(f"round {index + 1} {mode:10} drain", r["drain"]) + _cpu(r["drain"]), flush=True)
    summary: dict = {"runs": runs, "medians": {}}
    for mode in modes:
        summary["medians"][mode] = {phase: {"tps": median(runs[mode], phase, "tps"),
                                            "cpu_us_per_msg": median(runs[mode], phase, "cpu_us_per_msg"),
                                            "p50_ms": median(runs[mode], phase, "p50_ms")}
                                    for phase in ("send", "drain")}
    if profile_dir:
        os.makedirs(profile_dir, exist_ok=True)
        summary["profiles"] = {}
        for mode in modes:
            path = os.path.join(profile_dir, f"{mode}.prof")
            profiled = await measure(mode, opts, messages, profile=path)
            summary["profiles"][mode] = where_time_went(path, profiled["messages"])
    return summary


def report(summary: dict) -> None:
    med = summary["medians"]
    for mode, phases in med.items():
        for phase, m in phases.items():
            cpu = f", server CPU {m['cpu_us_per_msg']:.0f} us/msg" if m["cpu_us_per_msg"] is not None else ""
            print(f"median {mode:10} {phase:5}: {m['tps']:.0f} msgs/s{cpu}")
    if "local" in med:
        for base in ("cluster", "cluster-1p"):
            if base not in med:
                continue
            for phase in ("send", "drain"):
                lo, ba = med["local"][phase], med[base][phase]
                ratio = lo["tps"] / ba["tps"] if lo["tps"] and ba["tps"] else None
                cpu = (lo["cpu_us_per_msg"] / ba["cpu_us_per_msg"]
                       if lo["cpu_us_per_msg"] and ba["cpu_us_per_msg"] else None)
                print(f"proxy mode: local / {base} {phase}: throughput {ratio:.3f} x"
                      + (f", server CPU per message {cpu:.3f} x" if cpu is not None else ""))
    for mode, prof in (summary.get("profiles") or {}).items():
        costs = ", ".join(f"{k} {v:.0f}" for k, v in sorted(prof["us_per_msg"].items(), key=lambda kv: -kv[1])
                          if k not in ("idle", "startup"))
        print(f"profile {mode}: {prof['busy_us_per_msg']:.0f} us busy per message ({prof['messages']} messages; "
              f"under cProfile, so inflated), of which {costs}")
        for name, t in prof["top"]:
            print(f"    {t:7.3f} s  {name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench proxy-mode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-s", "--size", type=int, default=1024, help="message body size in bytes")
    parser.add_argument("-w", "--concurrency", type=int, default=16, help="sends in flight")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds of single-message sends")
    parser.add_argument("-n", "--messages", type=int, default=20_000, help="messages per drain")
    parser.add_argument("-r", "--rounds", type=int, default=3, help="rounds over the modes")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--profile", metavar="DIR", help="also profile each mode once, keeping DIR/<mode>.prof")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)}")
    opts = LoadOptions(topic=TOPIC, size=args.size, concurrency=args.concurrency, batch=1, duration=args.duration)
    summary = asyncio.run(run(opts, args.messages, max(args.rounds, 1), modes, args.profile, args.json))
    if args.json:
        print(json.dumps(summary))
    else:
        report(summary)
    return 0
