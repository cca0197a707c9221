"""Off/on comparisons: the same load with a feature off and on, alternated, then the ratio.

The benchmarks of one switch (ACL, metrics, POP buffer merge, ...) share this so each reports
the same figures: every run as it ends, then the median throughput and the median server CPU
per message of each side, on as a multiple of off. Alternating off/on each round lets the
machine's drift hit both sides alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from typing import Any

Summary = dict[str, Any]


async def alternate_off_on(rounds: int, measure: Callable[[str], Awaitable[Summary]],
                           describe: Callable[[int, str, Summary], str] | None) -> Summary:
    """``measure("off")`` then ``measure("on")`` for ``rounds`` rounds; ``describe(round, label,
    run)`` gives the line printed after each run (None: print nothing). Each run needs ``tps``
    and ``cpu_us_per_msg`` (None when unknown)."""
    runs: dict[str, list[Summary]] = {"off": [], "on": []}
    for index in range(rounds):
        for label in ("off", "on"):
            summary = await measure(label)
            runs[label].append(summary)
            if describe is not None:
                print(describe(index + 1, label, summary), flush=True)
    off = statistics.median(r["tps"] for r in runs["off"])
    on = statistics.median(r["tps"] for r in runs["on"])
    cpus = {k: [r["cpu_us_per_msg"] for r in v if r["cpu_us_per_msg"] is not None] for k, v in runs.items()}
    cpu_off = statistics.median(cpus["off"]) if cpus["off"] else None
    cpu_on = statistics.median(cpus["on"]) if cpus["on"] else None
    return {"off": runs["off"], "on": runs["on"], "median_off": off, "median_on": on,
            "ratio": on / off if off else None, "cpu_us_per_msg_off": cpu_off, "cpu_us_per_msg_on": cpu_on,
            "cpu_ratio": cpu_on / cpu_off if cpu_on and cpu_off else None}


def cpu_suffix(summary: Summary) -> str:
    """", server CPU N us/msg" for a run whose CPU is known, else nothing."""
    cpu = summary["cpu_us_per_msg"]
    return f", server CPU {cpu:.0f} us/msg" if cpu is not None else ""


def print_off_on(name: str, feature: str, summary: Summary, measure: str = "throughput") -> None:
    """The closing lines: on as a multiple of off, for throughput and for server CPU."""
    if summary["ratio"] is None:
        return
    print(f"{name}: {measure} with {feature} on is {summary['ratio']:.3f} x off "
          f"(medians {summary['median_on']:.0f} vs {summary['median_off']:.0f} msgs/s)")
    if summary["cpu_ratio"] is not None:
        print(f"{name}: server CPU per message with {feature} on is {summary['cpu_ratio']:.3f} x off "
              f"(medians {summary['cpu_us_per_msg_on']:.0f} vs {summary['cpu_us_per_msg_off']:.0f} us/msg)")
