"""`orbitmq bench memory`: `orbitmq local`'s resident memory idle and after draining messages.

Starts `orbitmq local` (temporary data dir), reads the RSS of its whole process tree (VmRSS from
/proc, Linux only) when idle, then fills and drains ``--messages`` messages (send batches of 32,
receive + batched ack) in two halves and reads it after each: what grows between the halves
grows with messages already consumed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench.drain import fill_and_drain


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree_rss_mib(pid: int, field: str = "VmRSS") -> float | None:
    """``field`` of /proc/PID/status (VmRSS, RssAnon, RssFile) summed over ``pid`` and all its
    descendants, in MiB (None where /proc has no figures). RssFile counts the store's mapped
    CommitLog/ConsumeQueue pages (page cache the kernel reclaims at will); RssAnon is the heap."""
    total = 0
    seen = False
    stack = [pid]
    prefix = field + ":"
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith(prefix):
                        total += int(line.split()[1])
                        seen = True
                        break
        except OSError:
            continue
        stack += _children(p)
    return total / 1024 if seen else None


def _read(pid: int) -> tuple[float | None, float | None]:
    """(RSS, anonymous RSS) of the tree in MiB."""
    return tree_rss_mib(pid), tree_rss_mib(pid, "RssAnon")


def measure(endpoint: str, pid: int, messages: int, size: int = 1024) -> dict[str, float | None]:
    """RSS idle, after draining half of ``messages`` and after all of them (MiB)."""
    idle, idle_anon = _read(pid)
    half = messages // 2
    first = asyncio.run(fill_and_drain(endpoint, "OrbitBenchMemory", "OrbitBenchMemoryGroup", half, size))
    time.sleep(1)
    mid, mid_anon = _read(pid)
    second = asyncio.run(fill_and_drain(endpoint, "OrbitBenchMemory", "OrbitBenchMemoryGroup",
                                        messages - half, size))
    time.sleep(1)
    after, after_anon = _read(pid)
    return {"idle_mib": idle, "half_mib": mid, "after_mib": after, "idle_anon_mib": idle_anon,
            "half_anon_mib": mid_anon, "after_anon_mib": after_anon, "messages": first.received + second.received}


def format_memory(m: dict) -> str:
    def mib(v: float | None) -> str:
        return "unknown" if v is None else f"{v:.0f} MiB"
    def grew(a: float | None, b: float | None) -> float | None:
        return b - a if a is not None and b is not None else None
    return (f"orbitmq local RSS (all processes): idle {mib(m['idle_mib'])}, after draining {m['messages'] // 2:,} "
            f"{mib(m['half_mib'])}, after draining {m['messages']:,} {mib(m['after_mib'])} "
            f"(second half grew {mib(grew(m['half_mib'], m['after_mib']))}); anonymous (heap) part: idle "
            f"{mib(m.get('idle_anon_mib'))}, {mib(m.get('half_anon_mib'))}, {mib(m.get('after_anon_mib'))} "
            f"(second half grew {mib(grew(m.get('half_anon_mib'), m.get('after_anon_mib')))}; the rest is the "
            f"store's mapped files)")


def main(argv: Sequence[str] | None = None) -> int:
    from orbitmq.bench.scenario import start_local, stop_local
    parser = argparse.ArgumentParser(prog="orbitmq bench memory", description=__doc__)
    parser.add_argument("-n", "--messages", type=int, default=1_000_000)
    parser.add_argument("-s", "--size", type=int, default=1024)
    args = parser.parse_args(list(argv or []))
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-mem-") as data_dir:
        proc, endpoint = start_local(data_dir)
        try:
            time.sleep(2)
            print(format_memory(measure(endpoint, proc.pid, args.messages, args.size)))
        finally:
            stop_local(proc)
    return 0
