"""The hot-path benchmarks of two checkouts, interleaved in one run: before and after a change.

The machine's speed swings threefold from day to day, so a figure from another day proves
nothing about a refactoring; this runs `orbitmq bench store`, the single-message and 32-message
batch sends and the receive + ack drain for both trees, alternating A, B, A, B... and prints the
median of each side and the ratio after/before.

    AFTER_VENV_BIN/python scripts/bench_before_after.py BEFORE_VENV_BIN AFTER_VENV_BIN [--rounds 3]

Each *_VENV_BIN is the bin/ folder of a venv with that tree installed (its `python` runs
`-m orbitmq`). The store figures are the tree's own store engine (in-process). The sends and the
drain go to that tree's `orbitmq local` on free loopback ports and are driven by the AFTER
tree's load generator for both sides, so only the servers differ.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.scenario import stop_local
from orbitmq.common.net import free_ports

STORE_LINES = {
    "store append, 1 put/msg": "ASYNC_FLUSH append, 1 writer",
    "store dispatch (reput)": "dispatch to ConsumeQueues",
    "store read back": "read back by queue",
    "store batch append 32": "ASYNC_FLUSH batch append",
}


def store_figures(bin_dir: Path, messages: int) -> dict[str, float]:
    out = subprocess.run([str(bin_dir / "python"), "-m", "orbitmq", "bench", "store", "--messages", str(messages)],
                         capture_output=True, text=True, check=True, timeout=900).stdout
    figures = {}
    for name, label in STORE_LINES.items():
        match = re.search(rf"^{re.escape(label)}.*?([\d,]+) msgs/s", out, re.M)
        if match is None:
            raise RuntimeError(f"no '{label}' line in bench store's output:\n{out}")
        figures[name] = float(match.group(1).replace(",", ""))
    return figures


def _bench_json(client_bin: Path, args: list[str]) -> dict:
    out = subprocess.run([str(client_bin / "python"), "-m", "orbitmq", "bench", *args, "--json"],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"bench {args} failed: {out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def send_figures(server_bin: Path, client_bin: Path, duration: int, drain_messages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="orbitmq-before-after-") as data_dir:
        namesrv, broker, proxy, metrics = free_ports(4)
        proc = launch_local(data_dir, [*local_ports_args(namesrv, broker, proxy),
                                       f"metricsPromExporterPort={metrics}"], python=str(server_bin / "python"))
        try:
            endpoint = f"127.0.0.1:{proxy}"
            single = _bench_json(client_bin, ["producer", "--endpoint", endpoint, "-t", "BenchSingle",
                                              "-b", "1", "-w", "64", "-d", str(duration)])
            batch = _bench_json(client_bin, ["producer", "--endpoint", endpoint, "-t", "BenchBatch",
                                             "-b", "32", "-w", "16", "-d", str(duration)])
            drain = _bench_json(client_bin, ["drain", "--endpoint", endpoint, "-t", "BenchDrain",
                                             "-n", str(drain_messages)])
        finally:
            stop_local(proc)
    if drain["missing"] or drain["duplicates"] or drain["errors"]:
        raise RuntimeError(f"the drain of {server_bin} lost or repeated messages: {drain}")
    return {"send single, 64 in flight": single["tps"], "send batch 32": batch["tps"],
            "drain receive+ack": drain["tps"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="bin/ of the venv with the tree before the change")
    parser.add_argument("after", type=Path, help="bin/ of the venv with the tree after the change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store-messages", type=int, default=200_000)
    parser.add_argument("-d", "--duration", type=int, default=10, help="seconds of each send load")
    parser.add_argument("--drain-messages", type=int, default=50_000)
    args = parser.parse_args(argv)
    runs: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for round_no in range(1, args.rounds + 1):
        for side in ("before", "after") if round_no % 2 else ("after", "before"):
            bin_dir = getattr(args, side)
            figures = store_figures(bin_dir, args.store_messages)
            figures |= send_figures(bin_dir, args.after, args.duration, args.drain_messages)
            for name, value in figures.items():
                runs[side].setdefault(name, []).append(value)
            print(f"round {round_no} {side}: " + ", ".join(f"{k} {v:,.0f}" for k, v in figures.items()), flush=True)
    print(f"\nmedians of {args.rounds} rounds (msgs/s), sides alternating:")
    print(f"{'':32} {'before':>12} {'after':>12} {'after/before':>13}")
    for name in runs["before"]:
        before = statistics.median(runs["before"][name])
        after = statistics.median(runs["after"][name])
        print(f"{name:32} {before:>12,.0f} {after:>12,.0f} {after / before:>12.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
