"""`orbitmq bench proxy-workers`: how single-message sends scale with proxy processes (issue 17, lever 1).

In one run, for each ``--workers`` count in turn, round after round: a fresh `orbitmq local
--proxy-workers N` (broker in its child process), the official clients' shape of load (one
message per SendMessage, ``-w`` in flight) spread over ``-c`` connections, as that many client
processes would (one connection each; a worker serves whole connections). Prints each run with
the server tree's CPU per message, the medians, and each count's ratio to the first; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from collections.abc import Sequence

from orbitmq.bench.load import LoadOptions, add_comparison_arguments
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.metrics import measure_send
from orbitmq.bench.scenario import stop_local
from orbitmq.bench.stats import format_summary
from orbitmq.common.net import free_ports
from orbitmq.local import default_proxy_workers

TOPIC = "OrbitWorkersBench"


async def measure(workers: int, opts: LoadOptions) -> dict:
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-workers-") as data_dir:
        ports = free_ports(3)
        proc = launch_local(data_dir, [*local_ports_args(*ports), "--proxy-workers", str(workers)])
        try:
            return await measure_send(proc.pid, f"127.0.0.1:{ports[2]}", opts, None, 0.0)
        finally:
            stop_local(proc)


async def run(opts: LoadOptions, counts: list[int], rounds: int) -> dict:
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    for index in range(rounds):
        for n in counts:  # alternating, so the machine's drift hits every count alike
            summary = await measure(n, opts)
            runs[n].append(summary)
            cpu = summary["cpu_us_per_msg"]
            print(format_summary(f"round {index + 1}, {n} proxy process(es)", summary)
                  + (f", server CPU {cpu:.0f} us/msg" if cpu is not None else ""), flush=True)
    medians = {n: statistics.median(r["tps"] for r in rs) for n, rs in runs.items()}
    first = medians[counts[0]]
    return {"runs": {str(n): rs for n, rs in runs.items()}, "median_tps": {str(n): v for n, v in medians.items()},
            "ratio_to_first": {str(n): (v / first if first else None) for n, v in medians.items()}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench proxy-workers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    default_counts = sorted({1, max(2, default_proxy_workers())})
    parser.add_argument("--workers", default=",".join(map(str, default_counts)),
                        help="proxy process counts to compare, first is the reference (default: 1 and the "
                             "CPUs minus one, at least 2)")
    add_comparison_arguments(parser, concurrency=64, duration=8.0, batch=False, rounds_help="rounds over every count")
    parser.add_argument("-c", "--connections", type=int, default=8, help="gRPC connections (client processes)")
    args = parser.parse_args(list(argv or []))
    try:
        counts = [int(x) for x in args.workers.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--workers takes counts like 1,2,4, not {args.workers!r}")
    if not counts or min(counts) < 1:
        parser.error("--workers counts must be at least 1")
    opts = LoadOptions(topic=TOPIC, size=args.size, concurrency=args.concurrency, batch=1, duration=args.duration,
                       connections=args.connections)
    summary = asyncio.run(run(opts, counts, max(args.rounds, 1)))
    if args.json:
        print(json.dumps(summary))
        return 0
    for n in counts:
        ratio = summary["ratio_to_first"][str(n)]
        print(f"proxy-workers: {n} process(es): median {summary['median_tps'][str(n)]:.0f} msgs/s"
              + (f" = {ratio:.2f} x {counts[0]}" if ratio is not None else ""))
    return 0
