"""Latency/throughput bookkeeping shared by the gRPC benchmarks."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class Stats:
    """Counts messages and records one latency (ms) per request or per message."""

    messages: int = 0
    requests: int = 0
    errors: int = 0
    # What the failed requests answered ("CODE: message", or the gRPC status), so a run with
    # errors says why (e.g. the broker's flow control under machine load).
    error_kinds: Counter[str] = field(default_factory=Counter)
    # Rate-limited runs: how late (ms) the load generator started each request after its slot.
    start_lags_ms: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    # End-to-end runs: each message's latency split at the broker's store timestamp (born ->
    # stored, stored -> received), to tell where a tail comes from. Empty where nothing stores.
    send_leg_ms: list[float] = field(default_factory=list)
    consume_leg_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    # Messages of the untimed warm-up request (stored too, so a drain after the run receives
    # them besides ``messages``: the "one batch of 32 more" of issue 17).
    warmup_messages: int = 0

    def add_error(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind[:120]] += 1

    def summary(self) -> dict[str, Any]:
        values = sorted(self.latencies_ms)
        elapsed = self.elapsed_s or 1e-9
        return {
            "messages": self.messages,
            "requests": self.requests,
            "errors": self.errors,
            "tps": self.messages / elapsed,
            "p50_ms": percentile(values, 50),
            "p99_ms": percentile(values, 99),
            "max_ms": values[-1] if values else 0.0,
            "elapsed_s": self.elapsed_s,
            "warmup_messages": self.warmup_messages,
            "start_lag_p99_ms": percentile(sorted(self.start_lags_ms), 99),
            "error_kinds": dict(self.error_kinds.most_common(5)),
            "send_leg_p99_ms": percentile(sorted(self.send_leg_ms), 99),
            "consume_leg_p99_ms": percentile(sorted(self.consume_leg_ms), 99),
        }


def format_summary(title: str, s: dict[str, Any], what: str = "RT") -> str:
    return (f"{title}: {s['tps']:.0f} msgs/s ({s['messages']:.0f} msgs, {s['requests']:.0f} requests, "
            f"{s['errors']:.0f} errors in {s['elapsed_s']:.1f}s) {what} p50 {s['p50_ms']:.2f} ms, "
            f"p99 {s['p99_ms']:.2f} ms, max {s['max_ms']:.2f} ms"
            + (f", start lag p99 {s['start_lag_p99_ms']:.2f} ms" if s.get("start_lag_p99_ms") else "")
            + (f" (p99 born -> stored {s['send_leg_p99_ms']:.2f} ms, stored -> received "
               f"{s['consume_leg_p99_ms']:.2f} ms)" if s.get("consume_leg_p99_ms") else "")
            + "".join(f"\n  {n} x {kind}" for kind, n in (s.get("error_kinds") or {}).items()))
