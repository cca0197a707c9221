"""TimerMetrics: ``config/timermetrics``, how many timer messages wait in the wheel per topic.

JSON ``{"timingCount": {topic: {"count": n, "timeStamp": ms}}, "dataVersion": {...}}`` as
upstream. +1 when a message is first filed (a delete marker -1, for the message it cancels),
-1 when the wheel delivers it; rolls and direct puts of due messages do not count. Like
upstream's it is a running count: a crash's re-filed duplicates can leave it off by those.
Persisted with every timer flush; also the body of GET_TIMER_METRICS.
"""

from __future__ import annotations

import time
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JsonConfigManager
from orbitmq.common.route import DataVersion

# TimerMetrics.timerDist: the bounds (s) of rocketmq_timer_message_snapshot{timer_bound_s}.
TIMER_DIST_S = (5, 60, 300, 900, 3600, 14400, 28800, 86400)


class TimerMetrics(JsonConfigManager):
    file_name = "timermetrics"

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.timing_count: dict[str, list[int]] = {}
        self.data_version = DataVersion()
        self.dirty = False

    def add(self, topic: str, delta: int) -> None:
        with self._lock:
            entry = self.timing_count.get(topic)
            if entry is None:
                entry = self.timing_count[topic] = [0, 0]
            entry[0] += delta
            entry[1] = time.time_ns() // 1_000_000
            self.dirty = True

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {topic: entry[0] for topic, entry in self.timing_count.items()}

    def persist_if_changed(self) -> None:
        """Write when a count changed since the last write (worker thread)."""
        with self._lock:
            if not self.dirty:
                return
            self.dirty = False
            self.data_version.next_version()
        self.persist()

    def encode(self) -> dict[str, Any]:
        return {"timingCount": {topic: {"count": count, "timeStamp": stamp}
                                for topic, (count, stamp) in self.timing_count.items()},
                "dataVersion": self.data_version.to_json_dict()}

    def parse(self, obj: Any) -> tuple[dict[str, list[int]], DataVersion]:
        if not isinstance(obj, dict) or not isinstance(obj.get("timingCount", {}), dict):
            raise ValueError("timermetrics: expected {'timingCount': {...}, 'dataVersion': {...}}")
        table = {str(topic): [int(v.get("count", 0)), int(v.get("timeStamp", 0))]
                 for topic, v in (obj.get("timingCount") or {}).items()}
        version = DataVersion.from_json_dict(obj["dataVersion"]) if "dataVersion" in obj else DataVersion()
        return table, version

    def apply(self, parsed: tuple[dict[str, list[int]], DataVersion]) -> None:
        self.timing_count, self.data_version = parsed
