"""StatsItem's minute/hour/day windows for VIEW_BROKER_STATS_DATA (mqadmin statsAll).

Upstream keeps, per stats key, snapshots of a running total every 10 s (the last minute), every
minute (the last hour) and every hour (the last day), and answers BrokerStatsData: for each
window the sum over it, its rate per second and the average time per call (avgpt; 0 here: the
counters hold message numbers, not calls with durations). The totals themselves are kept by
BrokerStatsManager; this module only remembers their history, sampled from its 1 s timer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

# (window, sampling period ms, snapshots kept): the last minute, hour and day.
WINDOWS: tuple[tuple[str, int, int], ...] = (
    ("statsMinute", 10_000, 7),
    ("statsHour", 60_000, 61),
    ("statsDay", 3_600_000, 25),
)


class StatsHistory:
    """Snapshots of many named running totals, one history per window."""

    def __init__(self, now_ms: int) -> None:
        self.created_ms = now_ms
        self._last_sample = {name: -(10**18) for name, _period, _kept in WINDOWS}
        self._history: dict[str, dict[Any, deque[tuple[int, int]]]] = {name: {} for name, _p, _k in WINDOWS}

    def sample(self, now_ms: int, totals: Iterable[tuple[Any, int]]) -> None:
        """Record the totals in every window whose period has passed; a key seen for the first
        time starts from zero at the broker's start, so its whole count is inside the windows."""
        due = [(name, kept) for name, period, kept in WINDOWS if now_ms - self._last_sample[name] >= period]
        if not due:
            return
        items = list(totals)
        for name, kept in due:
            self._last_sample[name] = now_ms
            table = self._history[name]
            for key, total in items:
                history = table.get(key)
                if history is None:
                    history = table[key] = deque([(self.created_ms, 0)], maxlen=kept)
                history.append((now_ms, total))

    def forget(self, keys: list[Any]) -> None:
        for table in self._history.values():
            for key in keys:
                table.pop(key, None)

    def stats_data(self, key: Any, total: int, now_ms: int) -> dict[str, dict[str, float]]:
        """BrokerStatsData of one key whose running total is ``total`` now."""
        out: dict[str, dict[str, float]] = {}
        for name, period, kept in WINDOWS:
            history = self._history[name].get(key)
            if history:
                start_ts, start_total = history[0]
                # The newest snapshot at least a window (kept - 1 periods) old, else the oldest.
                horizon = now_ms - period * (kept - 1)
                for ts, value in history:
                    if ts > horizon:
                        break
                    start_ts, start_total = ts, value
            else:
                start_ts, start_total = self.created_ms, 0
            span = max(now_ms - start_ts, 1)
            total_sum = max(total - start_total, 0)
            out[name] = {"sum": total_sum, "tps": round(total_sum * 1000.0 / span, 2), "avgpt": 0.0}
        return out
